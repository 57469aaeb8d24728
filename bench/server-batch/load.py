#!/usr/bin/env python3
"""bench/server-batch/load.py — aggregate decode throughput and inter-token
latency of an OpenAI/llama-server-style HTTP server with K concurrent streams.

usage: load.py PORT LABEL STREAMS[,STREAMS...] N_PREDICT [REPS]

For each K in STREAMS, REPS times: K clients at once each stream POST
/completion {"prompt": <its own short prompt>, "n_predict": N, "ignore_eos":
true, "temperature": 0, "cache_prompt": false, "stream": true} (llama-server's
native route; edgellm serves the same one). Every `data:` event that is not
the final one is one token. Per run:
  aggregate tok/s = all streams' tokens / (last token - first stream's first token)
    (decode phase: the prompts are ~10 tokens, so prefill is in the first token)
  inter-token latency = gaps between a stream's consecutive events, all streams
Prints one JSON line per K: the best aggregate of the REPS runs and the
p50/p95 inter-token latency pooled over them.
"""
import http.client
import json
import sys
import threading
import time

PROMPTS = ["Once upon a time", "The capital of France is", "def main():", "In a hole in the ground",
           "The weather today", "My favourite recipe is", "Dear diary,", "The quick brown fox"]


def stream_one(port, prompt, n, out):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps({"prompt": prompt, "n_predict": n, "ignore_eos": True, "temperature": 0,
                       "cache_prompt": False, "stream": True})
    c.request("POST", "/completion", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    times = []
    buf = b""
    while True:
        chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            for line in ev.split(b"\n"):
                if not line.startswith(b"data:"):
                    continue
                d = line[5:].strip()
                if d == b"[DONE]":
                    continue
                j = json.loads(d)
                if j.get("stop"):
                    continue
                times.append(time.monotonic())
    c.close()
    out.append(times)


def pct(v, q):
    v = sorted(v)
    if not v:
        return float("nan")
    i = min(len(v) - 1, max(0, int(round(q * (len(v) - 1)))))
    return v[i]


def main():
    port, label, ks, n = int(sys.argv[1]), sys.argv[2], [int(x) for x in sys.argv[3].split(",")], int(sys.argv[4])
    reps = int(sys.argv[5]) if len(sys.argv) > 5 else 2
    stream_one(port, "warm up", 8, [])
    for k in ks:
        best, gaps, toks = 0.0, [], 0
        for _ in range(reps):
            outs = []
            ts = [threading.Thread(target=stream_one, args=(port, PROMPTS[i % len(PROMPTS)], n, outs)) for i in range(k)]
            [t.start() for t in ts]
            [t.join() for t in ts]
            total = sum(len(t) for t in outs)
            t0 = min(t[0] for t in outs if t)
            t1 = max(t[-1] for t in outs if t)
            agg = (total - 1) / (t1 - t0) if t1 > t0 else 0.0
            best = max(best, agg)
            toks = total
            for t in outs:
                gaps += [(b - a) * 1e3 for a, b in zip(t, t[1:])]
        print(json.dumps({"server": label, "streams": k, "n_predict": n, "tokens": toks, "agg_tok_s": round(best, 2),
                          "itl_p50_ms": round(pct(gaps, 0.5), 2), "itl_p95_ms": round(pct(gaps, 0.95), 2)}), flush=True)


if __name__ == "__main__":
    main()
