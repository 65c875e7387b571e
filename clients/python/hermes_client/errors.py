"""What can go wrong talking to Hermes, as exceptions a caller can branch on."""

from __future__ import annotations


class HermesError(Exception):
    """Base of every error this package raises."""


class InvalidId(HermesError, ValueError):
    """An agent, session, user, publisher or tool id that cannot go into a subject."""


class Refused(HermesError):
    """The service answered with an `error` envelope: `code` says why, `message` what to do."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class NoService(HermesError):
    """Nobody serves the subject: no `hermes serve` with the needed actor is running there."""


class Timeout(HermesError, TimeoutError):
    """No answer (or no end of the turn) within the time given."""


class UnexpectedReply(HermesError):
    """A reply that is not the kind the request expects (a version mismatch, or not Hermes)."""
