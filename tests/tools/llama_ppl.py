#!/usr/bin/env python3
"""llama.cpp's perplexity of a model on a text, by llama-perplexity's definition, for a KV cache type.

The reference for `edgellm perplexity` (src/cli/cmd_perplexity.c): the text is
tokenized with BOS (add_special, no special-token parsing), cut into
n_tokens // n_ctx chunks of n_ctx tokens, the first token of each chunk
replaced by BOS, each chunk evaluated from an empty cache in one llama_decode
with logits for every position (as llama-perplexity does), and the second
half scored: -log p(token[j+1]) for j in [n_ctx/2, n_ctx - 1). Flash attention
on; type_k = type_v = the given ggml type. Prints one JSON line.

usage: python llama_ppl.py MODEL TEXT [--ctx 512] [--type f16|bf16|q8_0|q4_0] [--threads 2]
"""
import argparse
import ctypes
import json
import os
import sys

os.environ.setdefault("GGML_CPU_TILED_MM", "0")
import numpy as np  # noqa: E402
import llama_cpp as L  # noqa: E402

TYPES = {"f16": 1, "bf16": 30, "q8_0": 8, "q4_0": 2}


@L.llama_log_callback
def _quiet(level, text, user_data):
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("text")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--type", choices=sorted(TYPES), default="f16")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    L.llama_log_set(_quiet, ctypes.c_void_p(0))
    L.llama_backend_init()
    mp = L.llama_model_default_params()
    model = L.llama_model_load_from_file(a.model.encode(), mp)
    vocab = L.llama_model_get_vocab(model)
    nv = L.llama_vocab_n_tokens(vocab)
    data = open(a.text, "rb").read()
    buf = (L.llama_token * (len(data) + 16))()
    n = L.llama_tokenize(vocab, data, len(data), buf, len(data) + 16, True, False)
    toks = [buf[i] for i in range(n)]
    bos = L.llama_vocab_bos(vocab)
    add_bos = n > 0 and toks[0] == bos
    cp = L.llama_context_default_params()
    cp.n_ctx = cp.n_batch = cp.n_ubatch = a.ctx
    cp.n_threads = cp.n_threads_batch = a.threads
    cp.flash_attn_type = 1
    cp.type_k = cp.type_v = TYPES[a.type]
    ctx = L.llama_init_from_model(model, cp)
    first = a.ctx // 2
    nll, count = 0.0, 0
    for c in range(n // a.ctx):
        chunk = toks[c * a.ctx:(c + 1) * a.ctx]
        if add_bos:
            chunk[0] = bos
        L.llama_memory_clear(L.llama_get_memory(ctx), True)
        batch = L.llama_batch_init(a.ctx, 0, 1)
        for i, t in enumerate(chunk):
            batch.token[i] = t
            batch.pos[i] = i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1
        batch.n_tokens = a.ctx
        assert L.llama_decode(ctx, batch) == 0
        for j in range(first, a.ctx - 1):
            lg = np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, j), shape=(nv,)).astype(np.float64)
            m = lg.max()
            nll -= lg[chunk[j + 1]] - m - np.log(np.exp(lg - m).sum())
            count += 1
        L.llama_batch_free(batch)
    print(json.dumps({"model": os.path.basename(a.model), "type": a.type, "n_tokens": n, "n_ctx": a.ctx,
                      "scored": count, "ppl": round(float(np.exp(nll / count)), 6),
                      "llama_cpp_python": L.__version__}))
    L.llama_free(ctx)
    L.llama_model_free(model)


if __name__ == "__main__":
    sys.exit(main())
