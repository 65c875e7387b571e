#!/usr/bin/env bash
# A Hermes cluster on this machine: a 3-node NATS cluster (JetStream, routes on loopback,
# replicas 3) and Hermes processes split by actor kind, each with its own data directory.
#
#   scripts/cluster.sh up        start it (waits until every process is ready)
#   scripts/cluster.sh status    what runs, and the NATS URL to use
#   scripts/cluster.sh down      stop it (data stays in $HERMES_CLUSTER_DIR; `down --wipe` removes it)
#
# Settings (environment):
#   HERMES_CLUSTER_DIR   where pids, logs and data go            (default .cluster)
#   HERMES_CLUSTER_PORT  client port of the first NATS node; the others use +1 and +2,
#                        routes +2000.., monitoring +4000..      (default 4222)
#   HERMES_BIN           the hermes binary                        (default: hermes on PATH, else target/release/hermes)
#   HERMES_CONFIG        config files (separated by `:`) layered under the cluster's own
#                        settings, e.g. config/demo.toml for the demo's shop
#   SESSIONS PLANNERS TOOLS MCP MEMORY
#                        processes per actor kind                 (default 2 2 2 1 1)
#   NODES                NATS nodes: 3 (replicas 3) or 1 (replicas 1)  (default 3)
#   SESSION_ACTORS       what a session process runs (default session); session,planner plans
#                        in the session process, so a quick turn's message goes into the
#                        session log with the turn's first write (docs/clusters.md)
#
# Session processes share sessions through JetStream (partitions with one owner each, failover,
# the replicated session log); tool-executors share idempotency records, job records and raw
# outputs through JetStream KV and run async jobs from a durable queue; memory-extractors share
# each user's memory through the replicated memory log; MCP-bridges write one shared audit
# trail (see docs/clusters.md).
set -euo pipefail

DIR=${HERMES_CLUSTER_DIR:-.cluster}
PORT=${HERMES_CLUSTER_PORT:-4222}
SESSIONS=${SESSIONS:-2}
PLANNERS=${PLANNERS:-2}
TOOLS=${TOOLS:-2}
MCP=${MCP:-1}
MEMORY=${MEMORY:-1}
NODES=${NODES:-3}
SESSION_ACTORS=${SESSION_ACTORS:-session}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case $NODES in 1|3) ;; *) echo "NODES must be 1 or 3" >&2; exit 2 ;; esac

hermes_bin() {
    if [[ -n ${HERMES_BIN:-} ]]; then echo "$HERMES_BIN"
    elif command -v hermes >/dev/null; then command -v hermes
    elif [[ -x $ROOT/target/release/hermes ]]; then echo "$ROOT/target/release/hermes"
    else echo "no hermes binary: build it (cargo build --release) or set HERMES_BIN" >&2; exit 1
    fi
}

nats_bin() {
    if [[ -n ${HERMES_NATS_SERVER:-} ]]; then echo "$HERMES_NATS_SERVER"
    elif [[ -x $ROOT/.tools/venv/bin/nats-server ]]; then echo "$ROOT/.tools/venv/bin/nats-server"
    elif command -v nats-server >/dev/null; then command -v nats-server
    else echo "no nats-server: run scripts/setup-test-deps.sh or install nats-server >= 2.11" >&2; exit 1
    fi
}

urls() {
    local i list=""
    for i in $(nodes); do list+="${list:+,}nats://127.0.0.1:$((PORT + i))"; done
    echo "$list"
}

# Node indexes: those of a running cluster (its pid files), else those NODES asks for.
nodes() {
    local f found=""
    for f in "$DIR"/pids/nats-*; do
        [[ -e $f ]] && found+="${f##*-} "
    done
    if [[ -n $found ]]; then echo "$found"
    elif [[ $NODES == 1 ]]; then echo 0
    else echo 0 1 2
    fi
}

alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

wait_port() {
    for _ in $(seq 1 300); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "port $1 did not open; see $DIR/logs" >&2
    return 1
}

start_nats() {
    local nats routes i
    nats=$(nats_bin)
    routes="nats://127.0.0.1:$((PORT + 2000)),nats://127.0.0.1:$((PORT + 2001)),nats://127.0.0.1:$((PORT + 2002))"
    local want=(0 1 2)
    [[ $NODES == 1 ]] && want=(0)
    for i in "${want[@]}"; do
        mkdir -p "$DIR/nats-$i"
        if alive "$DIR/pids/nats-$i"; then continue; fi
        if [[ $NODES == 1 ]]; then
            "$nats" -js -n "hermes-$i" -sd "$DIR/nats-$i" -a 127.0.0.1 -p $((PORT + i)) \
                -m $((PORT + 4000 + i)) >"$DIR/logs/nats-$i.log" 2>&1 &
        else
            "$nats" -js -n "hermes-$i" -sd "$DIR/nats-$i" -a 127.0.0.1 -p $((PORT + i)) \
                -m $((PORT + 4000 + i)) --cluster_name hermes \
                --cluster "nats://127.0.0.1:$((PORT + 2000 + i))" --routes "$routes" \
                >"$DIR/logs/nats-$i.log" 2>&1 &
        fi
        echo $! >"$DIR/pids/nats-$i"
    done
    for i in "${want[@]}"; do wait_port $((PORT + i)) || return 1; done
    [[ $NODES == 1 ]] && return 0
    # JetStream needs a meta leader before streams can be created.
    for _ in $(seq 1 100); do
        if grep -q "JetStream cluster new metadata leader\|Self is new JetStream cluster metadata leader" "$DIR"/logs/nats-*.log; then
            return 0
        fi
        sleep 0.1
    done
    echo "the NATS nodes did not elect a JetStream leader; see $DIR/logs/nats-*.log" >&2
    return 1
}

