#!/usr/bin/env bash
# The fault matrix (issue 14): builds `hermes` and the harness (examples/faults; a debug build
# like the tests', so after `cargo test` nothing is rebuilt; --release for a release build),
# then strikes each fault against a live multi-process NATS deployment under load.
# One JSON line per cell (fault, lost, duplicated, stuck, crashed, …) and a summary line on
# stdout; the exit status is non-zero when any count is. Failed cells keep their process logs
# under target/faults/<cell> (every cell does with FAULTS_KEEP_LOGS=1; FAULTS_HERMES_LOG sets
# the processes' log filter, `warn` by default).
#
#   scripts/faults.sh [--release] [--quick] [--only PATTERN] [--list] [--sessions N] [--turns M]
#                     [--planner-with-sessions]
#
# Needs nats-server (scripts/setup-test-deps.sh puts it in .tools); the disk-full cell mounts
# a small tmpfs and needs root, else it reports "skipped" with the reason.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ -f .tools/env.sh ]; then
  # shellcheck source=/dev/null
  source .tools/env.sh
fi
profile=debug
build=()
args=()
for arg in "$@"; do
  case "$arg" in
    --release) profile=release; build=(--release) ;;
    *) args+=("$arg") ;;
  esac
done
cargo build "${build[@]}" --bin hermes --example faults
target="${CARGO_TARGET_DIR:-$root/target}/$profile"
exec "$target/examples/faults" --hermes "$target/hermes" --out "$target/../faults" "${args[@]}"
