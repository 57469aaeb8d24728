#!/usr/bin/env python3
"""Greedy goldens for the KV cache types (BF16, Q8_0, Q4_0), made by llama.cpp.

For each model (the reference tiny models and the real Gemma 3 270M Q4_K_M)
and each cache type T in bf16, q8_0, q4_0 (K and V both T; on tiny-qwen3 and
tiny-gemma3 also four K/V pairs of different types), llama.cpp runs
with flash attention on (required for a quantized V cache) and
type_k / type_v set; everything else is the bitlevel configuration of
gen_gemma_goldens.py (n_ctx 512, n_ubatch 512, GGML_CPU_TILED_MM=0: the
arithmetic edgellm reproduces). For such caches llama.cpp's CPU flash
attention always runs its one-row kernel (ggml_compute_forward_flash_attn_
ext_f16_one_chunk), at every batch size, which is what
src/backend/cpu/attention_typed.c follows.

Per step: the greedy token (argmax of llama_get_logits_ith, no sampler), its
log-probability, the top-1/top-2 margin, and the same for the F16 cache fed
the same path ("f16": [argmax, margin, logprob of id]) so the file also
records llama.cpp's own cost of the cache type.

Output (committed; read by tests/test_kv_types.c): tests/data/kv-types-goldens.json,
with the build recorded (llama-cpp-python version, system_info, CPU, and the
CMAKE_ARGS and sdist hash from the stamp scripts/make-goldens.sh leaves in its
venv, or EL_GOLDENS_BUILD).

usage: /work/scratch-fid/venv-avx512/bin/python tests/tools/gen_kv_goldens.py [--gemma PATH] [--ref DIR] [--out PATH]
"""
import argparse
import json
import os
import sys

os.environ.setdefault("GGML_CPU_TILED_MM", "0")  # read once by ggml: before the import

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_gemma_goldens as G  # noqa: E402  (Runner, build_info, write_doc, sha256_of)
import gemma_prompts  # noqa: E402

import numpy as np  # noqa: E402
import llama_cpp as L  # noqa: E402

TYPES = [("bf16", 30), ("q8_0", 8), ("q4_0", 2)]
IDS = {"f16": 1, "bf16": 30, "q8_0": 8, "q4_0": 2}
# K and V of different types (llama.cpp rotates K and V independently), on the
# tiny models with head size 64 (rotation) and a sliding window (gemma3).
MIXED_MODELS = ["tiny-qwen3-Q8_0.gguf", "tiny-gemma3-Q8_0.gguf"]
MIXED = [("q8_0", "f16"), ("f16", "q4_0"), ("q4_0", "q8_0"), ("bf16", "q8_0")]
TINY = ["tiny-llama-Q8_0.gguf", "tiny-gemma3-Q8_0.gguf", "tiny-qwen2-F16.gguf", "tiny-qwen3-Q8_0.gguf"]
TINY_PROMPTS = [("robot", "Once upon a time, there was a little robot who"),
                ("count", "1 + 1 = 2, 2 + 2 = 4, 3 + 3 =")]
N_STEPS_TINY = 16
N_STEPS_GEMMA = 32


class KVRunner(G.Runner):
    def __init__(self, model_path, n_threads, type_kv, type_v=None):
        super().__init__(model_path, n_threads, n_ctx=512)
        self.type_kv = type_kv
        self.type_v = type_kv if type_v is None else type_v

    def new_context(self, flash_attn_type=None, n_ubatch=None):
        cp = L.llama_context_default_params()
        cp.flash_attn_type = 1  # on
        cp.type_k = self.type_kv
        cp.type_v = self.type_v
        cp.n_ctx = self.n_ctx
        cp.n_batch = self.n_ctx
        cp.n_ubatch = min(self.n_ctx, 512)
        cp.n_threads = self.n_threads
        cp.n_threads_batch = self.n_threads
        self.ctx_info = {"flash_attn_type": 1, "type_k": int(cp.type_k), "type_v": int(cp.type_v),
                         "n_batch": int(cp.n_batch), "n_ubatch": int(cp.n_ubatch)}
        ctx = G.fn("llama_init_from_model", "llama_new_context_with_model")(self.model, cp)
        if not ctx:
            raise RuntimeError("llama.cpp could not create a context")
        return ctx


