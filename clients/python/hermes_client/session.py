"""One conversation: send messages to a session and follow its turns' events."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import AsyncIterator, Callable, List, Optional

from . import subjects
from .connection import Connection
from .envelope import Envelope
from .errors import NoService, Timeout
from .events import (ENDING, Answer, ConfirmationRequired, Error, TurnEvent, TurnStarted,
                     parse_event)

#: How long a request waits for a session service that is (re)starting.
SERVICE_GRACE = 10.0


@dataclass
class Accepted:
    """The session persisted the message (`seq` is its place in the session's log)."""

    message_id: str
    session: str
    seq: int
    turn_id: Optional[str] = None


@dataclass
class Turn:
    """What one turn did, until its answer, its error or a pause for a confirmation."""

    accepted: Accepted
    events: List[TurnEvent] = field(default_factory=list)
    answer: Optional[str] = None
    error: Optional[Error] = None
    needs_confirmation: Optional[ConfirmationRequired] = None


class Session:
    """`hermes.in.<agent>.<session>` to talk, `hermes.out.<agent>.<session>.<reader>` to listen.

    Open it with `await Session.open(...)` (or `Hermes.session`): it subscribes to the events
    before anything is sent, so none is missed."""

    def __init__(self, conn: Connection, agent: str, session: str, user: str):
        self.conn = conn
        self.agent = subjects.check_id("agent", agent)
        self.session = subjects.check_id("session", session)
        self.user = subjects.check_id("user", user)
        self._events: asyncio.Queue = asyncio.Queue()
        self._sub = None

    @classmethod
    async def open(cls, conn: Connection, agent: str, session: str, user: str) -> "Session":
        self = cls(conn, agent, session, user)

        async def on_event(msg):
            envelope = Envelope.decode(msg.data)
            conn.seen("received", msg.subject, envelope)
            if envelope.kind == "turn.event" and isinstance(envelope.body, dict):
                await self._events.put(parse_event(envelope.body))
            elif envelope.kind == "turn.events" and isinstance(envelope.body, dict):
                # Several events of a turn that left together, in order.
                for body in envelope.body.get("events", []):
                    if isinstance(body, dict):
                        await self._events.put(parse_event(body))

        self._sub = await conn.nc.subscribe(subjects.outbound(agent, session, conn.reader), cb=on_event)
        await conn.nc.flush()
        return self

    async def close(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()
            self._sub = None

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _request(self, kind: str, body: dict, reply_kind: str, timeout: float) -> dict:
        envelope = Envelope(kind, body, agent=self.agent, session=self.session, user=self.user)
        subject = subjects.inbound(self.agent, self.session, self.conn.publisher)
        grace = time.monotonic() + min(timeout, SERVICE_GRACE)
        while True:
            try:
                reply = await self.conn.request(subject, envelope, timeout)
                return reply.expect(reply_kind)
            except NoService:
                if time.monotonic() >= grace:
                    raise
                await asyncio.sleep(0.2)

    async def send(self, text: str, timeout: float = 30.0) -> Accepted:
        """Send `text`; returns once the session has persisted it."""
        body = await self._request("user.message", {"text": text}, "accepted", timeout)
        return Accepted(body["message_id"], body["session"], body["seq"], body.get("turn_id"))

    async def confirm(self, approve: bool, call_id: Optional[str] = None,
                      timeout: float = 30.0) -> dict:
        """Approve or decline the high-risk call the turn waits on (`call_id`, or every
        undecided call); returns `{turn_id, call_ids, approve}` once the decision is stored."""
        body = {"approve": approve}
        if call_id is not None:
            body["call_id"] = call_id
        return await self._request("user.confirmation", body, "confirmation.accepted", timeout)

    async def cancel(self, reason: str = "cancelled by the client",
                     timeout: float = 30.0) -> dict:
        """Cancel the running turn and what it delegated; returns `{turn_id, children}`."""
        return await self._request("user.cancel", {"reason": reason}, "cancel.accepted",
                                   timeout)

    async def next_event(self, timeout: float) -> TurnEvent:
        """The session's next event; Timeout when none arrives in time."""
        try:
            return await asyncio.wait_for(self._events.get(), timeout)
        except asyncio.TimeoutError as e:
            raise Timeout(f"no event of session {self.session} within {timeout} s") from e

    async def events(self, timeout: float = 60.0) -> AsyncIterator[TurnEvent]:
        """Every event of the session as it arrives, until none comes for `timeout` s."""
        while True:
            yield await self.next_event(timeout)

    async def turn(self, text: str, timeout: float = 60.0,
                   on_event: Optional[Callable[[TurnEvent], None]] = None) -> Turn:
        """Send `text` and collect the turn's events until its answer, its error or a pause
        for a confirmation (then `confirm_and_follow`)."""
        accepted = await self.send(text, timeout)
        return await self._follow(Turn(accepted), accepted.turn_id, timeout, on_event)

    async def confirm_and_follow(self, approve: bool, call_id: Optional[str] = None,
                                 timeout: float = 60.0,
                                 on_event: Optional[Callable[[TurnEvent], None]] = None) -> Turn:
        """Decide on the paused turn's call and follow the turn from there."""
        decided = await self.confirm(approve, call_id, timeout)
        accepted = Accepted(decided["turn_id"], self.session, 0, decided["turn_id"])
        return await self._follow(Turn(accepted), decided["turn_id"], timeout, on_event)

    async def _follow(self, turn: Turn, turn_id: Optional[str], timeout: float,
                      on_event: Optional[Callable[[TurnEvent], None]]) -> Turn:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(f"the turn did not end within {timeout} s")
            event = await self.next_event(left)
            if isinstance(event, TurnStarted) and event.message_id == turn.accepted.message_id:
                turn_id = event.turn_id
            if turn_id is None or event.turn_id != turn_id:
                continue
            if on_event is not None:
                on_event(event)
            turn.events.append(event)
            if isinstance(event, Answer):
                turn.answer = event.text
            elif isinstance(event, Error):
                turn.error = event
            elif isinstance(event, ConfirmationRequired):
                turn.needs_confirmation = event
            if isinstance(event, ENDING):
                return turn
