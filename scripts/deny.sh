#!/usr/bin/env bash
# `cargo deny check` (advisories, licenses, bans, sources; deny.toml says why each exception
# stands), with cargo-deny from .tools (scripts/setup-test-deps.sh installs it, pinned).
#
# The advisory database: github.com/rustsec/advisory-db when it is reachable (cargo-deny
# fetches it); otherwise the snapshot in vendor/advisory-db/ (commit and date in its SNAPSHOT
# file) is laid out where cargo-deny looks for the database, as a git repository dated at the
# snapshot's commit so the staleness limit in deny.toml still applies — and this script says
# loudly that the check ran against a snapshot.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
deny="${HERMES_CARGO_DENY:-$root/.tools/cargo/bin/cargo-deny}"
if [ ! -x "$deny" ]; then
  echo "deny: $deny is missing; run scripts/setup-test-deps.sh" >&2
  exit 1
fi
# The offline check reads `cargo metadata`, which needs every locked package in the cargo
# cache — those of other platforms too, which a build never downloads.
if ! cargo fetch --locked >/dev/null 2>&1; then
  echo "deny: cargo fetch failed (no registry?); checking with what the cargo cache holds" >&2
fi
# Where cargo-deny 0.20 keeps the database of github.com/rustsec/advisory-db under db-path
# (deny.toml); the name is derived from the URL, so it changes only with cargo-deny.
dbs="$root/target/advisory-dbs"
db="$dbs/advisory-db-3157b0e258782691"
if timeout 20 git ls-remote --exit-code https://github.com/rustsec/advisory-db HEAD >/dev/null 2>&1; then
  echo "deny: advisory database: fetching the live github.com/rustsec/advisory-db" >&2
  # A snapshot laid out by an earlier offline run must not stand in for the live database.
  if [ -f "$db/SNAPSHOT" ]; then rm -rf "$db"; fi
  "$deny" check advisories licenses bans sources
else
  snapshot_commit=$(sed -n 's/^commit = //p' vendor/advisory-db/SNAPSHOT)
  snapshot_date=$(sed -n 's/^date = //p' vendor/advisory-db/SNAPSHOT)
  cat >&2 <<MSG
deny: ************************************************************************************
deny: github.com/rustsec/advisory-db is NOT REACHABLE from this machine: advisories are
deny: checked against the SNAPSHOT in vendor/advisory-db/ ($snapshot_date, commit
deny: ${snapshot_commit:0:12}). Advisories published since then are not seen; refresh the
deny: snapshot from a machine that reaches GitHub (see vendor/advisory-db/SNAPSHOT).
deny: ************************************************************************************
MSG
  if [ "$(cat "$db/SNAPSHOT" 2>/dev/null)" != "$(cat vendor/advisory-db/SNAPSHOT)" ]; then
    rm -rf "$db"
    mkdir -p "$dbs"
    cp -r vendor/advisory-db "$db"
    git -C "$db" init -q
    git -C "$db" add -A
    GIT_AUTHOR_DATE="$snapshot_date" GIT_COMMITTER_DATE="$snapshot_date" \
      git -C "$db" -c user.name=hermes -c user.email=hermes@localhost \
      commit -q -m "advisory-db snapshot $snapshot_commit"
  fi
  "$deny" --offline check advisories licenses bans sources
fi