def venv_build():
    """What scripts/make-goldens.sh recorded in the venv that holds this llama_cpp (its stamp file:
    version|CMAKE_ARGS, then the sdist and its sha256), if that is where llama_cpp comes from."""
    stamp = os.path.join(sys.prefix, ".el-llama-cpp-python")
    try:
        lines = open(stamp, encoding="utf-8").read().splitlines()
    except OSError:
        return {}
    out = {"venv": sys.prefix, "built_by": "scripts/make-goldens.sh (pip install --no-binary llama-cpp-python, from the sdist)"}
    if lines and "|" in lines[0]:
        out["cmake_args"] = lines[0].split("|", 1)[1]
    if len(lines) > 1 and len(lines[1].split()) == 2:
        out["sdist"], out["sdist_sha256"] = lines[1].split()
    return out


def free_model(r):
    (L.llama_model_free if hasattr(L, "llama_model_free") else L.llama_free_model)(r.model)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gemma", default=os.environ.get("EL_GEMMA_MODEL") or G.default_model_path())
    ap.add_argument("--ref", default=os.path.join(here, "..", "..", "..", "shared", "reference", "models"))
    ap.add_argument("--out", default=os.path.join(here, "..", "data", "kv-types-goldens.json"))
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    jobs = [(os.path.join(args.ref, m), TINY_PROMPTS, N_STEPS_TINY) for m in TINY]
    jobs.append((args.gemma, [(p["name"], p["text"]) for p in gemma_prompts.PROMPTS[:3]], N_STEPS_GEMMA))
    cases, models, ctx_info = [], {}, None
    for path, prompts, n_steps in jobs:
        models[os.path.basename(path)] = G.sha256_of(path)
        f16 = KVRunner(path, args.threads, 1)
        combos = [(t, t) for t, _ in TYPES]
        if os.path.basename(path) in MIXED_MODELS:
            combos += MIXED
        for tk, tv in combos:
            tname = tk if tk == tv else tk + "/" + tv
            r = KVRunner(path, args.threads, IDS[tk], IDS[tv])
            for pname, text in prompts:
                toks = r.tokenize(text)
                steps = r.greedy(toks, n_steps)
                ctx_info = r.ctx_info
                ref = f16.forced(toks, [st["id"] for st in steps])
                for st, (fid, fmargin, flp) in zip(steps, ref):
                    st["f16"] = [fid, round(fmargin, 6), round(flp, 6)]
                    del st["top"]
                c = {"model": os.path.basename(path), "type": tname, "type_k": tk, "type_v": tv, "name": pname,
                     "prompt": text,
                     "prompt_tokens": toks,
                     "text": b"".join(r.piece(st["id"]) for st in steps).decode("utf-8", "replace"),
                     "steps": steps}
                cases.append(c)
                print("%-24s %-5s %-10s %3d tokens, min margin %.4f, max |lp - lp_f16| %.4f: %r" % (
                    c["model"], tname, pname, len(steps), min(st["margin"] for st in steps),
                    max(abs(st["logprob"] - st["f16"][2]) for st in steps), c["text"][:40]), file=sys.stderr)
            free_model(r)
        free_model(f16)

    doc = {
        "reference": "llama.cpp via llama-cpp-python low-level API: tokenize(add_special, parse_special), "
                     "llama_decode, argmax of llama_get_logits_ith; flash attention on, type_k = type_v = the "
                     "case's type; logprobs of the full distribution",
        "llama_cpp_python_version": L.__version__,
        "n_ctx": 512,
        "context_params": dict(ctx_info, type_k="per case", type_v="per case"),
        "models_sha256": models,
        "build": dict(G.build_info(), **venv_build(), n_threads=args.threads),
        "note": "steps[].f16 = [argmax, top-1/top-2 margin, logprob of steps[].id] of llama.cpp with an F16 cache "
                "fed the same tokens (flash attention on)",
    }
    G.write_doc(args.out, doc, cases, ("model", "type", "type_k", "type_v", "name", "prompt", "prompt_tokens", "text"))
    np.seterr(all="ignore")


if __name__ == "__main__":
    main()
