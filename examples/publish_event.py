#!/usr/bin/env python3
"""Publish a business event to NATS and print what the Hermes agent made of it.

A shop backend publishes `shop.orders.<order id>.delayed` when a parcel is late. With the
trigger of config/team.toml, Hermes turns the event into a turn of the `triage` agent and
publishes the agent's answer on `shop.orders.<order id>.reply`. This script subscribes to the
reply subject first, publishes the event (with a `Nats-Msg-Id`, so publishing it twice is
handled once), and prints the answer.

    pip install ./clients/python          # the hermes_client package (brings nats-py)
    hermes serve --bus nats://127.0.0.1:4222 --config config/team.toml &
    python examples/publish_event.py --url nats://127.0.0.1:4222

On a nats-server with permissions (config/nats/hermes.conf) run it as the shop's user
(`--user shop`, password in $NATS_PASSWORD): it may publish the event and read the reply,
and its reply inboxes are its own (`_INBOX.shop.>`).

The event is stored by JetStream, so Hermes may also be started after the event is published:
the answer arrives once it runs (pass --timeout to wait longer). Exit status 0 when an answer
arrived, 1 when none did in time.
"""

import argparse
import asyncio
import json
import os
import sys
import uuid

from hermes_client import Timeout, connect


async def main(args):
    credentials = {}
    if args.user:
        credentials = {"user": args.user, "password": os.environ.get("NATS_PASSWORD", "")}
    hermes = await connect(args.url, **credentials)
    event = {"event_id": args.event_id or f"evt-{uuid.uuid4().hex[:12]}",
             "customer": args.customer, "days_late": args.days_late, "tracking": args.tracking}
    subject = f"shop.orders.{args.order}.delayed"
    try:
        reply = await hermes.publish_and_wait(
            subject, event, f"shop.orders.{args.order}.reply",
            event_id=event["event_id"], timeout=args.timeout,
            on_published=lambda _: print(f"published {subject}: {json.dumps(event)}", flush=True))
    except Timeout:
        print(f"no answer on shop.orders.{args.order}.reply within {args.timeout} s; is "
              "`hermes serve --config config/team.toml` running on this NATS?", file=sys.stderr)
        return 1
    finally:
        await hermes.close()
    print(f"session {reply.agent}.{reply.session} answered:")
    print(reply.text, flush=True)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="nats://127.0.0.1:4222")
    parser.add_argument("--user", default=os.environ.get("NATS_USER"),
                        help="NATS user (password in $NATS_PASSWORD)")
    parser.add_argument("--order", default="JD-20251111-0042")
    parser.add_argument("--customer", default="u-1001")
    parser.add_argument("--tracking", default="SF1428837610295")
    parser.add_argument("--days-late", type=int, default=2)
    parser.add_argument("--event-id", help="the event's id (default: a new one)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the answer")
    sys.exit(asyncio.run(main(parser.parse_args())))
