#!/usr/bin/env python3
"""Writes tests/data/quantize_goldens.txt for tests/test_quantize.c.

llama.cpp's own quantizer (llama_cpp.llama_model_quantize from
llama-cpp-python 0.3.36, no importance matrix, default parameters) is run on
small F32 GGUF models whose weights come from a documented generator, for every
file type edgellm offers; the file records, for every tensor, the type
llama.cpp chose and the SHA-256 of the bytes it wrote.  The C test rebuilds the
same inputs, runs el_quant_plan + el_quantize_rows, and compares.

Models (real tensor names and shapes, few layers, all weights F32):
  llama    8 layers, n_embd 256, GQA 4/1, n_ff 288 (ffn_down rows not a
           multiple of 256: K-quant fallbacks), untied output.weight
  qwen2    3 layers, n_embd 320 (no row a multiple of 256), n_ff 200 (ffn_down
           rows not a multiple of 32: F16 fallback), tied embeddings, q/k/v biases
  qwen3    5 layers, n_embd 256, GQA 4/2, n_ff 384, q/k norms, tied embeddings
  gemma3   6 layers, n_embd 256, q/k norms, post norms, tied embeddings
  llama80  80 layers (llama.cpp's "70B" rule), tiny 2-row matrices, only
           attn_k / attn_v / ffn_down in the layers; types only
  llama80mha, qwen2_80   the same for llama without GQA (65B: no bump) and
           qwen2 (70B), attn_v only
  edge     one 512x10 tensor of edge-case rows, quantized with `pure` for each
           ftype, so every block type is checked on it (also Q2_K via
           LLAMA_FTYPE_MOSTLY_Q2_K and Q3_K via Q3_K_S); per-row hashes

Usage: tests/tools/gen_quantize_goldens.py [--out FILE]

Format (one record per line, '#' starts a comment):
  M <model> <arch> <n_layer> <n_head> <n_head_kv> <n_expert>
  T <model> <tensor> <n_dims> <ne0> <ne1> <gen> <seed> <scale %.9g>
      gen U: x = u * scale;  gen C: x = u*u*u*scale;  gen E: the edge rows (below)
      u = lcg(seed): s = (1664525 s + 1013904223) mod 2^32; u = (s >> 8) / 2^23 - 1,
      in float32, one value per element in row-major order; products in float32.
  F <name>:<llama ftype id>:<pure 0|1> ...   the llama_model_quantize runs for the
      model above, in column order
  Q <model> <tensor> <type>:<hash> ...        per run (column): the ggml type id
      llama.cpp chose and the first 16 hex digits of the SHA-256 of the tensor's
      bytes ('-': types only, as for llama80)
  R <model> <tensor> <row> <type>:<hash> ...  the same per row (edge model only)
Edge rows (ne0 = 512), u from lcg(seed) across the whole tensor as above
(every element draws one u, used or not):
  0 zeros   1 constant 0.5   2 constant -3   3 u*20000   4 u*1e-30
  5 u*0.01 with x[100] = 50 and x[300] = -20   6 ((j % 17) - 8) * 0.25
  7 u * m[(j/32) % 6], m = {1e-3, 1e-2, 1e-1, 1, 10, 100} (float32 constants)
  8 u*0.1 with x[32..63] and x[256..271] = 0   9 u*1e-39 (float32 subnormals)
"""
import argparse
import ctypes
import hashlib
import os
import sys
import tempfile

import numpy as np

import gguf
import llama_cpp

MASK32 = 0xFFFFFFFF

# (name, llama ftype id) for the ftypes of el_ftype, in its order
FTYPES = [("F32", 0), ("F16", 1), ("BF16", 32), ("Q8_0", 7), ("Q4_0", 2), ("Q4_1", 3),
          ("Q5_0", 8), ("Q5_1", 9), ("Q4_K", 14), ("Q5_K", 16), ("Q6_K", 18),
          ("Q4_K_M", 15), ("Q5_K_M", 17), ("MXFP4_MOE", 38)]
