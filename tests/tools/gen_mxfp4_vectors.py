#!/usr/bin/env python3
"""Writes tests/data/mxfp4_vectors.txt for tests/test_mxfp4.c.

The reference is the `gguf` PyPI package's numpy MXFP4 (gguf.quants.MXFP4,
its own code, independent of edgellm's): its dequantize_blocks and
quantize_blocks follow ggml's dequantize_row_mxfp4 / quantize_row_mxfp4_ref.

Records (one per line, '#' starts a comment):
  D <hex of the blocks> <hex of the float32 values, little-endian>
      dequantization; the blocks cover every exponent 0..254 (0xFF, NaN in
      the MX spec, is refused by edgellm and never decoded) with every code
      in both nibbles
  Q <seed> <scale %.9g> <n> <hex of the blocks>
      quantization of n values lcg(seed) * scale (float32); every block's
      amax is >= 2^-125 so that the exponent does not wrap (numpy's cast of
      a negative float to uint8 is undefined; test_quantize checks the wrap
      against llama.cpp itself)
  lcg: s = (1664525 s + 1013904223) mod 2^32; value = (s >> 8) / 2^23 - 1, in [-1, 1).

Usage: tests/tools/gen_mxfp4_vectors.py [--out FILE]
"""
import argparse
import importlib.metadata
import os

import numpy as np


from gguf.quants import MXFP4


def lcg(seed: int, n: int) -> np.ndarray:
    s = seed & 0xFFFFFFFF
    out = np.empty(n, dtype=np.float32)
    for i in range(n):
        s = (1664525 * s + 1013904223) & 0xFFFFFFFF
        out[i] = np.float32((s >> 8) / 8388608.0 - 1.0)
    return out


def main():
    np.seterr(over="ignore")  # exponent 254 with the codes 8 and 12: inf, as ggml
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "data", "mxfp4_vectors.txt"))
    args = ap.parse_args()
    lines = [f"# MXFP4 vectors from gguf {importlib.metadata.version('gguf')}"
             f" (gguf.quants.MXFP4), numpy {np.__version__};"
             " written by tests/tools/gen_mxfp4_vectors.py, read by tests/test_mxfp4.c"]
    # dequantization: 5 blocks per line, exponents 0..254
    for e0 in range(0, 255, 5):
        blocks = []
        for e in range(e0, min(e0 + 5, 255)):
            qs = bytes(((j + e) & 15) | (((j * 7 + e) & 15) << 4) for j in range(16))
            blocks.append(bytes([e]) + qs)
        raw = np.frombuffer(b"".join(blocks), dtype=np.uint8).reshape(len(blocks), 17)
        vals = MXFP4.dequantize_blocks(raw).astype(np.float32).reshape(-1)
        lines.append("D " + raw.tobytes().hex() + " " + vals.astype("<f4").tobytes().hex())
    # quantization
    for seed, scale, n in [(1, 1.0, 256), (2, 0.01, 512), (3, 1000.0, 128), (4, 3.0e-30, 64), (5, 6.0, 96),
                           (6, 1.0e30, 64), (7, 0.125, 320), (8, 7.9, 64)]:
        x = (lcg(seed, n) * np.float32(scale)).astype(np.float32)
        blocks = x.reshape(-1, 32)
        assert (np.abs(blocks).max(axis=1) >= 2.0 ** -125).all()
        q = MXFP4.quantize_blocks(blocks)
        lines.append(f"Q {seed} {scale:.9g} {n} " + q.astype(np.uint8).tobytes().hex())
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
