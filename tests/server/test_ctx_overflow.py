#!/usr/bin/env python3
"""End-to-end tests of `edgellm serve --ctx-overflow error|truncate` (issue 12, item 5).

Two servers on the tiny llama model from $EL_FIXTURE_DIR/reference/models
with a 128-token context: one with the default policy (error), one with
--ctx-overflow truncate (and --load hot, so the load strategies run under the
server too). Checks, over real HTTP:

  1. error (default): a chat that does not fit is 400 context_length_exceeded
     with n_prompt_tokens and n_ctx (llama-server's shape), also when
     max_tokens is left out;
  2. truncate: the same chat is answered; the reply says "truncated": true and
     "n_messages_dropped": K; K drops whole turns (the message after the
     system ones and the K dropped is a user message); the reply equals the
     error server's answer to the conversation with those K messages removed
     by hand (same content, same prompt_tokens) and dropping one turn fewer
     still does not fit (the error server refuses it) — the fewest turns are
     dropped; a chat that fits has no "truncated" field;
  3. stream: the finish chunk carries truncated / n_messages_dropped and the
     streamed text equals the non-streamed reply;
  4. the system messages + the last user turn alone do not fit: 400 with the
     numbers under truncate too; plain prompts (/v1/completions, /completion)
     are never truncated: 400 as before;
  5. hostile: --ctx-overflow bogus / empty / missing value exit 2 naming the
     flag; the servers stay healthy and exit 0 on SIGINT with no sanitizer
     report.

Exit status: 0 all passed, 1 something failed, 77 skipped (no reference model).
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_server import (SANITIZER_MARKERS, expect_error, post, request, require_setup, Runner, Server,  # noqa: E402
                         sse_events)

N_CTX = 128
SYSTEM = {"role": "system", "content": "You are brief."}
# five short turns, then a longer question: the whole chat needs more than 128 tokens
TURNS = [("Hello there, how are you doing today?", "I am fine, thank you for asking."),
         ("What is the weather like near the sea?", "It is windy and cold near the sea."),
         ("Do you like lighthouses on rocky islands?", "Yes, they are beautiful at night."),
         ("Tell me about boats and fishing nets.", "Boats carry nets to catch many fish."),
         ("Where do the seagulls sleep at night?", "They sleep on cliffs and quiet beaches.")]
LAST = "Now tell me a short story about a lighthouse keeper and his cat."


class Ctx:
    pass


def conversation():
    msgs = [SYSTEM]
    for u, a in TURNS:
        msgs += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
    msgs.append({"role": "user", "content": LAST})
    return msgs


def chat(port, msgs, **kw):
    body = dict({"messages": msgs, "max_tokens": 8, "temperature": 0}, **kw)
    return post(port, "/v1/chat/completions", body)


def ok_json(st, b, what):
    assert st == 200, "%s: status %d: %r" % (what, st, b[:400])
    return json.loads(b)


def t_error_default(ctx):
    msgs = conversation()
    st, _, b = chat(ctx.err.port, msgs)
    e = expect_error(st, b, 400, "error policy")
    assert e["code"] == "context_length_exceeded" and e["n_ctx"] == N_CTX, e
    # type: llama-server's (its clients test it); code: OpenAI's; the message names the context size
    assert e["type"] == "exceed_context_size_error" and "exceeds the available context size" in e["message"], e
    assert e["n_prompt_tokens"] + 8 > N_CTX, e
    ctx.n_full = e["n_prompt_tokens"]
    st, _, b = post(ctx.err.port, "/v1/chat/completions", {"messages": msgs * 2, "temperature": 0})
    e = expect_error(st, b, 400, "error policy, no max_tokens")
    assert e["code"] == "context_length_exceeded" and e["n_prompt_tokens"] >= N_CTX, e
    assert e["type"] == "exceed_context_size_error", e


def t_truncate(ctx):
    msgs = conversation()
    r = ok_json(*chat(ctx.tr.port, msgs)[::2], "truncate")
    assert r["truncated"] is True, r
    k = r["n_messages_dropped"]
    assert isinstance(k, int) and k > 0 and k % 2 == 0, k  # whole user+assistant turns here
    kept = [SYSTEM] + msgs[1 + k:]
    assert kept[1]["role"] == "user", kept[1]
    assert r["usage"]["prompt_tokens"] + 8 <= N_CTX < ctx.n_full + 8, (r["usage"], ctx.n_full)
    # the error server, given the kept messages by hand, answers the same
    ref = ok_json(*chat(ctx.err.port, kept)[::2], "kept by hand")
    assert "truncated" not in ref and "n_messages_dropped" not in ref, ref
    assert ref["choices"][0]["message"] == r["choices"][0]["message"], (ref["choices"], r["choices"])
    assert ref["usage"]["prompt_tokens"] == r["usage"]["prompt_tokens"], (ref["usage"], r["usage"])
    # one turn fewer dropped does not fit: the fewest turns were dropped
    st, _, b = chat(ctx.err.port, [SYSTEM] + msgs[1 + k - 2:])
    e = expect_error(st, b, 400, "one turn fewer dropped")
    assert e["code"] == "context_length_exceeded", e
    ctx.k, ctx.reply = k, r["choices"][0]["message"]["content"]


def t_fits_no_field(ctx):
    r = ok_json(*chat(ctx.tr.port, [SYSTEM, {"role": "user", "content": "Hi"}])[::2], "fits")
    assert "truncated" not in r and "n_messages_dropped" not in r, r


def t_no_system(ctx):
    msgs = conversation()[1:]
    r = ok_json(*chat(ctx.tr.port, msgs)[::2], "no system message")
    k = r["n_messages_dropped"]
    assert r["truncated"] is True and k % 2 == 0 and msgs[k]["role"] == "user", r
    ref = ok_json(*chat(ctx.err.port, msgs[k:])[::2], "no system, kept by hand")
    assert ref["choices"][0]["message"] == r["choices"][0]["message"]


def t_stream(ctx):
    st, _, b = chat(ctx.tr.port, conversation(), stream=True)
    assert st == 200, (st, b[:300])
    ev = sse_events(b)
    assert ev[-1] == "[DONE]", ev[-2:]
    chunks = [json.loads(e) for e in ev[:-1]]
    fin = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert len(fin) == 1 and fin[0]["truncated"] is True and fin[0]["n_messages_dropped"] == ctx.k, fin
    others = [c for c in chunks if c not in fin]
    assert all("truncated" not in c for c in others), others[:2]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == ctx.reply, (text, ctx.reply)


def t_last_turn_too_long(ctx):
    big = "word " * 200
    st, _, b = chat(ctx.tr.port, [SYSTEM, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                                  {"role": "user", "content": big}])
    e = expect_error(st, b, 400, "last turn alone too long")
    assert e["code"] == "context_length_exceeded" and e["n_ctx"] == N_CTX and e["n_prompt_tokens"] > N_CTX, e
    assert "last user turn" in e["message"], e
    # a single user message (nothing to drop)
    st, _, b = chat(ctx.tr.port, [{"role": "user", "content": big}])
    e = expect_error(st, b, 400, "one message")
    assert e["code"] == "context_length_exceeded", e
    # plain prompts are not conversations: never truncated
    st, _, b = post(ctx.tr.port, "/v1/completions", {"prompt": big, "max_tokens": 4})
    e = expect_error(st, b, 400, "/v1/completions")
    assert e["code"] == "context_length_exceeded", e
    st, _, b = post(ctx.tr.port, "/completion", {"prompt": big, "n_predict": 4})
    expect_error(st, b, 400, "/completion")


def t_bad_flag(ctx):
    for val in (["bogus"], [""], []):
        args = [ctx.cli, "serve", "-m", ctx.model, "--allow-unsigned", "--port", "0", "--ctx-overflow"] + val
        p = subprocess.run(args, capture_output=True, timeout=60)
        err = p.stderr.decode()
        assert p.returncode == 2 and "--ctx-overflow" in err, (val, p.returncode, err)
    p = subprocess.run([ctx.cli, "serve", "-m", ctx.model, "--allow-unsigned", "--port", "0", "--load", "bogus"],
                       capture_output=True, timeout=60)
    assert p.returncode == 2 and "--load" in p.stderr.decode(), (p.returncode, p.stderr)


def t_health(ctx):
    for s in (ctx.err, ctx.tr):
        st, _, b = request(s.port, "GET", "/health")
        assert st == 200, (st, b)


def main():
    cli, model = require_setup("tiny-llama-Q4_K_M.gguf", need_openai=False)
    if cli is None:
        return model
    ctx = Ctx()
    ctx.cli, ctx.model = cli, model
    R = Runner()
    ctx.err = Server(cli, model, "-c", str(N_CTX), "-t", "1")
    ctx.tr = Server(cli, model, "-c", str(N_CTX), "-t", "1", "--ctx-overflow", "truncate", "--load", "hot")
    try:
        if not (R.run("start server (default: error)", ctx.err.start) and
                R.run("start server --ctx-overflow truncate --load hot", ctx.tr.start)):
            return R.finish()
        for name, fn in [("error: 400 with n_prompt_tokens, n_ctx", t_error_default),
                         ("truncate: whole turns, fewest, same reply", t_truncate),
                         ("truncate: a chat that fits has no field", t_fits_no_field),
                         ("truncate: no system message", t_no_system),
                         ("truncate: stream's finish chunk says so", t_stream),
                         ("truncate: last turn alone too long: 400", t_last_turn_too_long),
                         ("--ctx-overflow / --load bogus: exit 2", t_bad_flag),
                         ("healthy at the end", t_health)]:
            R.run(name, fn, ctx)
        for s, name in ((ctx.err, "error"), (ctx.tr, "truncate")):
            def stop(s=s):
                assert s.interrupt() == 0, s.stderr()[-2000:]
                bad = [m for m in SANITIZER_MARKERS if m in s.stderr()]
                assert not bad, s.stderr()[-4000:]
            R.run("SIGINT %s server: exit 0, clean" % name, stop)
    finally:
        ctx.err.kill()
        ctx.tr.kill()
    return R.finish()


if __name__ == "__main__":
    sys.exit(main())
