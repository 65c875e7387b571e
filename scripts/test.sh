#!/usr/bin/env bash
# Installs what the tests need (nats-server, MCP servers; into ./.tools) and runs every test.
# This is the README's test command; .ci/run calls exactly this.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/setup-test-deps.sh
# shellcheck source=/dev/null
source .tools/env.sh
cargo test --all-targets -- --test-threads=2
# The MCP conformance suite both ways (about 30 s once hermes is built).
bash scripts/conformance.sh
