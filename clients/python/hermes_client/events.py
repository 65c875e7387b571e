"""Turn events (`turn.event` envelopes on `hermes.out.<agent>.<session>`, or several in one
`turn.events` envelope), typed.

Each event has a `type` and the `turn_id` of the turn it belongs to; `parse_event` turns an
envelope body into one of the classes below (`Other` for a type this version does not know,
so a newer engine does not break an older client).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union


@dataclass
class TurnStarted:
    turn_id: str
    message_id: str
    type: str = "turn.started"


@dataclass
class MemoryRecalled:
    turn_id: str
    memories: list
    type: str = "memory.recalled"


@dataclass
class Delta:
    turn_id: str
    text: str
    type: str = "delta"


@dataclass
class ToolCall:
    turn_id: str
    call_id: str
    name: str
    arguments: Any
    type: str = "tool.call"


@dataclass
class ToolResult:
    turn_id: str
    result: dict
    type: str = "tool.result"

    @property
    def ok(self) -> bool:
        return self.result.get("status") == "ok"


@dataclass
class ConfirmationRequired:
    turn_id: str
    call_id: str
    name: str
    arguments: Any
    message: str
    type: str = "confirmation.required"


@dataclass
class JobWaiting:
    turn_id: str
    call_id: str
    name: str
    job_id: str
    type: str = "job.waiting"


@dataclass
class AgentDelegated:
    turn_id: str
    call_id: str
    agent: str
    session: str
    task: str
    type: str = "agent.delegated"


@dataclass
class TurnResumed:
    turn_id: str
    reason: str
    type: str = "turn.resumed"


@dataclass
class Handoff:
    turn_id: str
    from_agent: str
    to_agent: str
    reason: str
    type: str = "agent.handoff"


@dataclass
class Answer:
    turn_id: str
    text: str
    type: str = "answer"


@dataclass
class MemoryWritten:
    turn_id: str
    changes: list
    type: str = "memory.written"


@dataclass
class Error:
    turn_id: Optional[str]
    code: str
    message: str
    type: str = "error"


@dataclass
class Other:
    """An event type this client does not know; `body` is the whole event."""

    turn_id: Optional[str]
    type: str
    body: dict = field(default_factory=dict)


TurnEvent = Union[TurnStarted, MemoryRecalled, Delta, ToolCall, ToolResult,
                  ConfirmationRequired, JobWaiting, AgentDelegated, TurnResumed, Handoff,
                  Answer, MemoryWritten, Error, Other]

_SIMPLE = {
    "turn.started": (TurnStarted, ("turn_id", "message_id")),
    "memory.recalled": (MemoryRecalled, ("turn_id", "memories")),
    "delta": (Delta, ("turn_id", "text")),
    "tool.call": (ToolCall, ("turn_id", "call_id", "name", "arguments")),
    "tool.result": (ToolResult, ("turn_id", "result")),
    "confirmation.required": (ConfirmationRequired,
                              ("turn_id", "call_id", "name", "arguments", "message")),
    "job.waiting": (JobWaiting, ("turn_id", "call_id", "name", "job_id")),
    "agent.delegated": (AgentDelegated, ("turn_id", "call_id", "agent", "session", "task")),
    "turn.resumed": (TurnResumed, ("turn_id", "reason")),
    "answer": (Answer, ("turn_id", "text")),
    "memory.written": (MemoryWritten, ("turn_id", "changes")),
}


def parse_event(body: dict) -> TurnEvent:
    """The typed event of a `turn.event` body."""
    kind = body.get("type", "")
    try:
        if kind in _SIMPLE:
            cls, keys = _SIMPLE[kind]
            return cls(*(body[k] for k in keys))
        if kind == "agent.handoff":
            return Handoff(body["turn_id"], body["from"], body["to"], body["reason"])
        if kind == "error":
            return Error(body.get("turn_id"), body["code"], body["message"])
    except KeyError:
        pass
    return Other(body.get("turn_id"), kind, body)


#: Events after which a turn is over for now (answered, failed, or paused for a decision).
ENDING = (Answer, Error, ConfirmationRequired)
