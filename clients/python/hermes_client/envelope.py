"""The versioned JSON envelope every payload travels in: `{v, id, kind, ts, trace_id, agent?,
session?, user?, body}` (`schema/<kind>.json` describes each kind)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .errors import Refused, UnexpectedReply

ENVELOPE_VERSION = 1
ERROR_KIND = "error"


@dataclass
class Envelope:
    kind: str
    body: Any
    agent: str | None = None
    session: str | None = None
    user: str | None = None
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    trace_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    ts: str = field(
        default_factory=lambda: datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
    )
    v: int = ENVELOPE_VERSION

    def to_dict(self) -> dict:
        out = {"v": self.v, "id": self.id, "kind": self.kind, "ts": self.ts,
               "trace_id": self.trace_id}
        for key in ("agent", "session", "user"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out["body"] = self.body
        return out

    def encode(self) -> bytes:
        return json.dumps(self.to_dict(), ensure_ascii=False).encode()

    @classmethod
    def from_dict(cls, data: dict) -> "Envelope":
        try:
            return cls(kind=data["kind"], body=data.get("body"), agent=data.get("agent"),
                       session=data.get("session"), user=data.get("user"), id=data["id"],
                       trace_id=data["trace_id"], ts=data["ts"], v=data["v"])
        except (KeyError, TypeError) as e:
            raise UnexpectedReply(f"not a Hermes envelope (missing {e}): {data!r:.200}") from e

    @classmethod
    def decode(cls, payload: bytes) -> "Envelope":
        try:
            data = json.loads(payload)
        except ValueError as e:
            raise UnexpectedReply(f"not JSON: {e}") from e
        if not isinstance(data, dict):
            raise UnexpectedReply(f"not a Hermes envelope: {data!r:.200}")
        return cls.from_dict(data)

    def expect(self, kind: str) -> Any:
        """The body, if this is a `kind` envelope; Refused for an `error` envelope."""
        if self.kind == ERROR_KIND:
            body = self.body or {}
            raise Refused(body.get("code", "error"), body.get("message", ""))
        if self.kind != kind:
            raise UnexpectedReply(f"expected a `{kind}` reply, got `{self.kind}`")
        return self.body
