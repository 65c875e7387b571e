#!/usr/bin/env bash
# The scale-out fault runs at full size (200 sessions x 5 turns, driven from outside over NATS)
# against real processes: a nats-server, two `hermes serve --actors session`, two tool
# processes (tool-executor + MCP-bridge, with a real MCP write tool that counts executions)
# and two core processes (planner + memory-extractor). Turns rotate through a read tool, the
# MCP write tool and an async job; each turn also writes a memory for one of four shared users.
# Runs it steady, with kill -9 of one session process mid-load, with kill -9 of one tool
# process while jobs run, and on a 3-node cluster (replicas 3) with a restart of one node
# mid-load, and prints each run's counts: turns never answered, answered twice, write tools
# executed twice, sessions whose history is split, memories lost (all must be 0), and the
# time from the fault to the next answer.
#   scripts/scale-out.sh                      # 200 x 5
#   HERMES_SCALE_SESSIONS=50 HERMES_SCALE_TURNS=3 scripts/scale-out.sh
# `scripts/test.sh` runs the same tests at a reduced size (24 x 3).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -f .tools/env.sh ]] && source .tools/env.sh
export HERMES_SCALE_SESSIONS=${HERMES_SCALE_SESSIONS:-200}
export HERMES_SCALE_TURNS=${HERMES_SCALE_TURNS:-5}
cargo test --test all scale_out -- --nocapture --test-threads 1 --include-ignored 2>&1 | grep -E "scale-out run|^test |test result|panicked|session scale"
