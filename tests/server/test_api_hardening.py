#!/usr/bin/env python3
"""End-to-end checks of the hardened OpenAI-compatible API of `edgellm serve`.

Contract: starts the server binary ($EL_CLI_PATH) on the tiny llama model
from $EL_FIXTURE_DIR/reference/models, as
`serve --parallel 2 -c 512 -t 1`, and checks over real HTTP on loopback:

  1. memory: 64 concurrent 1 MiB requests (chat, completions, /tokenize)
     leave the server's peak RSS (VmHWM) at or under 300 MB; what the
     in-flight byte budget does not admit is answered 503 + Retry-After, the
     rest 200/400; afterwards the budget is whole again (a 1 MiB /tokenize
     is served). The RSS bound is not applied to sanitizer builds (shadow
     memory and quarantine are not the server's);
  2. NUL bytes: generated text with a <0x00> byte token is whole in the
     non-streamed reply (it equals the concatenated stream deltas) and
     /detokenize keeps the NUL, sent as \\u0000;
  3. /tokenize and /detokenize use the strict request parser: \\u0000,
     invalid UTF-8, trailing garbage and duplicate keys are 400 with an
     OpenAI error body;
  4. a reply cut by max_tokens in the middle of a character ends in one
     U+FFFD, streamed and not;
  5. logprobs/top_logprobs (chat), logprobs (completions) in OpenAI's shapes,
     streamed and not, also through the official `openai` client; logit_bias;
     echo; best_of/suffix/n that cannot be honoured are a 400 naming the
     field; /v1/completions without max_tokens generates 16 tokens.

Helpers (Server, request, post, Runner, ...) come from test_server.py.
Last line "N passed, N failed". Exit 0 all passed, 1 failed, 77 skipped (no
reference data or no `openai` package).
"""
import json
import math
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_server import (expect_error, post, request, require_setup, Runner, Server, sse_events)  # noqa: E402

MIB = 1 << 20
RSS_LIMIT_KB = 300 * 1024


class Ctx:
    pass


def vm_hwm_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM for pid %d" % pid)


