#!/usr/bin/env python3
"""`edgellm serve --parallel 4`: batched decoding across the slots (issue 14 item 4).

On the tiny llama and tiny gemma3 (sliding window) reference models, a
server with 4 slots (batched: the default) and one with `--no-batch`:
  - 4 different greedy requests run one by one, then the same 4 at once
    (streamed and not, of different lengths), give the same texts and token
    counts; the `--no-batch` server gives the same texts too;
  - /metrics shows rounds of more than one stream happened
    (edgellm_batch_multi_rounds_total grew, streams_total > rounds_total) and
    prompts went through in chunks of 16 (edgellm_batch_prefill_chunks_total
    above one per prompt; both servers run -b 16); the
    --no-batch server has no edgellm_batch_* lines;
  - cancellation mid-stream: while 3 streams decode together, a 4th client
    hangs up after a few chunks; the 3 still give their solo texts, the
    cancelled one is counted, the slots drain, and the next request on every
    slot (cache_prompt off) still gives its solo text;
  - `--batch-chunk 0` exits 2; both servers exit 0 on SIGINT with no
    sanitizer report.

Exit status: 0 all passed, 1 something failed, 77 skipped (no reference model).
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_server import metrics, post, cancelled_count, require_setup, Runner, SANITIZER_MARKERS, Server, sse_events  # noqa: E402

PROMPTS = [
    "Once upon a time",
    "The capital of France is a city that has been the centre of European art, politics and science for centuries, and",
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
    "In a hole in the ground there lived a hobbit. Not a nasty, dirty, wet hole, filled with the ends of worms",
]
MAX_TOK = [48, 32, 64, 40]


def complete(port, i, stream=False, max_tokens=None):
    body = {"model": "m", "prompt": PROMPTS[i], "max_tokens": max_tokens or MAX_TOK[i], "temperature": 0,
            "stream": stream}
    st, _, data = post(port, "/v1/completions", json.dumps(body).encode(), timeout=300)
    assert st == 200, "%d %s" % (st, data[:300])
    if stream:
        text = ""
        for ev in sse_events(data):
            if ev == "[DONE]":
                continue
            j = json.loads(ev)
            if j.get("choices"):
                text += j["choices"][0].get("text", "")
        return text, None
    j = json.loads(data)
    return j["choices"][0]["text"], j["usage"]["completion_tokens"]


def concurrently(port, stream):
    res = [None] * len(PROMPTS)
    errs = []

    def go(i):
        try:
            res[i] = complete(port, i, stream)
        except Exception as e:  # noqa: BLE001
            errs.append("%d: %s" % (i, e))
    ts = [threading.Thread(target=go, args=(i,)) for i in range(len(PROMPTS))]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert not errs, errs
    return res


def stream_and_hang_up(port, prompt, n_chunks):
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": 400, "temperature": 0, "stream": True}).encode()
    req = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body)) + body
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    try:
        s.sendall(req)
        buf = b""
        while buf.count(b"data: ") < n_chunks:
            data = s.recv(4096)
            if not data:
                break
            buf += data
        return buf.count(b"data: ")
    finally:
        import struct
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset: the server sees it at once
        s.close()


def drained(port, timeout=60):
    deadline = time.time() + timeout
    while True:
        m = metrics(port)
        if m.get("edgellm_slots_busy") == 0 and m.get("edgellm_queue_depth") == 0:
            return m
        assert time.time() < deadline, "slots did not drain: %r" % m.get("edgellm_slots_busy")
        time.sleep(0.1)


def model_case(r, cli, model, label):
    # prompts prefill in chunks of 16 (-b 16 on both, so --no-batch computes the same prefill batches)
    bat = Server(cli, model, "-c", "512", "-b", "16", "--parallel", "4", "--batch-chunk", "16").start()
    solo_srv = Server(cli, model, "-c", "512", "-b", "16", "--parallel", "4", "--no-batch").start()
    solo = {}

    def one_by_one():
        for stream in (False, True):
            solo[stream] = [complete(bat.port, i, stream) for i in range(len(PROMPTS))]
            for i, (t, n) in enumerate(solo[stream]):
                assert t, "empty output %d" % i
                if n is not None:
                    assert n == MAX_TOK[i], "prompt %d: %d tokens, asked %d" % (i, n, MAX_TOK[i])
        assert [t for t, _ in solo[True]] == [t for t, _ in solo[False]], "streamed text differs from non-streamed"
    r.run("%s: 4 requests one by one" % label, one_by_one)

    def together(stream):
        before = metrics(bat.port)
        got = concurrently(bat.port, stream)
        for i in range(len(PROMPTS)):
            assert got[i] == solo[stream][i], "prompt %d: together %r, alone %r" % (i, got[i], solo[stream][i])
        m = metrics(bat.port)
        rounds = m["edgellm_batch_rounds_total"] - before["edgellm_batch_rounds_total"]
        streams = m["edgellm_batch_streams_total"] - before["edgellm_batch_streams_total"]
        multi = m["edgellm_batch_multi_rounds_total"] - before["edgellm_batch_multi_rounds_total"]
        chunks = m["edgellm_batch_prefill_chunks_total"] - before["edgellm_batch_prefill_chunks_total"]
        print("     (%d rounds, %d streams, %d rounds of >1, %d prefill chunks, largest %d)"
              % (rounds, streams, multi, chunks, m["edgellm_batch_max_streams"]))
        assert multi > 0 and streams > rounds, "no round had more than one stream"
        assert streams >= sum(MAX_TOK) - len(PROMPTS), (streams, sum(MAX_TOK))
        assert chunks > len(PROMPTS), "prompts were not chunked: %d chunks" % chunks
    for stream in (False, True):
        r.run("%s: the same 4 at once (stream=%s) give the same texts, in rounds of >1 stream" % (label, stream),
              together, stream)

    def unbatched():
        got = concurrently(solo_srv.port, False)
        assert got == solo[False], (got, solo[False])
        m = metrics(solo_srv.port)
        assert not any(k.startswith("edgellm_batch_") for k in m), [k for k in m if k.startswith("edgellm_batch_")]
    r.run("%s: --no-batch gives the same texts, no batch metrics" % label, unbatched)

    def cancel_mid_stream():
        before = metrics(bat.port)
        res = [None] * 3
        errs = []

        def go(i):
            try:
                res[i] = complete(bat.port, i, False)
            except Exception as e:  # noqa: BLE001
                errs.append("%d: %s" % (i, e))
        ts = [threading.Thread(target=go, args=(i,)) for i in range(3)]
        [t.start() for t in ts]
        got_chunks = stream_and_hang_up(bat.port, PROMPTS[3], 6)
        [t.join() for t in ts]
        assert not errs, errs
        assert got_chunks >= 6, got_chunks
        for i in range(3):
            assert res[i] == solo[False][i], "prompt %d next to a cancelled stream: %r, alone %r" % (i, res[i], solo[False][i])
        m = drained(bat.port)
        assert cancelled_count(m) - cancelled_count(before) >= 1, "the hung-up stream was not cancelled"
        # every slot still answers as alone (4 at once: each slot takes one)
        got = concurrently(bat.port, False)
        assert got == solo[False], (got, solo[False])
    r.run("%s: a stream cancelled mid-round leaves the others and the slots intact" % label, cancel_mid_stream)

    def clean_exit(srv):
        code = srv.interrupt()
        assert code == 0, "exit %s" % code
        err = srv.stderr()
        assert not any(mk in err for mk in SANITIZER_MARKERS), err[-2000:]
        assert "batched decoding off" not in err, err[-500:]
    r.run("%s: batched server exits 0" % label, clean_exit, bat)
    r.run("%s: --no-batch server exits 0" % label, clean_exit, solo_srv)


def main():
    cli, model = require_setup("tiny-llama-Q8_0.gguf", need_openai=False)
    if cli is None:
        return model
    r = Runner()
    model_case(r, cli, model, "tiny-llama-Q8_0")
    gemma = os.path.join(os.path.dirname(model), "tiny-gemma3-Q8_0.gguf")
    if os.path.exists(gemma):
        model_case(r, cli, gemma, "tiny-gemma3-Q8_0")

    def bad_flags():
        for extra in (["--batch-chunk", "0"], ["--batch-wait-us", "-5"]):
            p = subprocess.run([cli, "serve", "-m", model, "--allow-unsigned", "--port", "0", *extra],
                               capture_output=True, text=True, timeout=60)
            assert p.returncode == 2 and p.stderr.strip(), (extra, p.returncode, p.stderr[-300:])
    r.run("bad batch flags exit 2", bad_flags)
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
