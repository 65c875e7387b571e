#!/usr/bin/env bash
# Runs the official MCP conformance suite (version pinned in scripts/setup-test-deps.sh) both
# ways, at each requirement set (the scenarios a spec revision requires, run at its wire:
# 2025-11-25 with the initialize handshake, 2026-07-28 stateless):
#   server: `conformance server --url …` against `hermes mcp serve --http` (Streamable HTTP)
#           with the suite's own fixture server (everything-server.ts, vendored in
#           tests/fixtures/conformance) mounted and served through Hermes
#           (`[mcp.server] passthrough`), so the fixture scenarios (test_* tools, test://
#           resources, test_* prompts) reach it behind Hermes' auth, roles and audit; then the
#           tasks extension's `tasks-*` scenarios, which the requirement sets run without
#           scoring, one by one so that they count
#   client: `conformance client --command "hermes mcp probe"` (the suite appends the URL and
#           sets MCP_CONFORMANCE_SCENARIO; the probe logs in when a server asks for OAuth)
# Failures Hermes expects are listed, with reasons, in scripts/conformance-baseline.yml; the
# run fails on any other failure or a stale entry. Per run it prints the suite's summary and
# one `figures:` line (scenarios run and passed, by the suite's own count).
# Needs .tools/conformance and .tools/conformance-fixture (scripts/setup-test-deps.sh); builds
# hermes as the tests do.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
conformance_dir="$root/.tools/conformance"
if [ ! -x "$conformance_dir/node_modules/.bin/conformance" ]; then
  echo "conformance: not installed; run scripts/setup-test-deps.sh" >&2
  exit 1
fi
fixture_dir="$root/.tools/conformance-fixture"
if [ ! -x "$fixture_dir/node_modules/.bin/tsx" ]; then
  echo "conformance: the fixture server's packages are not installed; run scripts/setup-test-deps.sh" >&2
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
fixture_pid=""
cleanup() {
  for pid in $server_pid $fixture_pid; do
    kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The suite's fixture server, on loopback. It runs from its packages' folder (its imports
# resolve there), copied afresh from the vendored file.
cp "$root/tests/fixtures/conformance/everything-server.ts" "$fixture_dir/everything-server.ts"
fixture_port=$(free_port)
(cd "$fixture_dir" && PORT=$fixture_port exec node_modules/.bin/tsx everything-server.ts) \
  > "$work/fixture.out" 2> "$work/fixture.err" &
fixture_pid=$!
for _ in $(seq 1 300); do
  grep -q 'running on' "$work/fixture.out" 2>/dev/null && break
  sleep 0.1
done
grep -q 'running on' "$work/fixture.out" || { cat "$work/fixture.err" >&2; echo "conformance: the fixture server did not start" >&2; exit 1; }

# Hermes' server, loopback only, with an anonymous principal (the suite sends no token),
# serving the fixture server through it.
cat > "$work/hermes.toml" <<TOML
[[mcp.servers]]
name = "fixture"
url = "http://127.0.0.1:$fixture_port/mcp"
[mcp.server]
anonymous = { user = "conformance", roles = ["conformance"] }
passthrough = "fixture"
[mcp.server.roles.conformance]
tools = ["*"]
TOML
port=$(free_port)
"$hermes" --config "$work/hermes.toml" mcp serve --http "127.0.0.1:$port" --data-dir "$work/db" \
  > "$work/serve.out" 2> "$work/serve.err" &
server_pid=$!
for _ in $(seq 1 300); do
  grep -q '^ready' "$work/serve.out" 2>/dev/null && break
  sleep 0.1
done
grep -q '^ready' "$work/serve.out" || { cat "$work/serve.err" >&2; echo "conformance: hermes did not start" >&2; exit 1; }

# The suite's log without its colours.
plain() { sed 's/\x1b\[[0-9;]*m//g' "$work/$1.log"; }

# One run: the suite's exit code is kept (a summary filter must not hide a crash); on a
# failure the end of the full log is shown too.
run_suite() {
  local name=$1
  shift
  local rc=0
  "$@" > "$work/$name.log" 2>&1 || rc=$?
  plain "$name" | grep -E '^(✓|✗)|^Total|^Baseline|^Unexpected|^Stale|^  [✗~] |^Not scored' || true
  figures "$name"
  if [ "$rc" -ne 0 ]; then
    echo "conformance $name: failed (exit $rc); end of its log:" >&2
    plain "$name" | tail -n 40 >&2
  fi
  return "$rc"
}

# `figures: <role>-<set>: <n> scored scenarios run, <m> passed`: the summary's ✓/✗ lines of
# the scenarios the requirement set scores (`conformance list --requirements`), not of those
# it runs without counting.
figures() {
  local role=${1%%-*} set=${1#*-}
  conformance list --requirements "$set" | awk -v role="$role" '
    /^Server scenarios/ { in_role = (role == "server"); next }
    /^Client scenarios/ { in_role = (role == "client"); next }
    /^Run and reported/ { exit }
    in_role && /^  - / { print $2 }' > "$work/$1.scored"
  plain "$1" | awk -v run="$1" -v scored="$work/$1.scored" '
    BEGIN { while ((getline name < scored) > 0) counted[name] = 1 }
    /^(✓|✗) / { name = $2; sub(/:$/, "", name); if (name in counted) seen[name] = $1 }
    END {
      for (name in seen) { n++; if (seen[name] == "✓") ok++ }
      printf "figures: %s: %d scored scenarios run, %d passed\n", run, n, ok
    }'
}

status=0
url="http://127.0.0.1:$port/mcp"
for requirements in 2025-11-25 2026-07-28; do
  echo "== conformance server, requirements $requirements (hermes mcp serve --http at $url)"
  run_suite "server-$requirements" conformance server --url "$url" \
    --requirements "$requirements" --expected-failures "$baseline" || status=1
  echo "== conformance client, requirements $requirements (hermes mcp probe)"
  # The metadata document URL is the one the suite's client-ID-metadata scenario expects (its
  # authorization server never fetches it); the probe offers it only to servers that accept one.
  # --accept-defaults: the probe answers questions as the suite's scenarios expect a client
  # with a person behind it to (accept, with the schema's defaults).
  run_suite "client-$requirements" conformance client \
    --command "$hermes mcp probe --accept-defaults --client-metadata-url https://conformance-test.local/client-metadata.json" \
    --requirements "$requirements" --expected-failures "$baseline" || status=1
done
# The tasks extension (SEP-2663): one scenario per run (at the revision it belongs to), so
# that its failures count.
tasks=$(conformance list --server | sed -n 's/^  - \(tasks-[a-z0-9-]*\).*/\1/p')
echo "== conformance server, tasks extension ($(echo $tasks | wc -w) scenarios)"
ran=0 passed=0
for scenario in $tasks; do
  rc=0
  conformance server --url "$url" --scenario "$scenario" \
    --expected-failures "$baseline" > "$work/$scenario.log" 2>&1 || rc=$?
  result=$(plain "$scenario" | sed -n 's/^Passed: //p')
  echo "$scenario: ${result:-no result}"
  ran=$((ran + 1))
  case "$result" in *", 0 failed"*) passed=$((passed + 1)) ;; esac
  if [ "$rc" -ne 0 ]; then
    status=1
    plain "$scenario" | grep -E '^Unexpected|^Stale|^  [✗~] ' >&2 || true
  fi
done
echo "figures: server-tasks: $ran scenarios run, $passed passed"
exit $status