def is_sanitized(cli):
    with open(cli, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"__tsan_init" in data


def post_json(port, path, body, timeout=120):
    st, h, b = post(port, path, body, timeout=timeout)
    assert st == 200, "%s: status %d: %r" % (path, st, b[:300])
    return json.loads(b)


def stream_json(port, path, body, timeout=120):
    st, h, b = post(port, path, dict(body, stream=True), timeout=timeout)
    assert st == 200, "%s stream: status %d: %r" % (path, st, b[:300])
    ev = sse_events(b)
    assert ev and ev[-1] == "[DONE]", ev[-3:]
    return [json.loads(e) for e in ev[:-1]]


def stream_text(chunks, chat=False):
    out = ""
    for c in chunks:
        for ch in c.get("choices") or []:
            out += (ch["delta"].get("content") or "") if chat else ch["text"]
    return out


# ---------------------------------------------------------------- 1. memory

def t_memory_burst(ctx):
    text = ("hello world " * 90000)[: MIB - 200]
    bodies = []
    for i in range(64):
        if i % 3 == 0:
            bodies.append(("/v1/chat/completions", {"messages": [{"role": "user", "content": text}], "max_tokens": 1}))
        elif i % 3 == 1:
            bodies.append(("/v1/completions", {"prompt": text, "max_tokens": 1}))
        else:
            bodies.append(("/tokenize", {"content": text}))
    data = [(p, json.dumps(b).encode()) for p, b in bodies]
    assert all(len(d) <= MIB for _, d in data)
    results = [None] * len(data)

    def go(i):
        try:
            results[i] = post(ctx.port, data[i][0], data[i][1], timeout=300)
        except Exception as e:  # noqa: BLE001 — reported below
            results[i] = e

    th = [threading.Thread(target=go, args=(i,)) for i in range(len(data))]
    for t in th:
        t.start()
    for t in th:
        t.join()
    hwm = vm_hwm_kb(ctx.srv.proc.pid)
    errors = [r for r in results if isinstance(r, Exception)]
    assert not errors, "connection errors: %r" % errors[:3]
    statuses = [r[0] for r in results]
    print("     64 x 1 MiB: statuses %s, peak RSS %.1f MB" %
          ({s: statuses.count(s) for s in set(statuses)}, hwm / 1024.0), flush=True)
    assert set(statuses) <= {200, 400, 503}, statuses
    assert any(s != 503 for s in statuses), "nothing was admitted"
    for st, h, b in results:
        if st == 503:
            e = expect_error(st, b, 503, "over budget")
            assert h.get("retry-after"), "503 without Retry-After: %r" % h
            assert e.get("code") == "server_busy", e
        elif st == 400:  # chat/completions: 1 MiB of prompt exceeds -c 512
            assert expect_error(st, b, 400, "too long").get("code") == "context_length_exceeded", b[:200]
    if not ctx.sanitized:
        assert hwm <= RSS_LIMIT_KB, "peak RSS %.1f MB > %d MB" % (hwm / 1024.0, RSS_LIMIT_KB // 1024)
    # the budget is whole again: a lone 1 MiB request is admitted
    st, _, b = post(ctx.port, "/tokenize", data[2][1], timeout=300)
    assert st == 200 and len(json.loads(b)["tokens"]) > 100000, (st, b[:200])


# ---------------------------------------------------------------- 2. NUL bytes

NUL_BODY = {"prompt": "<0x00> bytes", "max_tokens": 300, "temperature": 2.0, "seed": 22}


def t_nul_completion(ctx):
    j = post_json(ctx.port, "/v1/completions", NUL_BODY)
    text = j["choices"][0]["text"]
    streamed = stream_text(stream_json(ctx.port, "/v1/completions", NUL_BODY))
    assert "\x00" in text, "no NUL in the reply (%d characters)" % len(text)
    assert text == streamed, "non-stream (%d chars) != stream (%d chars)" % (len(text), len(streamed))
    assert len(text) > 1000, len(text)


def t_nul_chat(ctx):
    body = {"messages": [{"role": "user", "content": "<0x00> bytes"}], "max_tokens": 300, "temperature": 2.0,
            "seed": 23}  # a NUL comes about 2/3 of the way in
    text = post_json(ctx.port, "/v1/chat/completions", body)["choices"][0]["message"]["content"]
    streamed = stream_text(stream_json(ctx.port, "/v1/chat/completions", body), chat=True)
    assert "\x00" in text and len(text) > 1000, "no NUL in the reply (%d characters)" % len(text)
    assert text == streamed, "non-stream (%d chars) != stream (%d chars)" % (len(text), len(streamed))


def t_nul_detokenize(ctx):
    a = post_json(ctx.port, "/detokenize", {"tokens": [300]})["content"]
    c = post_json(ctx.port, "/detokenize", {"tokens": [301]})["content"]
    z = post_json(ctx.port, "/detokenize", {"tokens": [3]})["content"]
    assert z == "\x00", repr(z)
    got = post_json(ctx.port, "/detokenize", {"tokens": [300, 3, 301]})["content"]
    assert got == a + "\x00" + c, repr(got)


# ---------------------------------------------------------------- 3. strict /tokenize, /detokenize

def t_tokenize_strict(ctx):
    cases = [
        ("/tokenize", b'{"content":"ab\\u0000cd"}', "NUL escape"),
        ("/tokenize", b'{"content":"ab\xc3"}', "invalid UTF-8"),
        ("/tokenize", b'{"content":"ab"} garbage', "trailing garbage"),
        ("/tokenize", b'{"content":"ab","content":"cd"}', "duplicate key"),
        ("/tokenize", b'{"content":"a\x01b"}', "raw control character"),
        ("/tokenize", b'{"content":"ab"}\x00', "NUL byte"),
        ("/detokenize", b'{"tokens":[1,2]} x', "trailing garbage"),
        ("/detokenize", b'{"tokens":[1,2],"tokens":[3]}', "duplicate key"),
        ("/detokenize", b'{"tokens":[1,2],"x":"\xff"}', "invalid UTF-8"),
        ("/detokenize", b'{"tokens":[1.5]}', "fraction"),
        ("/detokenize", b'{"tokens":[999999]}', "out of vocabulary"),
    ]
    for path, body, what in cases:
        st, _, b = post(ctx.port, path, body)
        expect_error(st, b, 400, "%s %s" % (path, what))
    st, _, b = post(ctx.port, "/tokenize", b'\xef\xbb\xbf{"content":"ab cd","add_special":true}')
    assert st == 200 and json.loads(b)["tokens"], (st, b)


# ---------------------------------------------------------------- 4. UTF-8 tail

def t_utf8_tail(ctx):
    # seed 6: tokens 6 and 7 are the first two bytes of a 3- or 4-byte character
    body = {"prompt": "<0x00> bytes", "max_tokens": 7, "temperature": 2.0, "seed": 6}
    text = post_json(ctx.port, "/v1/completions", body)["choices"][0]["text"]
    chunks = stream_json(ctx.port, "/v1/completions", body)
    streamed = stream_text(chunks)
    assert text.endswith("\ufffd") and not text.endswith("\ufffd\ufffd"), repr(text[-8:])
    assert streamed == text, (repr(streamed[-8:]), repr(text[-8:]))
    # token 8 does not continue the character: the same one U+FFFD stands for it mid-text
    longer = post_json(ctx.port, "/v1/completions", dict(body, max_tokens=8))["choices"][0]["text"]
    assert longer.startswith(text) and len(longer) > len(text), (repr(longer[-8:]), repr(text[-8:]))


# ---------------------------------------------------------------- 5. logprobs and friends

def check_chat_entry(e, n_top):
    assert isinstance(e["token"], str) and isinstance(e["logprob"], float) and e["logprob"] <= 0, e
    assert isinstance(e["bytes"], list) and all(0 <= x < 256 for x in e["bytes"]), e
    if "\ufffd" not in e["token"]:
        assert bytes(e["bytes"]).decode("utf-8") == e["token"], e
    assert len(e["top_logprobs"]) == n_top, e
    lps = [t["logprob"] for t in e["top_logprobs"]]
    assert lps == sorted(lps, reverse=True), lps
    assert all(set(t) == {"token", "logprob", "bytes"} for t in e["top_logprobs"]), e


def t_chat_logprobs(ctx):
    body = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 6, "temperature": 0,
            "logprobs": True, "top_logprobs": 3}
    j = post_json(ctx.port, "/v1/chat/completions", body)
    lp = j["choices"][0]["logprobs"]
    assert isinstance(lp, dict) and isinstance(lp["content"], list), lp
    assert len(lp["content"]) == j["usage"]["completion_tokens"], (len(lp["content"]), j["usage"])
    for e in lp["content"]:
        check_chat_entry(e, 3)
        # greedy: the chosen token is the model's most likely one
        assert e["top_logprobs"][0]["token"] == e["token"], e
        assert abs(e["top_logprobs"][0]["logprob"] - e["logprob"]) < 1e-6, e
    assert "".join(e["token"] for e in lp["content"]) == j["choices"][0]["message"]["content"]
    # log-softmax over the whole vocabulary: the top-3 probabilities sum to at most 1
    assert sum(math.exp(t["logprob"]) for t in lp["content"][0]["top_logprobs"]) <= 1.0 + 1e-5
    # without logprobs: null
    j = post_json(ctx.port, "/v1/chat/completions", dict(body, logprobs=False, top_logprobs=None))
    assert j["choices"][0]["logprobs"] is None

    chunks = stream_json(ctx.port, "/v1/chat/completions", dict(body, stream_options={"include_usage": True}))
    entries = []
    # the first chunk is the role alone (logprobs null, as OpenAI's); every text
    # chunk carries its tokens' logprobs; tokens whose text never came (a cut
    # character) ride on the finish chunk
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}, chunks[0]
    assert chunks[0]["choices"][0]["logprobs"] is None, chunks[0]
    for c in chunks[1:]:
        for ch in c["choices"]:
            if ch["finish_reason"] is None:
                assert ch["logprobs"] is not None, c
            if ch["logprobs"] is not None:
                entries += ch["logprobs"]["content"]
    usage = chunks[-1]["usage"]
    assert len(entries) == usage["completion_tokens"], (len(entries), usage)
    assert [e["token"] for e in entries] == [e["token"] for e in lp["content"]]


