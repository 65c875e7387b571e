#!/usr/bin/env bash
# The full memory-recall evaluation on LoCoMo conversations (default: the development set
# ../shared/data/locomo-dev.json beside the repository; pass another LoCoMo JSON file to use
# it). Builds the release binary, makes sure the static embedder is installed, then prints
# `hermes eval memory` for every retriever and the hybrid retriever without each context
# signal in turn. Exits 0 without running when the dataset is absent.
# Usage: scripts/eval-memory.sh [DATASET]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dataset="${1:-$root/../shared/data/locomo-dev.json}"
if [ ! -f "$dataset" ]; then
  echo "eval-memory: no dataset at $dataset; pass a LoCoMo JSON file" >&2
  exit 0
fi
bash scripts/fetch-embedder.sh
cargo build --release --quiet
hermes="$root/target/release/hermes"
echo "== every retriever, all signals"
"$hermes" eval memory --dataset "$dataset" --retriever all
for signal in neighbours session speaker time; do
  echo "== hybrid without $signal"
  "$hermes" eval memory --dataset "$dataset" --retriever hybrid --without "$signal"
done
echo "== hybrid without any context signal"
"$hermes" eval memory --dataset "$dataset" --retriever hybrid --without neighbours,session,speaker,time
