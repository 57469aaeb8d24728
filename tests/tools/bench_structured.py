#!/usr/bin/env python3
"""Structured-output overhead on a real model (docs/STRUCTURED.md's table).

edgellm: `edgellm run --json` decode tokens/s with and without
`--json-schema` (and `--grammar` for a plain GBNF), greedy and with the
default sampler (temp 0.8, top-k 40, top-p 0.95, min-p 0.05) and OpenAI-style
sampling (temp 1, no top-k/top-p/min-p: rejection sampling); llama.cpp:
llama-cpp-python (its Llama.create_completion puts llama.cpp's grammar
sampler, llama_sampler_init_grammar, first in the chain, applied to the whole
vocabulary at every step) with and without LlamaGrammar.from_json_schema of
the same schema. Decode tokens/s = generated tokens / decode time (prefill
excluded; for llama.cpp the wall time of create_completion minus
llama_perf_context's prompt time, so sampling and the grammar count on both
sides). Runs are
interleaved, REPS each, and the median is printed.

usage: bench_structured.py EDGELLM_BIN MODEL.gguf [--llama-python PY] [--reps N] [--threads T]
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile

SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "city": {"type": "string"},
        },
        "required": ["name", "age", "city"],
        "additionalProperties": False,
    },
    "minItems": 6,
    "maxItems": 6,
}
PROMPT = "Here is a JSON array of 6 fictional people with their name, age and city:\n"
N = 200

LLAMA_SCRIPT = r'''
import json, sys, time
import llama_cpp
from llama_cpp import Llama, LlamaGrammar
model, schema, prompt, n, threads, mode, temp = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], float(sys.argv[7])
llm = Llama(model_path=model, n_ctx=1024, n_threads=threads, n_threads_batch=threads, verbose=False, seed=7)
g = LlamaGrammar.from_json_schema(schema, verbose=False) if mode.startswith("schema") else None
out = []
for rep in range(2):  # the first run (4 tokens) warms up
    llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
    llm.reset()
    kw = dict(max_tokens=n if rep else 4, temperature=temp, grammar=g, seed=7)
    if temp > 0 and mode.endswith("openai"): kw.update(top_k=0, top_p=1.0, min_p=0.0)
    t0 = time.perf_counter()
    r = llm.create_completion(prompt, **kw)
    wall = (time.perf_counter() - t0) * 1e3
    d = llama_cpp.llama_perf_context(llm._ctx.ctx)
    # decode time = the call's wall time minus the prompt's evaluation: sampling (and the grammar) included
    out.append({"n_eval": r["usage"]["completion_tokens"], "t_eval_ms": wall - d.t_p_eval_ms, "text": r["choices"][0]["text"]})
print(json.dumps(out[-1]))
'''


def run_edgellm(bin_, model, extra, temp, threads, openai_style):
    args = [bin_, "run", "-m", model, "--allow-unsigned", "-p", PROMPT, "-n", str(N), "--temp", str(temp), "--seed", "7",
            "-t", str(threads), "--json", *extra]
    if openai_style:
        args += ["--top-k", "0", "--top-p", "1", "--min-p", "0"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-500:])
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    done = lines[-1]
    text = "".join(bytes(x.get("bytes", [])).decode("utf-8", "replace") for x in lines[:-1])
    return done["n_generated"] / (done["decode_ms"] / 1e3), done["n_generated"], text


def run_llama(py, model, schema_path, temp, threads, mode):
    p = subprocess.run([py, "-c", LLAMA_SCRIPT, model, open(schema_path).read(), PROMPT, str(N), str(threads), mode, str(temp)],
                       capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-800:])
    d = json.loads(p.stdout.strip().splitlines()[-1])
    return d["n_eval"] / (d["t_eval_ms"] / 1e3), d["n_eval"], d["text"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("edgellm")
    ap.add_argument("model")
    ap.add_argument("--llama-python", default=None)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(SCHEMA, f)
        sp = f.name
    configs = []
    for label, temp, oai in (("greedy", 0.0, False), ("temp 0.8, top-k 40", 0.8, False), ("temp 1, no truncation", 1.0, True)):
        configs.append(("edgellm", label, "none", lambda t=temp, o=oai: run_edgellm(a.edgellm, a.model, ["--ignore-eos"], t, a.threads, o)))
        configs.append(("edgellm", label, "json schema",
                        lambda t=temp, o=oai: run_edgellm(a.edgellm, a.model, ["--json-schema", "@" + sp], t, a.threads, o)))
        if a.llama_python:
            m = "openai" if oai else ""
            configs.append(("llama.cpp", label, "none", lambda t=temp, m=m: run_llama(a.llama_python, a.model, sp, t, a.threads, "none" + m)))
            configs.append(("llama.cpp", label, "json schema",
                            lambda t=temp, m=m: run_llama(a.llama_python, a.model, sp, t, a.threads, "schema" + m)))
    res = {i: [] for i in range(len(configs))}
    info = {}
    for rep in range(a.reps):
        for i, (eng, label, cons, fn) in enumerate(configs):
            tps, n, text = fn()
            res[i].append(tps)
            info[i] = (n, text)
            print("  rep %d %-9s %-22s %-11s %6.1f tok/s (%d tokens)" % (rep, eng, label, cons, tps, n), file=sys.stderr)
    print("| engine | sampling | constraint | decode tok/s (median of %d) | tokens | overhead |" % a.reps)
    print("|---|---|---|---|---|---|")
    base = {}
    for i, (eng, label, cons, _) in enumerate(configs):
        med = statistics.median(res[i])
        if cons == "none":
            base[(eng, label)] = med
            ov = ""
        else:
            ov = "%+.1f %%" % ((base[(eng, label)] / med - 1) * 100)
        print("| %s | %s | %s | %.1f | %d | %s |" % (eng, label, cons, med, info[i][0], ov))
    for i, (eng, label, cons, _) in enumerate(configs):
        if cons != "none":
            try:
                json.loads(info[i][1])
                ok = "parses"
            except ValueError:
                ok = "DOES NOT PARSE"
            print("%s %s: output %s: %s" % (eng, label, ok, info[i][1][:100].replace("\n", "\\n")), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