def t_completion_logprobs(ctx):
    body = {"prompt": "Once upon a time", "max_tokens": 6, "temperature": 0, "logprobs": 2}
    j = post_json(ctx.port, "/v1/completions", body)
    ch = j["choices"][0]
    lp = ch["logprobs"]
    n = j["usage"]["completion_tokens"]
    assert set(lp) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}, lp
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"]) == n
    assert "".join(lp["tokens"]) == ch["text"], (lp["tokens"], ch["text"])
    off = 0
    for tok, tlp, top, o in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"], lp["text_offset"]):
        assert o == off, (o, off)
        off += len(tok)
        assert tlp <= 0 and isinstance(top, dict) and 1 <= len(top) <= 2, (tlp, top)
        assert abs(max(top.values()) - tlp) < 1e-6, (tlp, top)  # greedy
    chunks = stream_json(ctx.port, "/v1/completions", body)
    toks = []
    for c in chunks:
        for chh in c["choices"]:
            if chh["logprobs"]:
                toks += chh["logprobs"]["tokens"]
    assert toks == lp["tokens"], (toks, lp["tokens"])
    j0 = post_json(ctx.port, "/v1/completions", dict(body, logprobs=0))
    assert all(t == {} for t in j0["choices"][0]["logprobs"]["top_logprobs"]), j0
    assert j0["choices"][0]["logprobs"]["token_logprobs"] == lp["token_logprobs"]


