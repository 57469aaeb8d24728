#!/usr/bin/env python3
"""Compare edgellm's EL_DEBUG_DUMP files with llama_dump.py's llama.cpp tensors, op by op.

usage: cmp_dump.py EDGELLM_DIR LLAMA_DIR [N_LAYERS]   (Gemma 3 graph names; N_LAYERS default 18)
Prints, per layer and op: max |difference|, max |value|, number of differing floats, and
the first op that differs at all. Rows: all of the batch (the last layer's rows after
llama.cpp drops all but the output row are compared on that row)."""
import os, sys
import numpy as np
el, ll = sys.argv[1], sys.argv[2]
nl = int(sys.argv[3]) if len(sys.argv) > 3 else 18
idx = [l.split()[0] for l in open(os.path.join(ll, "index.txt"))]
def ld(d, n):
    p = os.path.join(d, n + ".bin")
    return np.fromfile(p, dtype=np.float32) if os.path.exists(p) else None
def after(name):  # the node right after `name` in llama.cpp's order (attn output projection)
    i = idx.index(name); return idx[i + 1]
first = None
print("%-16s %4s %10s %10s %8s %s" % ("op", "L", "max|d|", "max|x|", "ndiff", "rel"))
def cmp(eln, lln, L):
    global first
    a = ld(el, "%s-%d" % (eln, L)); b = ld(ll, lln)
    if a is None or b is None: return
    if a.size != b.size:
        a = a[-b.size:]
    d = np.abs(a.astype(np.float64) - b); mx = float(np.abs(b).max())
    nd = int((a != b).sum())
    rel = float(d.max()) / mx if mx else 0
    print("%-16s %4d %10.3g %10.3g %8d %.2e" % (eln, L, d.max(), mx, nd, rel))
    if nd and first is None: first = (eln, L, float(d.max()), rel)
cmp("inp_scaled", "inp_scaled", -1)
for L in range(nl):
    for e, l in [("attn_norm", "attn_norm-%d"), ("Q", "Qcur-%d"), ("K", "Kcur-%d"), ("V", "Vcur-%d"),
                 ("Qnorm", "Qcur_normed-%d"), ("Knorm", "Kcur_normed-%d"), ("Qrope", "Qcur-%d.2"),
                 ("Krope", "Kcur-%d.2"), ("kqv", "kqv_out-%d"), ("attn_out", None),
                 ("attn_post_norm", "attn_post_norm-%d"), ("ffn_norm", "ffn_norm-%d"), ("gate", "ffn_gate-%d"),
                 ("up", "ffn_up-%d"), ("swiglu", "ffn_geglu-%d"), ("ffn_out", "ffn_out-%d"),
                 ("ffn_post_norm", "ffn_post_norm-%d"), ("l_out", "l_out-%d")]:
        cmp(e, after("kqv_out-%d" % L) if l is None else l % L, L)
print("first departure:", first)
