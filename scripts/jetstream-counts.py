"""Where a deployment's JetStream work goes: per stream, how many messages were appended, and
per durable consumer, how many it delivered and how far its acknowledgement floor moved (the
acks, less those still pending at the end). With replicas > 1, each append and each
acknowledgement is a Raft proposal the other nodes store too.

    python scripts/jetstream-counts.py snapshot NATS_URL > before.json
    ... run the load ...
    python scripts/jetstream-counts.py diff NATS_URL before.json TURNS

`diff` prints one line per stream and consumer that moved, as counts per turn: divided by
TURNS, while they include whatever else ran between the snapshots (bench-cluster.sh passes the
timed turns; its warm-up and counted pass add a few percent, so 1.04 is one a turn). Used by
scripts/bench-cluster.sh; needs nats-py (installed into .tools/venv by
scripts/setup-test-deps.sh).
"""

import asyncio
import json
import re
import sys

import nats


async def snapshot(url: str) -> dict:
    nc = await nats.connect(url.split(","))
    try:
        js = nc.jetstream()
        counts = {}
        for info in await js.streams_info():
            name = info.config.name
            counts[name] = {
                "appended": info.state.last_seq,
                "replicas": info.config.num_replicas or 1,
            }
            for consumer in await js.consumers_info(name):
                counts[f"{name}/{consumer.name}"] = {
                    "delivered": consumer.delivered.consumer_seq,
                    "acked": consumer.ack_floor.consumer_seq,
                    "replicas": consumer.config.num_replicas or info.config.num_replicas or 1,
                }
        return counts
    finally:
        await nc.close()


def per_turn(after: dict, before: dict, turns: int) -> list:
    """Counts per turn, the partition owners' consumers (`owner-p<N>`) summed into one line."""
    grouped = {}
    for name, now in after.items():
        was = before.get(name, {})
        group = re.sub(r"/owner-p\d+$", "/owner-p* (summed)", name)
        line = grouped.setdefault(group, {"replicas": now["replicas"]})
        for key, value in now.items():
            if key != "replicas":
                line[key] = line.get(key, 0) + (value - was.get(key, 0)) / turns
    lines = []
    for name, moved in sorted(grouped.items()):
        figures = {k: v for k, v in moved.items() if k != "replicas"}
        if any(v > 0 for v in figures.values()):
            text = " ".join(f"{k}={v:.2f}" for k, v in figures.items())
            lines.append(f"{name:<40} R{moved['replicas']} {text}")
    return lines


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[1] not in ("snapshot", "diff"):
        sys.exit(__doc__)
    counts = asyncio.run(snapshot(sys.argv[2]))
    if sys.argv[1] == "snapshot":
        json.dump(counts, sys.stdout)
        return
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    with open(sys.argv[3], encoding="utf-8") as f:
        before = json.load(f)
    turns = max(int(sys.argv[4]), 1)
    for line in per_turn(counts, before, turns):
        print(f"    {line}")


if __name__ == "__main__":
    main()
