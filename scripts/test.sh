#!/usr/bin/env bash
# Installs what the tests need (nats-server, MCP servers, the MCP conformance suite with Node 22,
# playwright-core, into ./.tools; Debian's chromium for the status page's browser test), runs
# every test, `cargo deny check`, the fault matrix's quick run, then the MCP conformance suite
# both ways.
# This is the README's test command; .ci/run calls exactly this.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# Each stage says how long it took, so a slow CI run shows where its time went.
stage() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "test.sh: ${name} took $((SECONDS - start)) s"
}
stage setup bash scripts/setup-test-deps.sh
# One build serves the whole run, so incremental caches (gigabytes for this crate) only cost
# disk: a CI run once failed with its disk full. Set CARGO_INCREMENTAL=1 to keep them.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# shellcheck source=/dev/null
source .tools/env.sh
# Two test threads via the environment: `-- --test-threads` would also reach the criterion
# bench binaries (run once in test mode by --all-targets), which reject that flag.
stage build cargo test --all-targets --no-run
RUST_TEST_THREADS=2 stage tests cargo test --all-targets
# Advisories, licenses, bans and sources of every dependency (deny.toml); says loudly when the
# advisory database is the vendored snapshot because GitHub is out of reach.
stage deny bash scripts/deny.sh
# The fault matrix, reduced (a few minutes; the binaries are already built): each fault against
# a live multi-process deployment under load; fails on any lost, duplicated, stuck or crashed.
stage faults bash scripts/faults.sh --quick
# Again with a planner in each session process: a turn's message then goes into the session log
# with the turn's first write, which the faults must not break either.
stage faults-with-planners bash scripts/faults.sh --quick --planner-with-sessions
# The MCP conformance suite both ways (a few minutes once hermes is built).
stage conformance bash scripts/conformance.sh
