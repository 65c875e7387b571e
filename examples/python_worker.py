#!/usr/bin/env python3
"""A Hermes tool worker in Python: serves the `word_count` tool over NATS.

Any process that answers `hermes.tool.<name>` in queue group `tool` is a Hermes tool (the
protocol is in README.md, "External tool workers"). Declare the tool in the Hermes config so
sessions see it in the catalog (the session validates arguments against this schema before it
sends the call):

    [[tools.define]]
    name = "word_count"
    description = "Count the words in a text. ..."
    input_schema = { type = "object", properties = { text = { type = "string" } }, required = ["text"] }
    timeout_secs = 5

Run it next to a Hermes on NATS (needs the public client: `pip install nats-py`):

    python examples/python_worker.py --url nats://127.0.0.1:4222

On a nats-server with permissions (config/nats/hermes.conf) it runs as its own user, which
may only serve `hermes.tool.word_count` and answer the calls it receives:

    NATS_PASSWORD=… python examples/python_worker.py --url nats://127.0.0.1:4222 \
        --user worker-word-count

It prints `ready` once subscribed and stops on Ctrl-C / SIGTERM.
"""

import argparse
import asyncio
import json
import os
import signal
import sys
import time
import uuid
from datetime import datetime, timezone

import nats

TOOL = "word_count"
SUBJECT = f"hermes.tool.{TOOL}"
QUEUE = "tool"


class ToolFailure(Exception):
    """A failure reported to the model as a structured error."""

    def __init__(self, code, message, hint=None):
        super().__init__(message)
        self.code, self.message, self.hint = code, message, hint


def word_count(arguments):
    """The tool itself: {"text": str, "min_len"?: int} -> {"words": n, "longest": str}."""
    text = arguments.get("text")
    if not isinstance(text, str):
        raise ToolFailure("invalid_arguments", "`text` must be a string",
                          "send the text to count as `text`")
    min_len = arguments.get("min_len", 1)
    words = [w for w in text.split() if len(w) >= min_len]
    return {"words": len(words), "longest": max(words, key=len) if words else ""}


def envelope(kind, body, trace_id):
    """A Hermes envelope (v1): {v, id, kind, ts, trace_id, body}."""
    return {
        "v": 1,
        "id": str(uuid.uuid4()),
        "kind": kind,
        "ts": datetime.now(timezone.utc).isoformat(),
        "trace_id": trace_id,
        "body": body,
    }


def handle(payload):
    """Turn one `tool.call` request payload into the reply envelope."""
    try:
        request = json.loads(payload)
    except ValueError as e:
        return envelope("error", {"code": "bad_request", "message": f"not JSON: {e}"},
                        str(uuid.uuid4()))
    trace = request.get("trace_id") or str(uuid.uuid4())
    if request.get("kind") != "tool.call":
        return envelope("error", {"code": "bad_request",
                                  "message": "expected an envelope of kind tool.call"}, trace)
    call = request.get("body") or {}
    started = time.monotonic()
    result = {"call_id": call.get("call_id", ""), "name": call.get("name", TOOL),
              "status": "ok", "output": None, "via": "worker"}
    try:
        result["output"] = word_count(call.get("arguments") or {})
    except ToolFailure as e:
        result["status"] = "error"
        result["error"] = {"code": e.code, "message": e.message, "hint": e.hint}
    result["duration_ms"] = int((time.monotonic() - started) * 1000)
    return envelope("tool.result", result, trace)


async def report_error(e):
    """A refused subscription or publish (the server's permissions) is said, not swallowed."""
    print(f"nats error: {e}", file=sys.stderr, flush=True)


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="nats://127.0.0.1:4222")
    parser.add_argument("--user", default=os.environ.get("NATS_USER"),
                        help="NATS user (password in $NATS_PASSWORD)")
    args = parser.parse_args()
    credentials = {}
    if args.user:
        credentials = {"user": args.user, "password": os.environ.get("NATS_PASSWORD", "")}
    nc = await nats.connect(args.url, error_cb=report_error, **credentials)

    async def on_call(msg):
        if msg.reply:
            await msg.respond(json.dumps(handle(msg.data)).encode())

    await nc.subscribe(SUBJECT, queue=QUEUE, cb=on_call)
    await nc.flush()
    print("ready", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await nc.drain()


if __name__ == "__main__":
    asyncio.run(main())
