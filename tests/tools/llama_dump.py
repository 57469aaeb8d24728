#!/usr/bin/env python3
"""Dump every F32 tensor llama.cpp computes while it prefills a prompt (its eval callback).

For op-by-op comparisons with edgellm's EL_DEBUG_DUMP files (tests/tools/cmp_dump.py).
The prompt is tokenized with BOS and special-token parsing, prefilled in one
llama_decode (n_ctx 1024), and the first step's top 3 log-probabilities are printed
with llama.cpp's system_info. Files: OUTDIR/<tensor name>[.k].bin (raw float32, the
k-th tensor of that name), OUTDIR/index.txt (name, shape, ggml op) in graph order.
GGML_CPU_TILED_MM=0/1 in the environment switches the build's tiled K-quant matmul.

usage: llama_dump.py MODEL PROMPTFILE OUTDIR [--fa -1|0|1] [--ubatch N] [--extra 0|1] [--nodump]

edgellm's side: build with -DCMAKE_C_FLAGS=-DEL_DEBUG_DUMP, then
  EL_DUMP_DIR=DIR build/edgellm run -m MODEL -f PROMPTFILE -n 1 -c 1024 --temp 0 --allow-unsigned
(DIR empty: only the prefill's tensors are kept)."""
import argparse, ctypes, os, sys
import numpy as np
ap = argparse.ArgumentParser()
ap.add_argument("model"); ap.add_argument("prompt"); ap.add_argument("out")
ap.add_argument("--fa", type=int, default=-1); ap.add_argument("--ubatch", type=int, default=512)
ap.add_argument("--extra", type=int, default=1); ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--nodump", action="store_true")
a = ap.parse_args()
import llama_cpp as L

class T(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4), ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16),
                ("flags", ctypes.c_int32), ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
                ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p), ("name", ctypes.c_char * 64),
                ("extra", ctypes.c_void_p), ("padding", ctypes.c_char * 8)]
os.makedirs(a.out, exist_ok=True)
seen = {}
@L.ggml_backend_sched_eval_callback
def cb(tp, ask, ud):
    if ask:
        return not a.nodump
    t = ctypes.cast(tp, ctypes.POINTER(T)).contents
    name = t.name.decode()
    if t.type != 0 or not t.data:
        return True
    ne = list(t.ne); nb = list(t.nb)
    n = ne[0] * ne[1] * ne[2] * ne[3]
    contig = nb[0] == 4 and nb[1] == 4 * ne[0] and nb[2] == nb[1] * ne[1] and nb[3] == nb[2] * ne[2]
    if contig:
        arr = np.ctypeslib.as_array((ctypes.c_float * n).from_address(t.data)).copy()
    else:
        base = (ctypes.c_char * (nb[3] * ne[3])).from_address(t.data)
        arr = np.lib.stride_tricks.as_strided(np.frombuffer(base, dtype=np.float32),
              shape=ne[::-1], strides=nb[::-1]).copy().ravel()
    k = seen.get(name, 0); seen[name] = k + 1
    fn = name.replace("/", "_") + ("" if k == 0 else ".%d" % k)
    arr.astype(np.float32).tofile(os.path.join(a.out, fn + ".bin"))
    with open(os.path.join(a.out, "index.txt"), "a") as f:
        f.write("%s %s %d\n" % (fn, "x".join(map(str, ne)), t.op))
    return True

L.llama_backend_init()
mp = L.llama_model_default_params()
mp.use_extra_bufts = bool(a.extra)
model = L.llama_model_load_from_file(a.model.encode(), mp)
vocab = L.llama_model_get_vocab(model)
nv = L.llama_vocab_n_tokens(vocab)
cp = L.llama_context_default_params()
cp.n_ctx = 1024; cp.n_batch = 1024; cp.n_ubatch = a.ubatch
cp.n_threads = a.threads; cp.n_threads_batch = a.threads
cp.flash_attn_type = a.fa
if not a.nodump:
    cp.cb_eval = cb
ctx = L.llama_init_from_model(model, cp)
text = open(a.prompt, "rb").read()
arr = (L.llama_token * (len(text) + 16))()
n = L.llama_tokenize(vocab, text, len(text), arr, len(text) + 16, True, True)
toks = [arr[i] for i in range(n)]
print("tokens", n, toks, file=sys.stderr)
tarr = (L.llama_token * n)(*toks)
b = L.llama_batch_get_one(tarr, n)
assert L.llama_decode(ctx, b) == 0
lg = np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, -1), shape=(nv,)).astype(np.float64)
m = lg.max(); lp = lg - (m + np.log(np.exp(lg - m).sum()))
o = np.argsort(-lp)[:3]
print("step0", [(int(i), round(float(lp[i]), 6)) for i in o])
print(L.llama_print_system_info().decode())