def t_openai_client_logprobs(ctx):
    import openai
    r = ctx.client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                                           temperature=0, logprobs=True, top_logprobs=2)
    c = r.choices[0].logprobs.content
    assert len(c) == r.usage.completion_tokens and len(c[0].top_logprobs) == 2 and c[0].logprob <= 0, c
    r = ctx.client.completions.create(model="tiny", prompt="Hi", max_tokens=4, temperature=0, logprobs=1)
    assert len(r.choices[0].logprobs.token_logprobs) == r.usage.completion_tokens, r
    try:
        ctx.client.completions.create(model="tiny", prompt="Hi", max_tokens=4, best_of=2)
        raise AssertionError("best_of=2 accepted")
    except openai.BadRequestError as e:
        assert "best_of" in str(e), e


def t_logit_bias(ctx):
    piece = post_json(ctx.port, "/detokenize", {"tokens": [300]})["content"]
    body = {"prompt": "Once upon a time", "max_tokens": 5, "temperature": 0}
    j = post_json(ctx.port, "/v1/completions", dict(body, logit_bias={"300": 100}))
    assert j["choices"][0]["text"] == piece * 5, repr(j["choices"][0]["text"])
    base = post_json(ctx.port, "/v1/completions", dict(body, max_tokens=1, logprobs=0))
    first = base["choices"][0]["logprobs"]["tokens"][0]
    ids = post_json(ctx.port, "/tokenize", {"content": "Once upon a time" + first, "add_special": True})["tokens"]
    ids0 = post_json(ctx.port, "/tokenize", {"content": "Once upon a time", "add_special": True})["tokens"]
    if ids[:len(ids0)] == ids0 and len(ids) == len(ids0) + 1:
        banned = post_json(ctx.port, "/v1/completions", dict(body, max_tokens=1, logit_bias={str(ids[-1]): -100}))
        assert banned["choices"][0]["text"] != first, (first, banned)
    st, _, b = post(ctx.port, "/v1/completions", dict(body, logit_bias={"999999": 5}))
    assert expect_error(st, b, 400, "logit_bias out of vocabulary").get("param") == "logit_bias"


def t_echo(ctx):
    body = {"prompt": "Once upon a time", "max_tokens": 3, "temperature": 0}
    plain = post_json(ctx.port, "/v1/completions", body)["choices"][0]["text"]
    echoed = post_json(ctx.port, "/v1/completions", dict(body, echo=True))["choices"][0]["text"]
    assert echoed == "Once upon a time" + plain, (echoed, plain)
    chunks = stream_json(ctx.port, "/v1/completions", dict(body, echo=True))
    assert chunks[0]["choices"][0]["text"] == "Once upon a time", chunks[0]
    assert all(c["id"] == chunks[0]["id"] and c["id"] for c in chunks), [c["id"] for c in chunks]
    assert stream_text(chunks) == echoed


