"""The NATS connection, with the auth options of the least-privilege config
(`config/nats/hermes.conf`): user/password, token, NKey seed or a credentials file, and an
inbox prefix of the caller's own (`_INBOX.<user>`), since a restricted user may only receive
replies there."""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

import nats
from nats.errors import NoRespondersError, TimeoutError as NatsTimeout

from .envelope import Envelope
from .errors import NoService, Timeout

#: Called with ("sent" | "received", subject, envelope dict) for every envelope on the wire.
WireObserver = Callable[[str, str, dict], None]


class Connection:
    """A NATS connection that speaks Hermes envelopes."""

    def __init__(self, nc: Any, observer: Optional[WireObserver] = None,
                 publisher: Optional[str] = None, reader: Optional[str] = None):
        self.nc = nc
        self.observer = observer
        #: The bus identity messages to sessions are sent as (`hermes.in.….<publisher>`).
        self.publisher = publisher
        #: Whose events sessions subscribe to (`hermes.out.….<reader>`); None: everyone's.
        self.reader = reader

    def seen(self, direction: str, subject: str, envelope: Envelope) -> None:
        if self.observer is not None:
            self.observer(direction, subject, envelope.to_dict())

    async def request(self, subject: str, envelope: Envelope, timeout: float) -> Envelope:
        self.seen("sent", subject, envelope)
        try:
            msg = await self.nc.request(subject, envelope.encode(), timeout=timeout)
        except NoRespondersError as e:
            raise NoService(f"nobody serves {subject}: is `hermes serve` with the needed "
                            "actor running on this NATS?") from e
        except NatsTimeout as e:
            raise Timeout(f"no answer on {subject} within {timeout} s") from e
        reply = Envelope.decode(msg.data)
        self.seen("received", subject, reply)
        return reply

    async def publish(self, subject: str, payload: bytes, headers: Optional[dict] = None):
        await self.nc.publish(subject, payload, headers=headers)

    async def close(self) -> None:
        await self.nc.drain()


async def connect(url: str = "nats://127.0.0.1:4222", *, user: Optional[str] = None,
                  password: Optional[str] = None, token: Optional[str] = None,
                  nkeys_seed: Optional[str] = None, credentials: Optional[str] = None,
                  inbox_prefix: Optional[str] = None, publisher: Optional[str] = None,
                  reader: Optional[str] = None, observer: Optional[WireObserver] = None, **options: Any) -> Connection:
    """Connect to the NATS server Hermes runs on.

    `inbox_prefix` defaults to `_INBOX.<user>` when a user is given (the shipped permissions
    let each user receive replies only there). `publisher` is the bus identity messages to
    sessions are sent as; it defaults to `user` (the subject `hermes.in.<agent>.<session>.<user>`
    is the one a restricted user may publish on). `reader` is whose turn events sessions
    follow (`hermes.out.<agent>.<session>.<reader>`): it defaults to `publisher` when a user
    is given — the one a restricted identity may read — else to every reader (`….*`)."""
    if user is not None:
        options.update(user=user, password=password or "")
        inbox_prefix = inbox_prefix or f"_INBOX.{user}"
    if token is not None:
        options["token"] = token
    if nkeys_seed is not None:
        options["nkeys_seed"] = nkeys_seed
    if credentials is not None:
        options["user_credentials"] = credentials
    if inbox_prefix is not None:
        options["inbox_prefix"] = inbox_prefix
    nc = await nats.connect(url, **options)
    publisher = publisher if publisher is not None else user
    if reader is None and user is not None:
        reader = publisher
    return Connection(nc, observer, publisher, reader)


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()