# pure runs for the edge tensor: every block type once
EDGE_FTYPES = [("F16", 1), ("BF16", 32), ("Q8_0", 7), ("Q4_0", 2), ("Q4_1", 3), ("Q5_0", 8),
               ("Q5_1", 9), ("Q2_K", 10), ("Q3_K", 11), ("Q4_K", 14), ("Q5_K", 16), ("Q6_K", 18),
               ("MXFP4", 38)]  # LLAMA_FTYPE_MOSTLY_MXFP4_MOE, pure: every block MXFP4


def fnv1a32(s: str) -> int:
    h = 0x811C9DC5
    for b in s.encode():
        h ^= b
        h = (h * 0x01000193) & MASK32
    return h


_JUMP = None


def lcg(seed: int, n: int) -> np.ndarray:
    """n values of the LCG (float32), vectorized with jump-ahead constants."""
    global _JUMP
    B = 4096
    if _JUMP is None:
        A = np.empty(B, np.uint64)
        C = np.empty(B, np.uint64)
        a, c = 1, 0
        for k in range(B):
            a, c = (1664525 * a) & MASK32, (1664525 * c + 1013904223) & MASK32
            A[k], C[k] = a, c
        _JUMP = (A, C)
    A, C = _JUMP
    out = np.empty(n, np.uint32)
    s = seed & MASK32
    for off in range(0, n, B):
        m = min(B, n - off)
        st = (A[:m] * np.uint64(s) + C[:m]) & np.uint64(MASK32)
        out[off:off + m] = st.astype(np.uint32)
        s = int(st[m - 1])
    return ((out >> 8).astype(np.float64) / 8388608.0 - 1.0).astype(np.float32)