def t_unsupported_fields(ctx):
    for path, body, param in [
        ("/v1/completions", {"prompt": "a", "best_of": 2}, "best_of"),
        ("/v1/completions", {"prompt": "a", "suffix": "zz"}, "suffix"),
        ("/v1/completions", {"prompt": "a", "n": 2}, "n"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}], "n": 3}, "n"),
        ("/v1/completions", {"prompt": "a", "echo": True, "logprobs": 1}, "echo"),
        ("/v1/completions", {"prompt": "a", "logprobs": 6}, "logprobs"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}], "top_logprobs": 2}, "top_logprobs"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}], "logprobs": True,
                                  "top_logprobs": 21}, "top_logprobs"),
        # a text key is tokenized (llama-server's form); an empty one is refused
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}], "logit_bias": {"": 1}},
         "logit_bias"),
    ]:
        st, _, b = post(ctx.port, path, body)
        e = expect_error(st, b, 400, "%s %s" % (path, param))
        assert e.get("param") == param, (param, e)


def t_default_max_tokens(ctx):
    j = post_json(ctx.port, "/v1/completions", {"prompt": "Once upon a time", "temperature": 0, "logit_bias": {}})
    assert j["usage"]["completion_tokens"] == 16 or j["choices"][0]["finish_reason"] == "stop", j["usage"]
    assert j["usage"]["completion_tokens"] <= 16, j["usage"]
    # with EOS banned the default is reached exactly
    eos = 2
    j = post_json(ctx.port, "/v1/completions", {"prompt": "Once upon a time", "temperature": 0,
                                                "logit_bias": {str(eos): -100}})
    assert j["usage"]["completion_tokens"] == 16 and j["choices"][0]["finish_reason"] == "length", j


def t_health(ctx):
    st, _, b = request(ctx.port, "GET", "/health", timeout=10)
    assert st == 200, (st, b)


# ---------------------------------------------------------------- main

def main():
    cli, model = require_setup("tiny-llama-Q4_K_M.gguf")
    if cli is None:
        return model
    import openai
    ctx = Ctx()
    ctx.sanitized = is_sanitized(cli)
    R = Runner()
    srv = Server(cli, model, "--parallel", "2", "-c", "512", "-t", "1")
    ctx.srv = srv
    try:
        if not R.run("start server (--parallel 2 -c 512 -t 1)", srv.start):
            print("%d passed, %d failed" % (R.passed, R.failed))
            return 1
        ctx.port = srv.port
        ctx.client = openai.OpenAI(base_url=srv.base() + "/v1", api_key="x", max_retries=0, timeout=120)
        # the memory burst first, so the peak is its own
        R.run("64 x 1 MiB concurrent: peak RSS <= 300 MB, 503 + Retry-After", t_memory_burst, ctx)
        for name, fn in [("NUL byte: completion == stream, whole", t_nul_completion),
                         ("NUL byte: chat == stream", t_nul_chat),
                         ("NUL byte: /detokenize keeps it", t_nul_detokenize),
                         ("/tokenize, /detokenize: strict parser", t_tokenize_strict),
                         ("max_tokens mid-character: one U+FFFD", t_utf8_tail),
                         ("chat logprobs/top_logprobs (+ stream)", t_chat_logprobs),
                         ("completion logprobs (+ stream)", t_completion_logprobs),
                         ("openai client: logprobs, best_of 400", t_openai_client_logprobs),
                         ("logit_bias", t_logit_bias), ("echo (+ stream)", t_echo),
                         ("best_of/suffix/n/...: 400 naming the field", t_unsupported_fields),
                         ("completions default max_tokens 16", t_default_max_tokens)]:
            R.run(name, fn, ctx)
        R.run("healthy at the end", t_health, ctx)

        def shutdown():
            code = srv.interrupt()
            assert code == 0, "exit %r:\n%s" % (code, srv.stderr()[-2000:])
            for m in ("LeakSanitizer", "ERROR: AddressSanitizer", "runtime error:"):
                assert m not in srv.stderr(), srv.stderr()[-3000:]
        R.run("SIGINT: exit 0, no sanitizer report", shutdown)
    finally:
        srv.kill()
    return R.finish()


if __name__ == "__main__":
    sys.exit(main())
