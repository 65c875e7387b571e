"""Publish a business event for a trigger (`[[triggers]]` in the Hermes config) and wait for
the agent's answer on the trigger's `reply_subject`."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import Callable, Optional

from nats.errors import TimeoutError as NatsTimeout

from .connection import Connection
from .envelope import Envelope
from .errors import Timeout


@dataclass
class Reply:
    """The agent's answer to an event: the session that answered and its text."""

    agent: Optional[str]
    session: Optional[str]
    text: str
    envelope: Envelope


async def publish_event(conn: Connection, subject: str, event: dict,
                        event_id: Optional[str] = None) -> str:
    """Publish `event` (JSON) on `subject` with `Nats-Msg-Id: <event_id>`, so JetStream and
    the trigger's `dedupe` handle a repeated event once. Returns the event id used."""
    event_id = event_id or f"evt-{uuid.uuid4().hex[:12]}"
    await conn.publish(subject, json.dumps(event, ensure_ascii=False).encode(),
                       headers={"Nats-Msg-Id": event_id})
    await conn.nc.flush()
    return event_id


async def publish_and_wait(conn: Connection, subject: str, event: dict, reply_subject: str,
                           event_id: Optional[str] = None, timeout: float = 60.0,
                           on_published: Optional[Callable[[str], None]] = None) -> Reply:
    """Subscribe to `reply_subject`, publish the event, and return the agent's answer
    (`on_published(event_id)` is called once the event is out)."""
    replies = await conn.nc.subscribe(reply_subject)
    try:
        event_id = await publish_event(conn, subject, event, event_id)
        if on_published is not None:
            on_published(event_id)
        try:
            msg = await replies.next_msg(timeout=timeout)
        except (asyncio.TimeoutError, NatsTimeout) as e:
            raise Timeout(f"no answer on {reply_subject} within {timeout} s; is a trigger for "
                          f"{subject} configured and `hermes serve` running?") from e
        envelope = Envelope.decode(msg.data)
        conn.seen("received", reply_subject, envelope)
        body = envelope.body if isinstance(envelope.body, dict) else {}
        return Reply(envelope.agent, envelope.session, body.get("text", ""), envelope)
    finally:
        await replies.unsubscribe()