def gen_values(gen: str, seed: int, scale: float, ne0: int, ne1: int) -> np.ndarray:
    n = ne0 * ne1
    u = lcg(seed, n)
    sc = np.float32(scale)
    if gen == "U":
        return (u * sc).astype(np.float32)
    if gen == "C":
        return (((u * u) * u) * sc).astype(np.float32)
    assert gen == "E" and ne0 == 512 and ne1 == 10
    x = u.reshape(ne1, ne0).copy()
    j = np.arange(ne0)
    x[0] = 0.0
    x[1] = np.float32(0.5)
    x[2] = np.float32(-3.0)
    x[3] = x[3] * np.float32(20000.0)
    x[4] = x[4] * np.float32(1e-30)
    x[5] = x[5] * np.float32(0.01)
    x[5, 100] = 50.0
    x[5, 300] = -20.0
    x[6] = ((j % 17) - 8).astype(np.float32) * np.float32(0.25)
    mags = np.array([1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0], dtype=np.float32)
    x[7] = x[7] * mags[(j // 32) % 6]
    x[8] = x[8] * np.float32(0.1)
    x[8, 32:64] = 0.0
    x[8, 256:272] = 0.0
    x[9] = x[9] * np.float32(1e-39)
    return x.reshape(-1).astype(np.float32)


def llama_like(n_layer, n_embd, n_head, n_head_kv, n_ff, n_vocab, tied, extra_norms=False,
               biases=False, rows=None, qk_norms=False):
    """Tensor list (name, shape as ne list) in the order convert_hf_to_gguf writes."""
    hd = n_embd // n_head
    r = (lambda n: n) if rows is None else (lambda n: rows)
    t = [("token_embd.weight", [n_embd, r(n_vocab)])]
    for i in range(n_layer):
        p = f"blk.{i}."
        t.append((p + "attn_norm.weight", [n_embd]))
        t.append((p + "attn_q.weight", [n_embd, r(n_head * hd)]))
        t.append((p + "attn_k.weight", [n_embd, r(n_head_kv * hd)]))
        t.append((p + "attn_v.weight", [n_embd, r(n_head_kv * hd)]))
        if biases:
            t.append((p + "attn_q.bias", [n_head * hd]))
            t.append((p + "attn_k.bias", [n_head_kv * hd]))
            t.append((p + "attn_v.bias", [n_head_kv * hd]))
        if extra_norms or qk_norms:
            t.append((p + "attn_q_norm.weight", [hd]))
            t.append((p + "attn_k_norm.weight", [hd]))
        t.append((p + "attn_output.weight", [n_head * hd, r(n_embd)]))
        if extra_norms:
            t.append((p + "post_attention_norm.weight", [n_embd]))
        t.append((p + "ffn_norm.weight", [n_embd]))
        t.append((p + "ffn_gate.weight", [n_embd, r(n_ff)]))
        t.append((p + "ffn_up.weight", [n_embd, r(n_ff)]))
        t.append((p + "ffn_down.weight", [n_ff, r(n_embd)]))
        if extra_norms:
            t.append((p + "post_ffw_norm.weight", [n_embd]))
    t.append(("output_norm.weight", [n_embd]))
    if not tied:
        t.append(("output.weight", [n_embd, r(n_vocab)]))
    return t


MODELS = {
    "llama": dict(arch="llama", n_layer=8, n_embd=256, n_head=4, n_head_kv=1, n_ff=288,
                  n_vocab=300, tied=False),
    "qwen2": dict(arch="qwen2", n_layer=3, n_embd=320, n_head=5, n_head_kv=1, n_ff=200,
                  n_vocab=300, tied=True, biases=True),
    "qwen3": dict(arch="qwen3", n_layer=5, n_embd=256, n_head=4, n_head_kv=2, n_ff=384,
                  n_vocab=300, tied=True, qk_norms=True),
    "gemma3": dict(arch="gemma3", n_layer=6, n_embd=256, n_head=4, n_head_kv=1, n_ff=256,
                   n_vocab=300, tied=True, extra_norms=True),
    "llama80": dict(arch="llama", n_layer=80, n_embd=256, n_head=8, n_head_kv=1, n_ff=256,
                    n_vocab=300, tied=False, rows=2, types_only=True,
                    only=("attn_k.", "attn_v.", "ffn_down.")),
    # 80 layers without GQA is llama.cpp's 65B: no attn_v bump
    "llama80mha": dict(arch="llama", n_layer=80, n_embd=256, n_head=8, n_head_kv=8, n_ff=256,
                       n_vocab=300, tied=False, rows=2, types_only=True, only=("attn_v.",)),
    # qwen2 with 80 layers is 70B whatever its heads
    "qwen2_80": dict(arch="qwen2", n_layer=80, n_embd=256, n_head=8, n_head_kv=8, n_ff=256,
                     n_vocab=300, tied=True, rows=2, types_only=True, only=("attn_v.",)),
}


def write_gguf(path, arch, n_layer, n_embd, n_head, n_head_kv, n_ff, tensors):
    w = gguf.GGUFWriter(path, arch)
    w.add_context_length(2048)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(0)
    if arch == "gemma3":
        w.add_sliding_window(512)
        w.add_key_length(n_embd // n_head)
        w.add_value_length(n_embd // n_head)
    for name, data, ne in tensors:
        # gguf takes numpy shapes (outermost first)
        w.add_tensor(name, data.reshape(list(reversed(ne))))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize(inp, out, ftype_id, pure):
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype_id
    p.pure = bool(pure)
    p.nthread = 2
    rc = llama_cpp.llama_model_quantize(inp.encode(), out.encode(), ctypes.byref(p))
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize({ftype_id}) failed")
    r = gguf.GGUFReader(out)
    return {t.name: (int(t.tensor_type), np.ascontiguousarray(t.data).tobytes(), t) for t in r.tensors}


def h16(raw: bytes) -> str:
    """The first 8 bytes of the SHA-256, as hex."""
    return hashlib.sha256(raw).hexdigest()[:16]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "data",
                                                  "quantize_goldens.txt"))
    args = ap.parse_args()
    lines = ["# quantize goldens: llama.cpp's quantizer (llama-cpp-python %s, no imatrix)"
             % llama_cpp.__version__,
             "# written by tests/tools/gen_quantize_goldens.py; read by tests/test_quantize.c"]
    tmp = tempfile.mkdtemp(prefix="qgold")
    models = dict(MODELS)
    for mname, cfg in list(models.items()) + [("edge", None)]:
        if cfg is None:
            arch, n_layer, n_head, n_head_kv, n_embd, n_ff = "llama", 1, 4, 4, 512, 512
            specs = [("blk.0.edge.weight", [512, 10], "E", 12345, 1.0)]
        else:
            arch, n_layer, n_head, n_head_kv = cfg["arch"], cfg["n_layer"], cfg["n_head"], cfg["n_head_kv"]
            n_embd, n_ff = cfg["n_embd"], cfg["n_ff"]
            tl = llama_like(n_layer, n_embd, n_head, n_head_kv, n_ff, cfg["n_vocab"], cfg["tied"],
                            cfg.get("extra_norms", False), cfg.get("biases", False), cfg.get("rows"),
                            cfg.get("qk_norms", False))
            if cfg.get("only"):
                tl = [(n, ne) for n, ne in tl
                      if not n.startswith("blk.") or any(o in n for o in cfg["only"])]
            specs = []
            for k, (name, ne) in enumerate(tl):
                if len(ne) == 1:
                    specs.append((name, ne, "U", fnv1a32(name), 0.1))
                else:
                    # alternate uniform and heavy-centred weights, scales by shape
                    gen = "C" if k % 2 else "U"
                    scale = 0.5 / np.sqrt(ne[0]) * (1 + (k % 5))
                    specs.append((name, ne, gen, fnv1a32(name), float(np.float32(scale))))
        lines.append(f"M {mname} {arch} {n_layer} {n_head} {n_head_kv} 0")
        tensors = []
        for name, ne, gen, seed, scale in specs:
            ne1 = ne[1] if len(ne) > 1 else 1
            data = gen_values(gen, seed, scale, ne[0], ne1)
            tensors.append((name, data, ne))
            lines.append(f"T {mname} {name} {len(ne)} {ne[0]} {ne1} {gen} {seed} {scale:.9g}")
        src = os.path.join(tmp, mname + ".gguf")
        write_gguf(src, arch, n_layer, n_embd, n_head, n_head_kv, n_ff, tensors)
        runs = [(n, i, 0) for n, i in FTYPES] if cfg is not None else [(n, i, 1) for n, i in EDGE_FTYPES]
        with_bytes = cfg is None or not cfg.get("types_only", False)
        lines.append("F " + " ".join(f"{n}:{i}:{pure}" for n, i, pure in runs))
        cols = {name: [] for name, _, _ in tensors}
        rowcols = {}
        for fname, fid, pure in runs:
            dst = os.path.join(tmp, f"{mname}-{fname}.gguf")
            q = quantize(src, dst, fid, pure)
            for name, data, ne in tensors:
                ty, raw, _ = q[name]
                cols[name].append(f"{ty}:{h16(raw) if with_bytes else '-'}")
                if cfg is None:
                    ne1 = ne[1]
                    rs = len(raw) // ne1
                    for r in range(ne1):
                        rowcols.setdefault((name, r), []).append(f"{ty}:{h16(raw[r * rs:(r + 1) * rs])}")
            os.remove(dst)
        for name, _, _ in tensors:
            lines.append(f"Q {mname} {name} " + " ".join(cols[name]))
        for (name, r), c in rowcols.items():
            lines.append(f"R {mname} {name} {r} " + " ".join(c))
        os.remove(src)
        print(f"{mname}: {len(specs)} tensors, {len(runs)} ftypes", file=sys.stderr)
    os.rmdir(tmp)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}: {len(lines)} lines", file=sys.stderr)


if __name__ == "__main__":
    main()
