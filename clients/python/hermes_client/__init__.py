"""Talk to a Hermes agent engine over NATS.

    import asyncio
    from hermes_client import connect

    async def main():
        hermes = await connect("nats://127.0.0.1:4222")
        async with await hermes.session("assistant", "s1", user="u-1") as chat:
            turn = await chat.turn("What time is it?")
            print(turn.answer)
        await hermes.close()

    asyncio.run(main())

Everything this package sends and receives is a Hermes envelope described by the JSON
Schema under `schema/` in the Hermes repository (`hermes schema --out DIR` writes it).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from . import events, subjects
from .connection import Connection, WireObserver
from .connection import connect as _connect
from .envelope import ENVELOPE_VERSION, Envelope
from .errors import HermesError, InvalidId, NoService, Refused, Timeout, UnexpectedReply
from .memory import Memory, MemoryClient, Recalled
from .session import Accepted, Session, Turn
from .triggers import Reply, publish_and_wait, publish_event
from .worker import Handler, ToolFailure, ToolWorker

__all__ = [
    "Accepted", "ENVELOPE_VERSION", "Envelope", "Handler", "Hermes", "HermesError",
    "InvalidId", "Memory", "MemoryClient", "NoService", "Recalled", "Refused", "Reply",
    "Session", "Timeout", "ToolFailure", "ToolWorker", "Turn", "UnexpectedReply", "connect",
    "events", "subjects",
]


class Hermes:
    """A connection to a Hermes deployment and the operations it offers."""

    def __init__(self, conn: Connection):
        self.conn = conn

    async def session(self, agent: str, session: str, user: str) -> Session:
        """A conversation with `agent` in `session` as `user`, already listening."""
        return await Session.open(self.conn, agent, session, user)

    async def publish_event(self, subject: str, event: dict,
                            event_id: Optional[str] = None) -> str:
        """Publish an event for a trigger; returns its id (`Nats-Msg-Id`)."""
        return await publish_event(self.conn, subject, event, event_id)

    async def publish_and_wait(self, subject: str, event: dict, reply_subject: str,
                               event_id: Optional[str] = None, timeout: float = 60.0,
                               on_published: Optional[Callable[[str], None]] = None) -> Reply:
        """Publish an event and wait for the agent's answer on `reply_subject`."""
        return await publish_and_wait(self.conn, subject, event, reply_subject, event_id,
                                      timeout, on_published)

    def memory(self, user: str, namespace: str = "default") -> MemoryClient:
        """The memories of `user`."""
        return MemoryClient(self.conn, user, namespace)

    async def serve_tool(self, name: str, handler: Handler) -> ToolWorker:
        """Answer calls of tool `name` with `handler(arguments)` until `stop()`."""
        return await ToolWorker(self.conn, name, handler).start()

    async def close(self) -> None:
        await self.conn.close()


async def connect(url: str = "nats://127.0.0.1:4222", *,
                  observer: Optional[WireObserver] = None, **options: Any) -> Hermes:
    """Connect to the NATS server Hermes runs on. Options: `user`/`password`, `token`,
    `nkeys_seed`, `credentials` (a .creds file), `inbox_prefix`, `publisher`; `observer`
    sees every envelope sent and received."""
    return Hermes(await _connect(url, observer=observer, **options))
