#!/usr/bin/env python3
"""A Hermes tool worker in Python: serves the `word_count` tool over NATS.

Any process that answers `hermes.tool.<name>` in queue group `tool` is a Hermes tool (the
protocol is in docs/tools.md, "External tool workers"; `hermes_client.ToolWorker` speaks it).
Declare the tool in the Hermes config so sessions see it in the catalog (the session
validates arguments against this schema before it sends the call):

    [[tools.define]]
    name = "word_count"
    description = "Count the words in a text. ..."
    input_schema = { type = "object", properties = { text = { type = "string" } }, required = ["text"] }
    timeout_secs = 5

Run it next to a Hermes on NATS (`pip install ./clients/python` first):

    python examples/python_worker.py --url nats://127.0.0.1:4222

On a nats-server with permissions (config/nats/hermes.conf) it runs as its own user, which
may only serve `hermes.tool.word_count` and answer the calls it receives:

    NATS_PASSWORD=… python examples/python_worker.py --url nats://127.0.0.1:4222 \\
        --user worker-word-count

It prints `ready` once subscribed and stops on Ctrl-C / SIGTERM.
"""

import argparse
import asyncio
import os
import signal
import sys

from hermes_client import ToolFailure, connect


def word_count(arguments):
    """The tool itself: {"text": str, "min_len"?: int} -> {"words": n, "longest": str}."""
    text = arguments.get("text")
    if not isinstance(text, str):
        raise ToolFailure("invalid_arguments", "`text` must be a string",
                          "send the text to count as `text`")
    min_len = arguments.get("min_len", 1)
    words = [w for w in text.split() if len(w) >= min_len]
    return {"words": len(words), "longest": max(words, key=len) if words else ""}


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
    hermes = await connect(args.url, error_cb=report_error, **credentials)
    worker = await hermes.serve_tool("word_count", word_count)
    print("ready", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await worker.stop()
    await hermes.close()


if __name__ == "__main__":
    asyncio.run(main())
