#!/usr/bin/env python3
"""Writes tests/data/quant_goldens.txt for tests/test_quants.c.

Needs numpy and the `gguf` PyPI package (its dequantizers reproduce ggml's).
For each model in <shared>/reference/models/*.gguf and each tensor type in it,
the first and the last tensor of that type are sampled; for rows 0, middle and
last the file records the dequantized row's exact bit hash, sum, sum of squares
and a few values.  The C test reads the same rows straight from the GGUF at
the recorded absolute byte offset (no GGUF parser needed) and dequantizes them
with edgellm's code.

It also records gguf's Q8_0 quantization (bit-exact with ggml's
quantize_row_q8_0_ref) and numpy's float16 conversion of reproducible inputs.

Usage: tests/tools/gen_quant_goldens.py [--shared DIR] [--out FILE]

Format (one record per line, '#' starts a comment):
  T <model path relative to reference/> <tensor> <type id> <ne0> <ne1> <data offset>
  R <row> <fnv64 of the row's float32 bits, hex> <sum %.17g> <sumsq %.17g> <k> (<idx> <value %.9g>) x k
      (R lines belong to the preceding T)
  Q8_0 <vec> <hex of the Q8_0 blocks>     and     F16 <vec> <hex of the halves>
  where <vec> is  L <seed> <scale %.9g> <n>  (n values of lcg(seed) * scale, in float32)
              or  X <n> <v0 %.9g> ... <vn-1>   (explicit float32 values)
  lcg: s = (1664525 s + 1013904223) mod 2^32; value = (s >> 8) / 2^23 - 1, in [-1, 1).
"""
import argparse
import glob
import os
import sys

import numpy as np

import gguf
from gguf import GGMLQuantizationType as QT
from gguf import quants

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK64 = (1 << 64) - 1


def fnv64(values: np.ndarray) -> int:
    """FNV-1a over the little-endian float32 bit patterns, one 32-bit word at a time."""
    h = FNV_OFFSET
    for w in values.astype(np.float32).view(np.uint32).tolist():
        h ^= w
        h = (h * FNV_PRIME) & MASK64
    return h


def lcg(seed: int, n: int) -> np.ndarray:
    s = seed & 0xFFFFFFFF
    out = np.empty(n, dtype=np.float32)
    for i in range(n):
        s = (1664525 * s + 1013904223) & 0xFFFFFFFF
        out[i] = np.float32((s >> 8) / 8388608.0 - 1.0)
    return out


def g(v) -> str:
    return "%.9g" % float(v)


def row_record(row_idx: int, vals: np.ndarray) -> str:
    n = len(vals)
    v64 = vals.astype(np.float64)
    picks = list(range(min(8, n)))
    # a few strided positions across the row
    for k in range(1, 5):
        i = (k * n) // 5 + (7 * k) % max(1, n // 10)
        if i < n and i not in picks:
            picks.append(i)
    parts = ["R", str(row_idx), "%016x" % fnv64(vals), "%.17g" % v64.sum(),
             "%.17g" % (v64 * v64).sum(), str(len(picks))]
    for i in picks:
        parts += [str(i), g(vals[i])]
    return " ".join(parts)


