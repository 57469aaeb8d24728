#!/usr/bin/env python3
"""Long-prompt goldens for the tiny reference models, made by llama.cpp.

The tiny models' goldens (tests/data/reference/goldens) stop at 52 prompt tokens;
these use 3 prompts of ~64 to ~600 tokens (the longest crosses llama.cpp's
512-token micro-batch) on every model of reference/models, 24
greedy steps each, and record llama.cpp's own spread on each prompt: the same
path (teacher-forced) with flash attention off, with n_ubatch 32, with one
thread (llama.cpp's decode splits the cache among its threads past 512
cells), with the tiled K-quant matmul off (GGML_CPU_TILED_MM=0), and with
both of the last two.

Output: tests/data/tiny-long/<model>.json (committed; read by
tests/test_parity_long.c). steps[i] = [id, logprob, margin, spread,
fa_off argmax, ubatch32 argmax, threads1 argmax, tiled_off argmax, tiled_off_threads1 argmax]; cases[].tolerance = max(0.05, spread).
Prompt tokens: BOS per the vocab, special-token parsing off (as the shared
goldens). The build is recorded as in gen_gemma_goldens.py.

With --short: the tiny models' short goldens instead, tests/data/reference/goldens/<model>.json
(read by test_parity, test_tokenizer, test_cli, the server tests): for each prompt of
tests/data/reference/goldens/prompts.txt, llama.cpp's prompt tokens, its 24 greedy
tokens and the top-8 log-probabilities of the full distribution at each step,
with the build that made them. `make goldens` runs both. The short goldens are
made with GGML_CPU_TILED_MM=0 (unless the environment says otherwise; the
build record names it): the reference build behind them had no tiled K-quant
matmul, the arithmetic edgellm follows bit for bit.

usage: python3 tests/tools/gen_tiny_goldens.py [--short] [--ref DIR] [--out DIR] [--filter SUBSTR]
"""
import argparse
import glob
import json
import os
import sys

import numpy as np

if "--short" in sys.argv:  # ggml reads it once, when llama_cpp is imported (by gen_gemma_goldens)
    os.environ.setdefault("GGML_CPU_TILED_MM", "0")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemma_prompts  # noqa: E402
import gen_gemma_goldens as G  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import fixtures  # noqa: E402  (tests/fixtures/fixtures.py)

L = G.L
N_STEPS = 24
MAX_PROMPT = 600
LOGPROB_TOL = 0.05
VARIANTS = [("fa_off", {"flash_attn_type": 0}), ("ubatch32", {"n_ubatch": 32}), ("threads1", {"n_threads": 1})]
ENV_VARIANTS = G.ENV_VARIANTS  # tiled_off, in a child process


class TinyRunner(G.Runner):
    def tokenize(self, text):
        b = text.encode("utf-8")
        cap = len(b) + 16
        arr = (L.llama_token * cap)()
        n = L.llama_tokenize(self.tok_owner, b, len(b), arr, cap, True, False)
        if n < 0:
            raise RuntimeError("tokenize failed")
        return [int(arr[i]) for i in range(n)]


def prompts_for(r):
    """Three prompts; the long one is the longest word prefix of LONG_EN with <= MAX_PROMPT tokens."""
    words = gemma_prompts.LONG_EN.split(" ")
    lo, hi = 1, len(words)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(r.tokenize(" ".join(words[:mid]))) <= MAX_PROMPT:
            lo = mid
        else:
            hi = mid - 1
    return [("few-shot", gemma_prompts.FEW_SHOT + "\n" + gemma_prompts.NUMBERS),
            ("code", gemma_prompts.CODE),
            ("long-en", " ".join(words[:lo]))]


