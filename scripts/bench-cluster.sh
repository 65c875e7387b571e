#!/usr/bin/env bash
# W1 (the tool loop of shared/bench/WORKLOAD.md) against a running deployment of separate
# processes, on a release build: 1, 2 and 4 session processes on one NATS node and on the
# 3-node cluster with replicas 3. For each: turns/s of W1 single, multi and concurrent, and the
# CPU time every process of the deployment (nats-server and the driving `hermes bench`
# included) spent per turn: over the whole run (warm-up included) and in W1 concurrent alone;
# then, per JetStream stream and consumer, the appends, deliveries and acks per turn.
#   scripts/bench-cluster.sh                  # all six deployments
#   SHAPES="1x1 2x1" scripts/bench-cluster.sh # <session processes>x<NATS nodes>
#   SESSION_ACTORS=session,planner scripts/bench-cluster.sh   # a planner in each session process
# Each deployment is started with scripts/cluster.sh (planners 2, two tool-executors, one
# memory-extractor, no MCP-bridge: W1 calls the built-in `add`) and stopped afterwards.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
[[ -f .tools/env.sh ]] && source .tools/env.sh
HERMES=${HERMES_BIN:-$ROOT/target/release/hermes}
# nats-py, for the JetStream counts (scripts/jetstream-counts.py); without it they are skipped.
PYTHON=${HERMES_PYTHON:-python3}
COUNT_JETSTREAM=1
if ! "$PYTHON" -c 'import nats' 2>/dev/null; then
    COUNT_JETSTREAM=0
    echo "note: $PYTHON has no nats-py, so the JetStream counts are skipped (bash scripts/setup-test-deps.sh installs it into .tools/venv)" >&2
fi
[[ -x $HERMES ]] || { echo "build first: cargo build --release" >&2; exit 1; }
SHAPES=${SHAPES:-"1x1 2x1 4x1 1x3 2x3 4x3"}
PORT=${HERMES_BENCH_PORT:-14222}
WORK=$(mktemp -d)
trap 'HERMES_CLUSTER_DIR=$WORK/cluster HERMES_CLUSTER_PORT=$PORT bash scripts/cluster.sh down >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

# The bench model and tool, as `hermes bench` configures them for itself.
cat >"$WORK/bench.toml" <<EOF
[models.planner]
provider = "bench"
[models.extractor]
provider = "replay"
scenario = "$ROOT/config/bench-scenario.toml"
[models.summariser]
provider = "replay"
scenario = "$ROOT/config/bench-scenario.toml"
[tools]
builtin = ["add"]
[mcp]
servers = []
EOF

# utime+stime of the given pids, in clock ticks.
cpu_ticks() {
    local total=0 pid fields
    for pid in "$@"; do
        [[ -r /proc/$pid/stat ]] || continue
        fields=$(sed 's/.*) //' "/proc/$pid/stat")
        # fields after the command: state is 1st, utime 12th, stime 13th.
        total=$((total + $(echo "$fields" | awk '{print $12 + $13}')))
    done
    echo "$total"
}

printf '%-22s %10s %10s %14s %16s %16s\n' DEPLOYMENT W1_SINGLE W1_MULTI W1_CONCURRENT CPU_US_PER_TURN CONCURRENT_CPU
for shape in $SHAPES; do
    sessions=${shape%x*}
    nodes=${shape#*x}
    export HERMES_CLUSTER_DIR=$WORK/cluster HERMES_CLUSTER_PORT=$PORT HERMES_BIN=$HERMES
    export HERMES_CONFIG=$WORK/bench.toml HERMES_LOG=warn
    SESSIONS=$sessions PLANNERS=2 TOOLS=2 MCP=0 MEMORY=1 NODES=$nodes \
        SESSION_ACTORS=${SESSION_ACTORS:-session} bash scripts/cluster.sh up >/dev/null
    url=$(bash scripts/cluster.sh status | sed -n 's/^bus: //p')
    pids=$(cat "$WORK"/cluster/pids/*)
    before=$(cpu_ticks $pids)
    if ((COUNT_JETSTREAM)); then
        "$PYTHON" scripts/jetstream-counts.py snapshot "$url" >"$WORK/js-before.json"
    fi
    declare -A kind_before=()
    for f in "$WORK"/cluster/pids/*; do
        kind=$(basename "$f"); kind=${kind%-*}
        kind_before[$kind]=$(( ${kind_before[$kind]:-0} + $(cpu_ticks "$(cat "$f")") ))
    done
    "$HERMES" --config "$WORK/bench.toml" bench w1 --bus "$url" --actors none --json \
        --count-cpu-of "$(echo $pids | tr ' ' ',')" \
        >"$WORK/rows.json"
    after=$(cpu_ticks $pids)
    turns=$(python3 -c 'import json,sys; print(sum(json.loads(l)["turns"] for l in open(sys.argv[1])))' "$WORK/rows.json")
    hz=$(getconf CLK_TCK)
    read -r single multi concurrent concurrent_cpu < <(python3 -c '
import json, sys
rows = {r["workload"]: r for r in map(json.loads, open(sys.argv[1]))}
print(*(round(rows[w]["turns_per_s"]) for w in ("w1_single", "w1_multi", "w1_concurrent")),
      round(rows["w1_concurrent"]["deployment_cpu_us_per_turn"]))
' "$WORK/rows.json")
    driver=$(python3 -c 'import json,sys; print(sum(json.loads(l)["cpu_us_per_turn"]*json.loads(l)["turns"] for l in open(sys.argv[1])))' "$WORK/rows.json")
    per_turn=$(python3 -c "print(round(((${after} - ${before}) * 1e6 / ${hz} + ${driver}) / ${turns}))")
    printf '%-22s %10s %10s %14s %16s %16s\n' "${sessions} session, ${nodes} node" "$single" "$multi" "$concurrent" "$per_turn" "$concurrent_cpu"
    # Where the CPU went, per kind of process (µs per turn), the driver included.
    declare -A kind_after=()
    for f in "$WORK"/cluster/pids/*; do
        kind=$(basename "$f"); kind=${kind%-*}
        kind_after[$kind]=$(( ${kind_after[$kind]:-0} + $(cpu_ticks "$(cat "$f")") ))
    done
    breakdown="driver=$(python3 -c "print(round(${driver} / ${turns}))")"
    for kind in "${!kind_after[@]}"; do
        breakdown+=" $kind=$(python3 -c "print(round((${kind_after[$kind]} - ${kind_before[$kind]}) * 1e6 / ${hz} / ${turns}))")"
    done
    echo "    cpu µs/turn by process: $breakdown"
    if ((COUNT_JETSTREAM)); then
        echo "    JetStream per timed turn (appends; consumer deliveries and acks; each is replicated R times)."
        echo "    The counts include the bench's warm-up and counted pass, a few percent more turns:"
        "$PYTHON" scripts/jetstream-counts.py diff "$url" "$WORK/js-before.json" "$turns"
    fi
    unset kind_before kind_after
    bash scripts/cluster.sh down --wipe >/dev/null
done