def tensor_records(path: str, rel: str, t) -> list:
    qtype = QT(int(t.tensor_type))
    ne = [int(x) for x in t.shape]
    ne0 = ne[0]
    nrows = int(t.n_elements) // ne0
    blck, tsize = gguf.GGML_QUANT_SIZES[qtype]
    row_bytes = ne0 // blck * tsize
    off = int(t.data_offset)
    lines = ["T %s %s %d %d %d %d" % (rel, t.name, int(qtype), ne0, nrows, off)]
    with open(path, "rb") as f:
        for r in sorted({0, nrows // 2, nrows - 1}):
            f.seek(off + r * row_bytes)
            raw = np.frombuffer(f.read(row_bytes), dtype=np.uint8)
            # cross-check the offset against the reader's own view of the data
            assert raw.tobytes() == np.asarray(t.data).view(np.uint8).reshape(-1)[
                r * row_bytes:(r + 1) * row_bytes].tobytes(), (rel, t.name, r)
            vals = quants.dequantize(raw, qtype).reshape(-1).astype(np.float32)
            assert len(vals) == ne0
            lines.append(row_record(r, vals))
    return lines


def vec_desc_lcg(seed: int, scale: float, n: int):
    x = lcg(seed, n) * np.float32(scale)
    return x.astype(np.float32), "L %d %s %d" % (seed, g(np.float32(scale)), n)


def vec_desc_explicit(values):
    x = np.asarray(values, dtype=np.float32)
    return x, "X %d %s" % (len(x), " ".join(g(v) for v in x))


def quant_records() -> list:
    lines = []
    cases = [vec_desc_lcg(1, 1.0, 256), vec_desc_lcg(2, 0.01, 256),
             vec_desc_lcg(3, 37.5, 128), vec_desc_lcg(4, 1e-3, 64),
             vec_desc_lcg(5, 3e4, 64)]
    # exact ties: amax = 127 makes d = 1, so k + 0.5 rounds half away from zero
    ties = [127.0, 0.5, 1.5, -0.5, -1.5, 2.5, -2.5, 126.5, -126.5, 0.0, -0.0, 3.49999, 63.5]
    ties += [0.25 * i - 4.0 for i in range(32 - len(ties))]
    cases.append(vec_desc_explicit(ties))
    # an all-zero block, then a block with one outlier
    cases.append(vec_desc_explicit([0.0] * 32 + [1e-3] * 31 + [-50.0]))
    for x, desc in cases:
        q = quants.quantize(x.reshape(-1, 32) if len(x) % 32 == 0 else x, QT.Q8_0)
        lines.append("Q8_0 %s %s" % (desc, np.asarray(q).tobytes().hex()))
    f16_cases = [vec_desc_lcg(11, 1.0, 64), vec_desc_lcg(12, 7e4, 32),
                 vec_desc_lcg(13, 1e-6, 32), vec_desc_lcg(14, 3e-8, 32),
                 vec_desc_explicit([65504.0, 65519.0, 65520.0, -65536.0, 6.1035156e-05,
                                    5.9604645e-08, 2.9802322e-08, 2.9802326e-08, 1.0009766,
                                    1.0004883, 1.0014648, -0.0, float("inf"), float("-inf")])]
    for x, desc in f16_cases:
        with np.errstate(over="ignore"):
            h = x.astype(np.float16)
        lines.append("F16 %s %s" % (desc, h.tobytes().hex()))
    return lines


def gguf_version() -> str:
    try:
        from importlib.metadata import version
        return version("gguf")
    except Exception:
        return "?"


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.normpath(os.path.join(here, "..", ".."))
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(repo, "..", "shared"))
    ap.add_argument("--out", default=os.path.join(repo, "tests", "data", "quant_goldens.txt"))
    a = ap.parse_args()
    ref = os.path.join(a.shared, "reference")
    models = sorted(glob.glob(os.path.join(ref, "models", "*.gguf")))
    if not models:
        print("no models under %s" % ref, file=sys.stderr)
        return 1
    out = ["# generated by tests/tools/gen_quant_goldens.py (gguf %s, numpy %s) -- do not edit"
           % (gguf_version(), np.__version__)]
    for path in models:
        rel = os.path.relpath(path, ref)
        r = gguf.GGUFReader(path)
        by_type = {}
        for t in r.tensors:
            by_type.setdefault(int(t.tensor_type), []).append(t)
        for ty in sorted(by_type):
            ts = by_type[ty]
            for t in ([ts[0], ts[-1]] if len(ts) > 1 else ts[:1]):
                out += tensor_records(path, rel, t)
    out += quant_records()
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote %s (%d bytes)" % (a.out, os.path.getsize(a.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
