#!/usr/bin/env bash
# Runs the official MCP conformance suite both ways:
#   server: `conformance server --url …` against `hermes mcp serve --http` (Streamable HTTP)
#   client: `conformance client --command "hermes mcp probe"` (the suite appends the URL and
#           sets MCP_CONFORMANCE_SCENARIO)
# Scenarios that do not apply to Hermes are listed, with reasons, in
# scripts/conformance-baseline.yml; the run fails on any other failure or a stale entry.
# Needs .tools/conformance (scripts/setup-test-deps.sh); builds hermes as the tests do.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
conformance_dir="$root/.tools/conformance"
if [ ! -x "$conformance_dir/node_modules/.bin/conformance" ]; then
  echo "conformance: not installed; run scripts/setup-test-deps.sh" >&2
  exit 1
fi
# Node 22 from the same folder: the suite crashes on Node 20.
export PATH="$conformance_dir/node_modules/.bin:$PATH"
# Built like `cargo test` builds it (the same features, dev-dependencies included), so after
# the test run nothing is compiled again; a plain `cargo build` would rebuild half the deps.
cargo test --no-run --quiet --test all
hermes="${CARGO_TARGET_DIR:-$root/target}/debug/hermes"
baseline="$root/scripts/conformance-baseline.yml"
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# Hermes' server, loopback only, with an anonymous principal (the suite sends no token).
cat > "$work/hermes.toml" <<TOML
[mcp]
servers = []
[mcp.server]
anonymous = { user = "conformance" }
TOML
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$hermes" --config "$work/hermes.toml" mcp serve --http "127.0.0.1:$port" --data-dir "$work/db" \
  > "$work/serve.out" 2> "$work/serve.err" &
server_pid=$!
for _ in $(seq 1 300); do
  grep -q '^ready' "$work/serve.out" 2>/dev/null && break
  sleep 0.1
done
grep -q '^ready' "$work/serve.out" || { cat "$work/serve.err" >&2; echo "conformance: hermes did not start" >&2; exit 1; }

# One direction: the suite's exit code is kept (a summary filter must not hide a crash); on a
# failure the end of the full log is shown too.
run_suite() {
  local name=$1
  shift
  local rc=0
  "$@" > "$work/$name.log" 2>&1 || rc=$?
  grep -E '^(✓|✗)|^Total|Baseline|Unexpected|Stale|  [✗~] ' "$work/$name.log" || true
  if [ "$rc" -ne 0 ]; then
    echo "conformance $name: failed (exit $rc); end of its log:" >&2
    tail -n 40 "$work/$name.log" >&2
  fi
  return "$rc"
}

status=0
echo "== conformance server (Hermes' Streamable HTTP server at http://127.0.0.1:$port/mcp)"
run_suite server conformance server --url "http://127.0.0.1:$port/mcp" \
  --expected-failures "$baseline" || status=1
echo "== conformance client (hermes mcp probe)"
run_suite client conformance client --command "$hermes mcp probe" --suite all \
  --expected-failures "$baseline" || status=1
exit $status