def short_goldens(args, root):
    """The format of tests/data/reference/goldens (see its README.md), with the build recorded."""
    out_dir = args.out or os.path.join(root, "tests", "data", "reference", "goldens")
    text = open(os.path.join(root, "tests", "data", "reference", "goldens", "prompts.txt"), encoding="utf-8").read()
    prompts = [p for p in text.split("\n---\n")]
    prompts[-1] = prompts[-1].rstrip("\n")
    build = G.build_info()
    G.N_TOP = 8
    os.makedirs(out_dir, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(args.ref, "models", "*.gguf"))):
        name = os.path.basename(path)
        if args.filter not in name:
            continue
        r = TinyRunner(path, args.threads, n_ctx=1024)
        cases = []
        for text in prompts:
            toks = r.tokenize(text)
            steps = [{"id": s["id"], "logprob": s["logprob"], "top": s["top"]} for s in r.greedy(toks, N_STEPS)]
            cases.append({"prompt": text, "prompt_tokens": toks, "tokens": [s["id"] for s in steps], "steps": steps})
        doc = {"model": name, "model_sha256": G.sha256_of(path),
               "reference": "llama.cpp via llama.h, greedy, top-k log-probs of the full distribution",
               "build": build, "cases": cases}
        with open(os.path.join(out_dir, os.path.splitext(name)[0] + ".json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print("%-26s %d prompts" % (name, len(cases)), file=sys.stderr)
        L.llama_model_free(r.model)
    print("wrote", os.path.normpath(out_dir), file=sys.stderr)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, "..", ".."))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default=fixtures.ref())
    ap.add_argument("--out", default=None, help="default tests/data/tiny-long (--short: tests/data/reference/goldens)")
    ap.add_argument("--short", action="store_true", help="the short goldens of tests/data/reference/goldens")
    ap.add_argument("--filter", default="")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if args.short:
        return short_goldens(args, root)
    args.out = args.out or os.path.join(root, "tests", "data", "tiny-long")
    os.makedirs(args.out, exist_ok=True)
    build = G.build_info()
    for path in sorted(glob.glob(os.path.join(args.ref, "models", "*.gguf"))):
        name = os.path.basename(path)
        if args.filter not in name:
            continue
        r = TinyRunner(path, args.threads, n_ctx=1024)
        cases, runs = [], []
        for pname, text in prompts_for(r):
            toks = r.tokenize(text)
            runs.append((pname, text, toks, r.greedy(toks, N_STEPS)))
        child_args = argparse.Namespace(model=path, threads=args.threads, no_extra_bufts=False)
        child = [G.forced_in_child(child_args, env, [[t, [s["id"] for s in st]] for _, _, t, st in runs], threads)
                 for _, env, threads in ENV_VARIANTS]
        for ri, (pname, text, toks, steps) in enumerate(runs):
            ids = [s["id"] for s in steps]
            alts = [r.forced(toks, ids, **kw) for _, kw in VARIANTS] + [c[ri] for c in child]
            rows, spread = [], 0.0
            for i, s in enumerate(steps):
                d = max(abs(a[i][2] - s["logprob"]) for a in alts)
                spread = max(spread, d)
                rows.append([s["id"], s["logprob"], s["margin"], round(d, 6)] + [int(a[i][0]) for a in alts])
            cases.append({"name": pname, "prompt": text, "prompt_tokens": toks, "spread": round(spread, 6),
                          "tolerance": round(max(LOGPROB_TOL, spread), 6), "steps": rows})
            print("%-26s %-9s %3d tokens, min margin %.4f, spread %.4f" % (
                name, pname, len(toks), min(s["margin"] for s in steps), spread), file=sys.stderr)
        doc = {"model": name, "model_sha256": G.sha256_of(path), "n_ctx": r.n_ctx,
               "context_params": r.ctx_info, "build": build,
               "note": "steps[i] = [id, logprob, top-1/top-2 margin, spread, fa_off argmax, ubatch32 argmax, threads1 argmax, tiled_off argmax, tiled_off_threads1 argmax]: "
                       "llama.cpp defaults (flash attention auto, n_ubatch 512); spread = max |logprob of id| "
                       "difference to the variants (flash attention off; n_ubatch 32; one thread; GGML_CPU_TILED_MM=0; both) fed the same tokens",
               "cases": cases}
        out = os.path.join(args.out, os.path.splitext(name)[0] + ".json")
        with open(out, "w", encoding="utf-8") as f:
            f.write("{\n")
            for k in [k for k in doc if k != "cases"]:
                f.write("  %s: %s,\n" % (json.dumps(k), json.dumps(doc[k], ensure_ascii=False)))
            f.write('  "cases": [\n')
            for ci, c in enumerate(doc["cases"]):
                f.write("    %s%s\n" % (json.dumps(c, ensure_ascii=False), "," if ci + 1 < len(cases) else ""))
            f.write("  ]\n}\n")
        json.load(open(out, encoding="utf-8"))
        L.llama_model_free(r.model)
    print("wrote", os.path.normpath(args.out), file=sys.stderr)


if __name__ == "__main__":
    main()
