"""Serve a tool as a worker: any process that answers `hermes.tool.<name>` in queue group
`tool` is a Hermes tool (docs/tools.md, "External tool workers"). Declare the tool in the Hermes
config (`[[tools.define]]` with its input schema) so sessions see and validate it."""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any, Awaitable, Callable, Optional, Union

from . import subjects
from .connection import Connection
from .envelope import Envelope

Handler = Callable[[dict], Union[Any, Awaitable[Any]]]


class ToolFailure(Exception):
    """Raise it from a handler to report a structured error the model can act on.

    `code` is one of Hermes' tool error codes (`invalid_arguments`, `execution_failed`,
    `timeout`, `unavailable`, `outcome_unknown` when the call may have taken effect though it
    failed, e.g. a backend that went away mid-request); `hint` tells the model what to do next."""

    def __init__(self, code: str, message: str, hint: Optional[str] = None):
        super().__init__(message)
        self.code, self.message, self.hint = code, message, hint


class ToolWorker:
    """Answers the calls of one tool with `handler(arguments) -> output` (sync or async)."""

    def __init__(self, conn: Connection, name: str, handler: Handler):
        self.conn = conn
        self.name = subjects.check_id("tool", name)
        self.handler = handler
        self._sub = None

    async def start(self) -> "ToolWorker":
        self._sub = await self.conn.nc.subscribe(
            subjects.tool(self.name), queue=subjects.TOOL_QUEUE, cb=self._on_call)
        await self.conn.nc.flush()
        return self

    async def stop(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()
            self._sub = None

    async def _on_call(self, msg) -> None:
        if not msg.reply:
            return
        reply = await self.answer(msg.subject, msg.data)
        self.conn.seen("sent", msg.reply, reply)
        await msg.respond(reply.encode())

    async def answer(self, subject: str, payload: bytes) -> Envelope:
        """The `tool.result` (or `error`) envelope answering one request payload."""
        try:
            request = Envelope.decode(payload)
        except Exception as e:  # a malformed request gets an error reply, never a crash
            return Envelope("error", {"code": "bad_request", "message": str(e)})
        self.conn.seen("received", subject, request)
        if request.kind != "tool.call" or not isinstance(request.body, dict):
            return Envelope("error", {"code": "bad_request",
                                      "message": "expected an envelope of kind tool.call"},
                            trace_id=request.trace_id)
        call = request.body
        result = {"call_id": call.get("call_id", ""), "name": call.get("name", self.name),
                  "status": "ok", "output": None, "via": "worker"}
        started = time.monotonic()
        try:
            output = self.handler(call.get("arguments") or {})
            if inspect.isawaitable(output):
                output = await output
            result["output"] = output
        except ToolFailure as e:
            result["status"] = "error"
            result["error"] = {"code": e.code, "message": e.message, "hint": e.hint}
        except Exception as e:  # the tool's own bug: reported, the worker keeps serving
            result["status"] = "error"
            result["error"] = {"code": "execution_failed",
                               "message": f"{type(e).__name__}: {e}",
                               "hint": "tell the user the tool failed"}
        result["duration_ms"] = int((time.monotonic() - started) * 1000)
        return Envelope("tool.result", result, trace_id=request.trace_id,
                        agent=request.agent, session=request.session, user=request.user)


async def serve_forever(worker: ToolWorker) -> None:
    """Serve until cancelled (Ctrl-C / SIGTERM in a script's main)."""
    await worker.start()
    try:
        await asyncio.Event().wait()
    finally:
        await worker.stop()