start_hermes() {
    local kind=$1 actors=$2 count=$3 hermes i name file
    local configs=() files=()
    hermes=$(hermes_bin)
    # The user's files first, the cluster's own settings last (they win).
    if [[ -n ${HERMES_CONFIG:-} ]]; then
        IFS=: read -ra files <<<"$HERMES_CONFIG"
        for file in "${files[@]}"; do configs+=(--config "$file"); done
    fi
    configs+=(--config "$DIR/cluster.toml")
    for i in $(seq 1 "$count"); do
        name=$kind-$i
        if alive "$DIR/pids/$name"; then continue; fi
        : >"$DIR/logs/$name.log"
        HERMES_LOG=${HERMES_LOG:-info} "$hermes" "${configs[@]}" serve --bus "$(urls)" \
            --actors "$actors" --data-dir "$DIR/data/$name" \
            >"$DIR/logs/$name.out" 2>"$DIR/logs/$name.log" &
        echo $! >"$DIR/pids/$name"
    done
}

wait_ready() {
    local name
    for pid in "$DIR"/pids/*; do
        name=$(basename "$pid")
        [[ $name == nats-* ]] && continue
        for _ in $(seq 1 600); do
            grep -qx ready "$DIR/logs/$name.out" 2>/dev/null && break
            if ! alive "$pid"; then
                echo "$name exited; its log:" >&2
                tail -20 "$DIR/logs/$name.log" >&2
                return 1
            fi
            sleep 0.1
        done
        grep -qx ready "$DIR/logs/$name.out" || { echo "$name not ready after 60 s; see $DIR/logs/$name.log" >&2; return 1; }
    done
}

up() {
    mkdir -p "$DIR/pids" "$DIR/logs" "$DIR/data"
    {
        echo "# Written by scripts/cluster.sh: the cluster's own settings (over \$HERMES_CONFIG's)."
        echo "[cluster]"
        if [[ $NODES == 1 ]]; then echo "replicas = 1"; else echo "replicas = 3"; fi
    } >"$DIR/cluster.toml"
    # A cluster that does not come up is stopped again: no half-started processes are left.
    if ! { start_nats &&
        start_hermes session "$SESSION_ACTORS" "$SESSIONS" &&
        start_hermes planner planner "$PLANNERS" &&
        start_hermes tools tool-executor "$TOOLS" &&
        start_hermes mcp mcp-bridge "$MCP" &&
        start_hermes memory memory-extractor "$MEMORY" &&
        wait_ready; }; then
        echo "the cluster did not come up; stopping what was started" >&2
        down >/dev/null 2>&1 || true
        return 1
    fi
    status
}

status() {
    local name state
    printf '%-12s %-8s %s\n' PROCESS PID STATE
    for pid in "$DIR"/pids/*; do
        [[ -e $pid ]] || { echo "no cluster in $DIR"; return 0; }
        name=$(basename "$pid")
        if alive "$pid"; then state=running; else state=dead; fi
        printf '%-12s %-8s %s\n' "$name" "$(cat "$pid")" "$state"
    done
    echo "bus: $(urls)"
}

down() {
    local pid
    for pid in "$DIR"/pids/*; do
        [[ -e $pid ]] || continue
        # Hermes first, so no process loses its bus while stopping.
        [[ $(basename "$pid") == nats-* ]] && continue
        alive "$pid" && kill "$(cat "$pid")" 2>/dev/null || true
    done
    for pid in "$DIR"/pids/*; do
        [[ -e $pid ]] || continue
        [[ $(basename "$pid") == nats-* ]] && continue
        for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.1; done
        alive "$pid" && kill -9 "$(cat "$pid")" 2>/dev/null || true
        rm -f "$pid"
    done
    for pid in "$DIR"/pids/nats-*; do
        [[ -e $pid ]] || continue
        alive "$pid" && kill "$(cat "$pid")" 2>/dev/null || true
        for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.1; done
        rm -f "$pid"
    done
    if [[ ${1:-} == --wipe ]]; then rm -rf "$DIR"; fi
    echo "cluster stopped"
}

case ${1:-} in
    up) up ;;
    status) status ;;
    down) shift; down "$@" ;;
    *) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
