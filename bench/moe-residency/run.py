#!/usr/bin/env python3
"""MoE expert residency: decode speed and peak RSS at expert budgets, beside llama.cpp.

Contract: for one MoE GGUF (a model of tests/fixtures/synth_tiny.py's kind,
made bigger, or any qwen3moe/qwen2moe file) runs, alternating, `edgellm bench
--json -p P -n N -r 1 -t T --expert-budget B` for every budget B and a
llama.cpp decode of the same shape through the llama_cpp low-level API (in a
child process of the llama-cpp-python interpreter: P-token prompt, then N
one-token decodes, timed), REPS rounds; prints the median decode t/s, the
median peak RSS (edgellm: bench's peak_rss_bytes, taken before its bandwidth
probe; llama.cpp: the child's ru_maxrss, and its RSS before the model loads,
the interpreter's), and edgellm's decode hit rate and bytes faulted per
token, as a markdown table. Nothing is written; the machine's load is not
controlled: repeat and read medians.

usage: run.py MODEL [--edgellm build/edgellm] [--llama-python PY] [--budgets 100%,50%,25%]
              [-p 16] [-n 64] [-t 2] [--reps 5]
"""
import argparse, json, os, statistics, subprocess, sys

LLAMA_CHILD = r'''
import resource, sys, time
def rss():
    for l in open("/proc/self/status"):
        if l.startswith("VmRSS:"): return int(l.split()[1]) * 1024
import llama_cpp as L
path, P, N, T = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
base = rss()
L.llama_backend_init()
mp = L.llama_model_default_params()
model = L.llama_model_load_from_file(path.encode(), mp)
cp = L.llama_context_default_params()
cp.n_ctx = P + N + 8; cp.n_batch = cp.n_ubatch = max(P, 1)
cp.n_threads = cp.n_threads_batch = T
ctx = L.llama_init_from_model(model, cp)
nv = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
x, toks = 0x2545f4914f6cdd1d, []
for i in range(P + N):
    x ^= (x << 13) & 0xFFFFFFFFFFFFFFFF; x ^= x >> 7; x ^= (x << 17) & 0xFFFFFFFFFFFFFFFF
    toks.append(x % nv)
batch = L.llama_batch_init(max(P, 1), 0, 1)
def dec(ts, pos0):
    for i, t in enumerate(ts):
        batch.token[i] = t; batch.pos[i] = pos0 + i; batch.n_seq_id[i] = 1; batch.seq_id[i][0] = 0
        batch.logits[i] = 1 if i == len(ts) - 1 else 0
    batch.n_tokens = len(ts)
    assert L.llama_decode(ctx, batch) == 0
dec(toks[:P], 0)
t0 = time.perf_counter()
for i in range(N): dec([toks[P + i]], P + i)
dt = time.perf_counter() - t0
print(N / dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, base)
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--edgellm", default="build/edgellm")
    ap.add_argument("--llama-python", default=os.path.expanduser("~/.cache/edgellm/llama-cpp-python/bin/python"))
    ap.add_argument("--budgets", default="100%,50%,25%")
    ap.add_argument("-p", type=int, default=16)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    budgets = a.budgets.split(",")
    res = {b: [] for b in budgets}
    ll = []
    for r in range(a.reps):
        for b in budgets:
            out = subprocess.run([a.edgellm, "bench", "-m", a.model, "-p", str(a.p), "-n", str(a.n), "-r", "1",
                                  "-t", str(a.t), "--expert-budget", b, "--json"], capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"edgellm bench --expert-budget {b}: {out.stderr}")
            j = json.loads(out.stdout.splitlines()[0])
            e = j["experts"]
            res[b].append((j["tg_tps"], j["peak_rss_bytes"], e["decode_hit_rate"], e["decode_bytes_faulted_per_token"],
                           e["budget_bytes"], e["total_bytes"]))
        out = subprocess.run([a.llama_python, "-c", LLAMA_CHILD, a.model, str(a.p), str(a.n), str(a.t)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"llama.cpp: {out.stderr[-2000:]}")
        tps, peak, base = out.stdout.split()[-3:]
        ll.append((float(tps), int(peak), int(base)))
        print(f"round {r + 1}/{a.reps} done", file=sys.stderr)
    M = 1048576.0
    med = lambda xs: statistics.median(xs)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"CPU: {cpu}, {a.t} threads; {a.reps} rounds, medians; prompt {a.p}, decode {a.n} tokens")
    print("| runtime | expert budget | decode t/s (median) | peak RSS MiB (median) | decode hit rate | faulted MiB/token |")
    print("|---|---|---:|---:|---:|---:|")
    for b in budgets:
        rs = res[b]
        print(f"| edgellm | {b} ({rs[0][4] / M:.1f} of {rs[0][5] / M:.1f} MiB) | {med([x[0] for x in rs]):.2f} "
              f"({min(x[0] for x in rs):.2f}-{max(x[0] for x in rs):.2f}) | {med([x[1] for x in rs]) / M:.1f} | "
              f"{med([x[2] for x in rs]) * 100:.1f} % | {med([x[3] for x in rs]) / M:.2f} |")
    print(f"| llama.cpp | all (mmap) | {med([x[0] for x in ll]):.2f} ({min(x[0] for x in ll):.2f}-"
          f"{max(x[0] for x in ll):.2f}) | {med([x[1] for x in ll]) / M:.1f} (interpreter before load "
          f"{med([x[2] for x in ll]) / M:.1f}) | - | - |")


if __name__ == "__main__":
    main()
