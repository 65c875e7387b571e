"""Every subject this client uses, and the id rule that keeps subjects safe.

Mirrors `crates/hermes-protocol/src/subjects.rs`; `schema/index.json` lists the same subjects.
"""

from __future__ import annotations

import re

from .errors import InvalidId

MAX_ID_LEN = 128
_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")

TOOL_QUEUE = "tool"
MEMORY_RECALL = "hermes.memory.recall"
MEMORY_WRITE = "hermes.memory.write"
MEMORY_FORGET = "hermes.memory.forget"
MEMORY_LIST = "hermes.memory.list"
JOBS = "hermes.job.*"


def check_id(what: str, value: str) -> str:
    """`value` if it is 1–128 characters of A–Z a–z 0–9 _ -; else InvalidId naming `what`."""
    if not isinstance(value, str) or not _ID.match(value):
        raise InvalidId(
            f"invalid {what} id {value!r}: use 1–{MAX_ID_LEN} characters from A–Z a–z 0–9 _ -"
        )
    return value


def inbound(agent: str, session: str, publisher: str | None = None) -> str:
    """`hermes.in.<agent>.<session>`, or `….<publisher>` for a sender with a bus identity
    (a server with permissions lets only that identity publish there)."""
    subject = f"hermes.in.{check_id('agent', agent)}.{check_id('session', session)}"
    if publisher is not None:
        subject += f".{check_id('publisher', publisher)}"
    return subject


#: The reader token of events whose message named no user.
NO_READER = "_"


def outbound(agent: str, session: str, reader: str | None = None) -> str:
    """`hermes.out.<agent>.<session>.<reader>`: the session's turn events for `reader` — the
    publisher whose `[bus.publishers]` users name the session's user, else that user (`_`
    when the message named none). `None`: `….*`, whoever they are for (a server with
    permissions refuses that to a restricted identity; pass its name)."""
    prefix = f"hermes.out.{check_id('agent', agent)}.{check_id('session', session)}"
    if reader is None:
        return f"{prefix}.*"
    if reader == NO_READER:
        return f"{prefix}.{NO_READER}"
    return f"{prefix}.{check_id('reader', reader)}"


def tool(name: str) -> str:
    """`hermes.tool.<name>`: calls of one tool, answered by any worker in queue `tool`."""
    return f"hermes.tool.{check_id('tool', name)}"
