#!/usr/bin/env python3
"""End-to-end tests of edgellm's llama-server compatibility (issue 20, items 1-3, 6).

Starts `edgellm serve` ($EL_CLI_PATH) on the tiny llama model from
$EL_FIXTURE_DIR/reference/models and checks, over real HTTP:

  1. routes: /chat/completions, /completions, /models answer like their /v1
     twins (the openai client with a base URL without /v1 works); the
     embeddings routes answer 501; X-Api-Key works like Authorization: Bearer;
  2. native /completion: greedy content equals /v1/completions; token-id and
     mixed prompts equal the text prompt; stream == non-stream (content,
     tokens), no [DONE], no empty chunk; stop words (stop_type "word",
     stopping_word); ignore_eos and logit_bias (forced EOS / banned token);
     n_probs (top-N sorted, the greedy token first); logit_bias text keys
     (tokenized as llama-server; repeats add up); "verbose" (__verbose) and
     timings_per_token; llama-server's prefill (a final assistant message
     continued), add_generation_prompt / continue_final_message (400 where
     they ask for what edgellm does not do); return_tokens (they
     detokenize to the content); response_fields; timings;
     generation_settings; the fields edgellm cannot honour answer 400;
  3. /props, /slots (busy while a stream runs; 501 with --no-slots; /slots/N
     404 for a slot that does not exist), /apply-template,
     /v1/chat/completions/input_tokens (equals the chat's prompt_tokens),
     --alias, and --temp/--seed/--n-predict as request defaults; /props
     chat_template_engine (builtin for the template-less tiny model, jinja
     with --chat-template-file, whose rendering /apply-template returns);
  6. stream shape: the first chat chunk is the role alone (content null), no
     empty content mid-stream, the last delta {}; context overflow carries
     n_prompt_tokens and n_ctx next to OpenAI's code; an error inside a
     /completion stream (the server stopping) has llama-server's shape;
  hostile input: malformed, wrong types, huge, out-of-vocabulary ids, slot
     ids that do not exist, concurrent mixed traffic; the server stays
     healthy and exits 0 on SIGINT with no sanitizer report.

Exit status: 0 all passed, 1 something failed, 77 skipped (no reference model
or no `openai` package).
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
from test_server import (expect_error, post, request, require_setup, Runner, Server, sse_events)  # noqa: E402

PROMPT = "Once upon a time"


class Ctx:
    pass


def post_json(port, path, body, headers=None, timeout=120):
    st, _, b = post(port, path, body, headers=headers, timeout=timeout)
    assert st == 200, "%s: status %d: %r" % (path, st, b[:400])
    return json.loads(b)


def native(ctx, **body):
    body.setdefault("prompt", PROMPT)
    return post_json(ctx.port, "/completion", body)


def native_stream(ctx, **body):
    body.setdefault("prompt", PROMPT)
    body["stream"] = True
    st, h, b = post(ctx.port, "/completion", body)
    assert st == 200, "stream: %d %r" % (st, b[:300])
    assert h.get("content-type", "").startswith("text/event-stream"), h
    ev = sse_events(b)
    assert ev, b[:300]
    assert "[DONE]" not in ev, "a /completion stream ends without [DONE] (llama-server's shape)"
    return [json.loads(e) for e in ev]


def tokenize(ctx, text, add_special=True, parse_special=True):
    return post_json(ctx.port, "/tokenize", {"content": text, "add_special": add_special,
                                             "parse_special": parse_special})["tokens"]


# ---------------------------------------------------------------- 1. routes, keys

def t_routes_without_v1(ctx):
    msgs = [{"role": "user", "content": "Say hello."}]
    a = post_json(ctx.port, "/v1/chat/completions", {"messages": msgs, "max_tokens": 6, "temperature": 0})
    b = post_json(ctx.port, "/chat/completions", {"messages": msgs, "max_tokens": 6, "temperature": 0})
    assert a["choices"][0]["message"] == b["choices"][0]["message"], (a, b)
    assert b["object"] == "chat.completion"
    # /completions is llama-server's native /completion (its server.cpp routes both to one handler),
    # not a twin of /v1/completions
    a = post_json(ctx.port, "/v1/completions", {"prompt": PROMPT, "max_tokens": 6, "temperature": 0})
    b = post_json(ctx.port, "/completions", {"prompt": PROMPT, "n_predict": 6, "temperature": 0})
    c = post_json(ctx.port, "/completion", {"prompt": PROMPT, "n_predict": 6, "temperature": 0})
    assert a["choices"][0]["text"] == b["content"] == c["content"] and "object" not in b, (a, b)
    assert b["stop_type"] == c["stop_type"] and b["tokens_predicted"] == c["tokens_predicted"] == 6, (b, c)
    for path in ("/models", "/v1/models"):
        st, _, body = request(ctx.port, "GET", path)
        assert st == 200, (path, st)
        ids = [m["id"] for m in json.loads(body)["data"]]
        assert ids == ["tiny-alias"], (path, ids)
        aliases = json.loads(body)["data"][0]["aliases"]  # --alias A,B: the first is the id, all listed
        assert aliases == ["tiny-alias", "tiny-second"], (path, aliases)
    for path in ("/v1/embeddings", "/embeddings", "/embedding"):
        st, _, body = post(ctx.port, path, {"input": "hello", "model": "x"})
        expect_error(st, body, 501, path)
    st, _, body = request(ctx.port, "GET", "/v1/health")
    assert st == 200 and json.loads(body)["status"] == "ok", (st, body)


def t_openai_client_no_v1(ctx):
    import openai
    cl = openai.OpenAI(base_url="http://127.0.0.1:%d" % ctx.port, api_key="x", max_retries=0, timeout=120)
    r = cl.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                                   temperature=0)
    assert r.model == "tiny-alias" and isinstance(r.choices[0].message.content, str), r
    chunks = list(cl.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}],
                                             max_tokens=4, temperature=0, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content is None
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == r.choices[0].message.content, (text, r.choices[0].message.content)


JINJA_FILE = ("{%- if greet is defined %}{{ greet }}{% endif %}{%- for m in messages %}<<{{ m.role }}>>{{ m.content | trim }}{% if not loop.last %}|{% endif %}"
              "{%- endfor %}{% if add_generation_prompt %}<<assistant>>{% endif %}{% if tail is defined %}{{ tail }}{% endif %}")
# the key server's --chat-template-kwargs: every chat's template variables, under the request's own
SERVER_KWARGS = '{"greet": "D:", "tail": "!"}'


def t_chat_template_file(ctx):
    """serve --chat-template-file: the Jinja file renders chats (/props says so)."""
    h = {"X-Api-Key": "secret"}
    st, _, b = request(ctx.key_srv.port, "GET", "/props", headers=h)
    p = json.loads(b)
    assert p["chat_template_engine"] == "jinja" and "--chat-template-file" in p["chat_template_source"], p
    msgs = [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi"}]
    # --chat-template-kwargs (llama-server's): the server's template variables for every chat
    r = post_json(ctx.key_srv.port, "/apply-template", {"messages": msgs}, headers=h)
    assert r["prompt"] == "D:<<system>>Be brief.|<<user>>Hi<<assistant>>!", r
    # llama-server's chat_template_kwargs become template variables, over the server's; not an object: 400
    r = post_json(ctx.key_srv.port, "/apply-template", {"messages": msgs, "chat_template_kwargs": {"greet": "G:"}}, headers=h)
    assert r["prompt"] == "G:<<system>>Be brief.|<<user>>Hi<<assistant>>!", r
    st, _, b = post(ctx.key_srv.port, "/apply-template", {"messages": msgs, "chat_template_kwargs": [1]}, headers=h)
    expect_error(st, b, 400, "chat_template_kwargs [1]")
    # the merged variables reach generation too: the chat's prompt is the rendered one
    n = post_json(ctx.key_srv.port, "/v1/chat/completions/input_tokens", {"messages": msgs}, headers=h)["input_tokens"]
    toks = post_json(ctx.key_srv.port, "/tokenize", {"content": "D:<<system>>Be brief.|<<user>>Hi<<assistant>>!",
                                                     "add_special": True}, headers=h)["tokens"]
    assert n == len(toks), (n, len(toks))
    # /apply-template's add_generation_prompt (llama-server's): false leaves the assistant's opening out
    r = post_json(ctx.key_srv.port, "/apply-template", {"messages": msgs, "add_generation_prompt": False}, headers=h)
    assert r["prompt"] == "D:<<system>>Be brief.|<<user>>Hi!", r
    r = post_json(ctx.key_srv.port, "/apply-template", {"messages": msgs, "add_generation_prompt": True}, headers=h)
    assert r["prompt"] == "D:<<system>>Be brief.|<<user>>Hi<<assistant>>!", r
    for bad in ("no", 1, [True]):
        st, _, b = post(ctx.key_srv.port, "/apply-template", {"messages": msgs, "add_generation_prompt": bad}, headers=h)
        assert "add_generation_prompt" in expect_error(st, b, 400, "add_generation_prompt %r" % (bad,))["message"]


def t_no_ui(ctx):
    """--no-ui (llama-server's): GET / answers 404; without it the page, with llama-server's doctype."""
    st, _, b = request(ctx.key_srv.port, "GET", "/", headers={"X-Api-Key": "secret"})
    expect_error(st, b, 404, "GET / with --no-ui")
    st, _, b = request(ctx.port, "GET", "/")
    assert st == 200 and b.startswith(b"<!doctype html>"), (st, b[:40])


def t_bad_server_kwargs(ctx):
    """--chat-template-kwargs that is not a JSON object: serve refuses to start, naming the flag."""
    for bad in ("[1]", "{", "7"):
        p = subprocess.run([ctx.cli, "serve", "-m", ctx.model, "--allow-unsigned", "--port", "0",
                            "--chat-template-kwargs", bad], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        err = p.stderr.decode("utf-8", "replace")
        assert p.returncode != 0 and "--chat-template-kwargs" in err, (bad, p.returncode, err[-400:])


def t_x_api_key(ctx):
    p = ctx.key_srv.port
    body = {"prompt": PROMPT, "n_predict": 2}
    st, _, b = post(p, "/completion", body)
    expect_error(st, b, 401, "no key")
    st, _, b = post(p, "/completion", body, headers={"X-Api-Key": "wrong"})
    expect_error(st, b, 401, "wrong X-Api-Key")
    st, _, b = post(p, "/completion", body, headers={"X-Api-Key": "secret"})
    assert st == 200, (st, b[:200])
    st, _, b = post(p, "/completion", body, headers={"Authorization": "Bearer secret"})
    assert st == 200, (st, b[:200])
    # a wrong Bearer is not rescued by a right X-Api-Key: Authorization, when sent, is the one checked
    st, _, b = post(p, "/completion", body, headers={"Authorization": "Bearer nope", "X-Api-Key": "secret"})
    expect_error(st, b, 401, "wrong Bearer + right X-Api-Key")
    st, _, b = request(p, "GET", "/props", headers={"X-Api-Key": "secret"})
    assert st == 200, st
    st, _, b = request(p, "GET", "/slots")
    expect_error(st, b, 401, "/slots without a key")
    # llama-server's public endpoints answer without the key (/health, /v1/health, the page at /);
    # everything else still wants it, models and props included
    for path in ("/health", "/v1/health"):
        st, _, b = request(p, "GET", path)
        assert st == 200, (path, st, b[:200])
    st, _, b = request(p, "GET", "/")  # public, and off on this server (--no-ui): 404, not 401
    assert st == 404, ("/", st, b[:200])
    for path in ("/v1/models", "/models", "/props", "/metrics", "/slots", "/lora-adapters"):
        st, _, b = request(p, "GET", path)
        expect_error(st, b, 401, path + " without a key")
        st, _, b = request(p, "GET", path, headers={"Authorization": "Bearer secrex"})
        expect_error(st, b, 401, path + " with a wrong key")
    for path in ("/tokenize", "/apply-template", "/v1/chat/completions"):
        st, _, b = post(p, path, {"content": "x", "messages": [{"role": "user", "content": "x"}]})
        expect_error(st, b, 401, path + " without a key")
    # the key is not taken from a query string, nor from a public path's look-alike
    for path in ("/health/../props", "/props?api_key=secret", "/v1/health/x", "//props"):
        st, _, b = request(p, "GET", path)
        assert st in (401, 404), (path, st)
    # the seed of /props default_generation_settings is the server's --seed (the main server has --seed 7)
    st, _, b = request(ctx.port, "GET", "/props")
    assert st == 200 and json.loads(b)["default_generation_settings"]["params"]["seed"] == 7, b[:300]
    # (spaces around a header value are not part of it, in HTTP: " secret" is "secret")
    for v in ("", "secre", "secretsecret", "Bearer secret", "SECRET", "s" * 8000):
        st, _, b = post(p, "/completion", body, headers={"X-Api-Key": v})
        assert st in (401, 431), (v[:20], st)  # an 8000-byte header may be refused as too large
    st, _, b = post(p, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
                    headers={"X-Api-Key": "secret"})
    assert st == 200, (st, b[:200])


# ---------------------------------------------------------------- 2. /completion

def t_native_matches_openai(ctx):
    n = native(ctx, n_predict=8, temperature=0)
    o = post_json(ctx.port, "/v1/completions", {"prompt": PROMPT, "max_tokens": 8, "temperature": 0})
    # /completion parses control-token text (llama-server does); PROMPT has none, so the tokens are the same
    assert n["content"] == o["choices"][0]["text"], (n["content"], o["choices"][0]["text"])
    assert n["stop"] is True and n["model"] == "tiny-alias" and n["id_slot"] in (0, 1), n
    assert n["tokens"] == [], "tokens without return_tokens: %r" % n["tokens"]
    assert n["tokens_predicted"] == 8 and n["stop_type"] == "limit" and n["truncated"] is False, n
    assert n["tokens_evaluated"] == o["usage"]["prompt_tokens"], (n["tokens_evaluated"], o["usage"])
    t = n["timings"]
    for k in ("prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n",
              "predicted_ms", "predicted_per_token_ms", "predicted_per_second", "cache_n"):
        assert isinstance(t.get(k), (int, float)), (k, t)
    # prompt_n: the prompt tokens evaluated; cache_n: those reused from the slot's cache (cache_prompt)
    assert t["predicted_n"] == 8 and t["prompt_n"] + t["cache_n"] == n["tokens_evaluated"] and \
        t["predicted_per_second"] > 0, t
    g = n["generation_settings"]
    assert g["n_predict"] == 8 and g["temperature"] == 0 and g["top_k"] == 40 and g["n_ctx"] == ctx.n_ctx, g
    assert g["model"] == "tiny-alias" and g["cache_prompt"] is True, g
    assert n["prompt"].endswith(PROMPT), n["prompt"]
    assert "completion_probabilities" not in n, "probabilities without n_probs"


def t_native_token_prompts(ctx):
    ids = tokenize(ctx, PROMPT)
    text = native(ctx, n_predict=6, temperature=0)
    by_ids = native(ctx, prompt=ids, n_predict=6, temperature=0)
    assert by_ids["content"] == text["content"] and by_ids["tokens_evaluated"] == len(ids), (by_ids, text)
    nested = native(ctx, prompt=[ids], n_predict=6, temperature=0)
    assert nested["content"] == text["content"], nested
    # mixed: the BOS id, then text (a text part that is not first gets no BOS of its own)
    mixed = native(ctx, prompt=[ids[0], PROMPT], n_predict=6, temperature=0)
    assert mixed["content"] == text["content"] and mixed["tokens_evaluated"] == len(ids), (mixed, ids)
    # without the BOS the model sees something else: the count tells
    no_bos = native(ctx, prompt=ids[1:], n_predict=2, temperature=0)
    assert no_bos["tokens_evaluated"] == len(ids) - 1, no_bos


def t_native_stream(ctx):
    whole = native(ctx, n_predict=12, temperature=0, return_tokens=True)
    chunks = native_stream(ctx, n_predict=12, temperature=0)
    body, last = chunks[:-1], chunks[-1]
    assert last["stop"] is True and last["stop_type"] == "limit" and "timings" in last, last
    assert all(c["stop"] is False for c in body), body
    assert all(c["content"] != "" for c in body), "an empty chunk mid-stream: %r" % body
    assert "".join(c["content"] for c in chunks) == whole["content"], (chunks, whole["content"])
    toks = [t for c in chunks for t in c["tokens"]]
    assert toks == whole["tokens"] and len(toks) == 12, (toks, whole["tokens"])
    assert last["tokens_predicted"] == 12


def t_return_tokens(ctx):
    r = native(ctx, n_predict=10, temperature=0, return_tokens=True)
    assert len(r["tokens"]) == r["tokens_predicted"] == 10, r
    d = post_json(ctx.port, "/detokenize", {"tokens": r["tokens"]})["content"]
    assert d == r["content"], (d, r["content"])


def t_stop_word(ctx):
    base = native(ctx, n_predict=16, temperature=0)["content"]
    # a 3-character ASCII stop string from the middle of the greedy text
    starts = [i for i in range(1, len(base) - 2) if all(" " < ch < "\x7f" for ch in base[i:i + 3])]
    assert starts, base
    word = base[starts[0]:starts[0] + 3]
    r = native(ctx, n_predict=16, temperature=0, stop=["zzzqqq", word])
    assert r["stop_type"] == "word" and r["stopping_word"] == word, r
    assert r["content"] == base[:base.index(word)], (r["content"], base, word)
    s = native_stream(ctx, n_predict=16, temperature=0, stop=[word])
    assert "".join(c["content"] for c in s) == r["content"] and s[-1]["stopping_word"] == word, s[-1]


def t_ignore_eos_logit_bias(ctx):
    eos = tokenize(ctx, "</s>", add_special=False)
    assert len(eos) == 1, eos
    forced = native(ctx, n_predict=5, temperature=0, logit_bias=[[eos[0], 100]])
    assert forced["stop_type"] == "eos" and forced["tokens_predicted"] == 0 and forced["content"] == "", forced
    kept = native(ctx, n_predict=5, temperature=0, logit_bias=[[eos[0], 100]], ignore_eos=True)
    assert kept["tokens_predicted"] == 5 and kept["stop_type"] == "limit", kept
    assert kept["generation_settings"]["ignore_eos"] is True
    # generation_settings.logit_bias in llama-server's shape: the request's bias, and with ignore_eos
    # every end-of-generation token banned (bias null, llama-server's -inf)
    assert forced["generation_settings"]["logit_bias"] == [{"bias": 100, "token": eos[0]}], forced
    assert {"bias": None, "token": eos[0]} in kept["generation_settings"]["logit_bias"], kept["generation_settings"]
    # false bans a token: the greedy first token never comes
    first = native(ctx, n_predict=1, temperature=0, return_tokens=True)["tokens"][0]
    banned = native(ctx, n_predict=1, temperature=0, return_tokens=True, logit_bias=[[first, False]])
    assert banned["tokens"][0] != first, (first, banned)
    obj = native(ctx, n_predict=1, temperature=0, return_tokens=True, logit_bias={str(first): -100})
    assert obj["tokens"][0] != first, obj


def t_logit_bias_text(ctx):
    # llama-server's text keys: the text is tokenized (no special tokens) and every token of it gets the bias
    base = native(ctx, n_predict=8, temperature=0, return_tokens=True)["tokens"]
    word = post_json(ctx.port, "/detokenize", {"tokens": base[:1]})["content"]
    ids = tokenize(ctx, word, add_special=False, parse_special=False)
    assert ids, word
    by_text = native(ctx, n_predict=8, temperature=0, return_tokens=True, logit_bias=[[word, False]])["tokens"]
    by_ids = native(ctx, n_predict=8, temperature=0, return_tokens=True, logit_bias=[[i, False] for i in ids])["tokens"]
    assert by_text == by_ids and not set(ids) & set(by_text), (word, ids, by_text, by_ids)
    # OpenAI's object form: a key that is not a token id is text; -100 each, as by id
    obj = post_json(ctx.port, "/v1/completions", {"prompt": PROMPT, "max_tokens": 8, "temperature": 0,
                                                  "logit_bias": {word: -100}})["choices"][0]["text"]
    obj_ids = post_json(ctx.port, "/v1/completions", {"prompt": PROMPT, "max_tokens": 8, "temperature": 0,
                                                      "logit_bias": {str(i): -100 for i in ids}})["choices"][0]["text"]
    assert obj == obj_ids, (obj, obj_ids)
    # an id given twice adds up (llama.cpp's bias sampler applies each entry): -60 twice bans it as -120 does
    twice = native(ctx, n_predict=1, temperature=0, return_tokens=True, logit_bias=[[base[0], -60], [base[0], -60]])
    once = native(ctx, n_predict=1, temperature=0, return_tokens=True, logit_bias=[[base[0], -120]])
    assert twice["tokens"] == once["tokens"] and twice["tokens"][0] != base[0], (twice, once)
    for lb, what in (([["", 1]], "text key"), ([[{}, 1]], "nor a text"), ([["x" * 257, 1]], "1..256 bytes"),
                     ({"": 1}, "text key"), ({"99999999999": 1}, "not a token id")):
        st, _, b = post(ctx.port, "/completion", {"prompt": PROMPT, "n_predict": 1, "logit_bias": lb})
        e = expect_error(st, b, 400, "logit_bias %r" % (lb,))
        assert e.get("param") == "logit_bias" and what in e["message"], e


def t_verbose_timings(ctx):
    msgs = [{"role": "system", "content": "Book"}, {"role": "user", "content": "What is the best book"}]
    body = {"messages": msgs, "max_tokens": 3, "temperature": 0}
    r = post_json(ctx.port, "/v1/chat/completions", dict(body, verbose=True))
    v = r["__verbose"]
    rendered = post_json(ctx.port, "/apply-template", {"messages": msgs})["prompt"]
    # llama-server's: the prompt's tokens as text (the BOS piece first), the content, the counts
    assert v["prompt"].endswith(rendered) and len(v["prompt"]) > len(rendered), (v["prompt"], rendered)
    assert v["content"] == r["choices"][0]["message"]["content"], (v, r)
    assert v["tokens_evaluated"] == r["usage"]["prompt_tokens"] and v["tokens_predicted"] == r["usage"]["completion_tokens"], v
    assert v["stop_type"] in ("limit", "eos") and "generation_settings" in v, v
    for extra in ({}, {"verbose": False}):
        r = post_json(ctx.port, "/v1/chat/completions", dict(body, **extra))
        assert "__verbose" not in r and "timings" not in r, r
    c = post_json(ctx.port, "/v1/completions", {"prompt": PROMPT, "max_tokens": 2, "temperature": 0, "verbose": True})
    assert c["__verbose"]["content"] == c["choices"][0]["text"] and c["__verbose"]["prompt"].endswith(PROMPT), c
    # timings_per_token: the final chunks carry llama-server's timings, the first does not
    st, _, b = post(ctx.port, "/v1/chat/completions", dict(body, stream=True, timings_per_token=True,
                                                            stream_options={"include_usage": True}))
    assert st == 200, st
    chunks = [json.loads(e) for e in sse_events(b) if e != "[DONE]"]
    assert "timings" not in chunks[0], chunks[0]
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["timings"]["predicted_n"] == usage["usage"]["completion_tokens"], usage
    t = usage["timings"]
    assert t["prompt_n"] + t["cache_n"] == usage["usage"]["prompt_tokens"] and t["predicted_ms"] >= 0, t
    assert chunks[-2]["choices"][0]["finish_reason"] and "timings" in chunks[-2], chunks[-2]
    assert "timings" in post_json(ctx.port, "/v1/chat/completions", dict(body, timings_per_token=True))


def t_continuation_fields(ctx):
    # llama-server's prefill: a final assistant message is continued, not closed (the messages before it
    # with the generation prompt, then its text) — in /apply-template, the chat's prompt and its count
    hi = [{"role": "user", "content": "Hi"}]
    msgs = hi + [{"role": "assistant", "content": "Hello"}]
    gp = post_json(ctx.port, "/apply-template", {"messages": hi})["prompt"]
    for body in ({"messages": msgs}, {"messages": msgs, "add_generation_prompt": False}):
        assert post_json(ctx.port, "/apply-template", body)["prompt"] == gp + "Hello", (body, gp)
    n = post_json(ctx.port, "/v1/chat/completions/input_tokens", {"messages": msgs})["input_tokens"]
    for extra in ({}, {"continue_final_message": True, "add_generation_prompt": False}, {"continue_final_message": True}):
        r = post_json(ctx.port, "/v1/chat/completions", dict({"messages": msgs, "max_tokens": 1, "temperature": 0,
                                                              "verbose": True}, **extra))
        assert r["__verbose"]["prompt"].endswith(gp + "Hello") and r["usage"]["prompt_tokens"] == n, (extra, r)
    for extra, param, what in (({"add_generation_prompt": True, "continue_final_message": True}, "continue_final_message",
                                "cannot set both"),
                               ({"continue_final_message": True, "messages": hi}, "continue_final_message",
                                "assistant message"),
                               ({"add_generation_prompt": False, "messages": hi}, "add_generation_prompt",
                                "only to continue"),
                               ({"continue_final_message": 3}, "continue_final_message", "")):
        st, _, b = post(ctx.port, "/v1/chat/completions", dict({"messages": msgs, "max_tokens": 1}, **extra))
        e = expect_error(st, b, 400, repr(extra))
        assert e.get("param") == param and what in e["message"], e
    # /apply-template still renders a chat that does not end with an assistant message without the prompt
    without = post_json(ctx.port, "/apply-template", {"messages": hi, "add_generation_prompt": False})["prompt"]
    assert gp.startswith(without), (gp, without)


def t_tokenize_pieces(ctx):
    # llama-server's with_pieces: {id, piece}; a piece that is part of a character is its bytes
    text = "Hello \u5abd and \u00e9t\u00e9 \U0001F917"
    ids = tokenize(ctx, text)
    r = post_json(ctx.port, "/tokenize", {"content": text, "add_special": True, "with_pieces": True})["tokens"]
    assert [t["id"] for t in r] == ids, (r, ids)
    raw = b"".join(t["piece"].encode("utf-8") if isinstance(t["piece"], str) else bytes(t["piece"]) for t in r)
    detok = post_json(ctx.port, "/detokenize", {"tokens": ids})["content"]
    # (the tiny vocabulary lacks "\u2581" alone, so a space before a byte-fallback character comes back
    # as its three bytes, "\u2581", in /detokenize as in llama.cpp: the pieces must say the same)
    assert raw.decode("utf-8") == detok and detok.startswith("<s> Hello"), (raw, detok)
    assert any(isinstance(t["piece"], list) for t in r), r  # the byte-fallback tokens of the CJK/emoji text
    assert all(isinstance(t["piece"], str) or all(0 <= b < 256 for b in t["piece"]) for t in r), r
    st, _, b = post(ctx.port, "/tokenize", {"content": text, "with_pieces": "yes"})
    assert expect_error(st, b, 400, "with_pieces 'yes'")["param"] == "with_pieces"


def t_constraints_refused(ctx):
    # tools: the tiny llama model renders with the llama2 family, which has no tool-call convention,
    # so the chat routes refuse them naming the field instead of answering unconstrained text;
    # tool_choice "required" without tools and tools on /v1/completions are 400s everywhere (tool
    # calls on the families that have them: tests/server/test_tools.py; response_format, grammar
    # and json_schema: tests/server/test_structured.py)
    msgs = [{"role": "user", "content": "Say hello."}]
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    for path, base in (("/v1/chat/completions", {"messages": msgs}), ("/chat/completions", {"messages": msgs}),
                       ("/v1/completions", {"prompt": PROMPT})):
        for extra, field in (({"tools": [tool]}, "tools"), ({"tool_choice": "required"}, "tool_choice")):
            st, _, b = post(ctx.port, path, dict(base, max_tokens=4, temperature=0, **extra))
            e = expect_error(st, b, 400, "%s %s" % (path, field))
            assert e["param"] == field and field in e["message"], (path, e)
        # values that ask for nothing are answered as without them
        plain = post_json(ctx.port, path, dict(base, max_tokens=4, temperature=0))
        same = post_json(ctx.port, path, dict(base, max_tokens=4, temperature=0, tools=[], tool_choice="auto",
                                              response_format={"type": "text"}, grammar=""))
        key = "message" if "messages" in base else "text"
        assert plain["choices"][0][key] == same["choices"][0][key], (plain, same)


def t_n_probs(ctx):
    r = native(ctx, n_predict=5, temperature=0, n_probs=4, return_tokens=True)
    probs = r["completion_probabilities"]
    assert len(probs) == 5, probs
    for i, p in enumerate(probs):
        assert p["id"] == r["tokens"][i], (p, r["tokens"])
        assert set(p) >= {"id", "token", "bytes", "logprob", "top_logprobs"}, p
        top = p["top_logprobs"]
        assert len(top) == 4, top
        lps = [e["logprob"] for e in top]
        assert lps == sorted(lps, reverse=True) and all(v <= 0 for v in lps), lps
        assert top[0]["id"] == p["id"], "greedy: the chosen token is the most likely one: %r" % p
        assert bytes(p["bytes"]).decode("utf-8", "replace") == p["token"] or "\ufffd" in p["token"], p
    s = native_stream(ctx, n_predict=5, temperature=0, n_probs=2)
    got = [e["id"] for c in s for e in c.get("completion_probabilities", [])]
    assert got == r["tokens"], (got, r["tokens"])
    assert all(len(c["completion_probabilities"]) == len(c["tokens"]) for c in s[:-1]), s


def t_response_fields(ctx):
    r = native(ctx, n_predict=3, response_fields=["content", "generation_settings/n_predict", "no_such", "timings"])
    assert set(r) == {"content", "generation_settings/n_predict", "timings"}, r
    assert r["generation_settings/n_predict"] == 3, r


def t_sampler_fields(ctx):
    a = native(ctx, n_predict=8, temperature=1.0, seed=123, top_k=5, top_p=0.9, min_p=0.1, repeat_penalty=1.2,
               repeat_last_n=16, presence_penalty=0.5, frequency_penalty=0.5, return_tokens=True)
    b = native(ctx, n_predict=8, temperature=1.0, seed=123, top_k=5, top_p=0.9, min_p=0.1, repeat_penalty=1.2,
               repeat_last_n=16, presence_penalty=0.5, frequency_penalty=0.5, return_tokens=True)
    assert a["tokens"] == b["tokens"], "same seed, same tokens"
    g = a["generation_settings"]
    assert g["top_k"] == 5 and abs(g["min_p"] - 0.1) < 1e-6 and abs(g["repeat_penalty"] - 1.2) < 1e-6, g
    assert g["repeat_last_n"] == 16 and g["seed"] == 123, g
    # -1 is the whole context, as llama-server's
    g = native(ctx, n_predict=1, repeat_last_n=-1)["generation_settings"]
    assert g["repeat_last_n"] == ctx.n_ctx, g
    # neutral values of samplers edgellm lacks are accepted (llama-server's defaults)
    native(ctx, n_predict=1, mirostat=0, typical_p=1.0, dry_multiplier=0, xtc_probability=0, grammar="",
           n_keep=0, cache_prompt=False, post_sampling_probs=False, lora=[], samplers=None)


BAD = [
    ({"prompt": [-1]}, "prompt"), ({"prompt": [1.5]}, "prompt"), ({"prompt": [999999]}, "prompt"),
    ({"prompt": [[1], [2]]}, "prompt"), ({"prompt": ["a", "b"]}, "prompt"), ({"prompt": {}}, "prompt"),
    ({"prompt": True}, "prompt"), ({"prompt": []}, "prompt"), ({}, "prompt"), ({"prompt": [None]}, "prompt"),
    ({"prompt": [{"prompt_string": "x"}]}, "prompt"),
    ({"prompt": "x", "n_probs": -1}, "n_probs"), ({"prompt": "x", "n_probs": 10 ** 9}, "n_probs"),
    ({"prompt": "x", "n_probs": 65}, "n_probs"), ({"prompt": "x", "n_probs": "3"}, "n_probs"),
    ({"prompt": "x", "id_slot": 5}, "id_slot"), ({"prompt": "x", "id_slot": -2}, "id_slot"),
    ({"prompt": "x", "id_slot": "0"}, "id_slot"),
    ({"prompt": "x", "n_predict": 0}, "n_predict"), ({"prompt": "x", "n_predict": "x"}, "n_predict"),
    ({"prompt": "x", "n_predict": -2}, "n_predict"), ({"prompt": "x", "temperature": "hot"}, "temperature"),
    ({"prompt": "x", "top_k": 1.5}, "top_k"), ({"prompt": "x", "top_p": 2}, "top_p"),
    ({"prompt": "x", "min_p": -0.1}, "min_p"), ({"prompt": "x", "repeat_last_n": -5}, "repeat_last_n"),
    ({"prompt": "x", "seed": -7}, "seed"), ({"prompt": "x", "stop": 5}, "stop"), ({"prompt": "x", "stop": [1]}, "stop"),
    ({"prompt": "x", "stop": ["s"] * 9}, "stop"), ({"prompt": "x", "logit_bias": [[1]]}, "logit_bias"),
    ({"prompt": "x", "logit_bias": [["", 1]]}, "logit_bias"),
    ({"prompt": "x", "logit_bias": [[999999, 1]]}, "logit_bias"),
    ({"prompt": "x", "logit_bias": [[1, "x"]]}, "logit_bias"), ({"prompt": "x", "logit_bias": 3}, "logit_bias"),
    ({"prompt": "x", "response_fields": "content"}, "response_fields"),
    ({"prompt": "x", "response_fields": [1]}, "response_fields"),
    ({"prompt": "x", "response_fields": ["a"] * 33}, "response_fields"),
    ({"prompt": "x", "ignore_eos": 1}, "ignore_eos"), ({"prompt": "x", "return_tokens": "yes"}, "return_tokens"),
    ({"prompt": "x", "cache_prompt": "no"}, "cache_prompt"), ({"prompt": "x", "stream": "no"}, "stream"),
    ({"prompt": "x", "mirostat": 2}, "mirostat"), ({"prompt": "x", "typical_p": 0.5}, "typical_p"),
    ({"prompt": "x", "grammar": "root ::= \"a"}, "grammar"), ({"prompt": "x", "json_schema": {"type": 1}}, "json_schema"),
    ({"prompt": "x", "samplers": ["top_k"]}, "samplers"), ({"prompt": "x", "lora": [{"id": 0, "scale": 1}]}, "lora"),
    ({"prompt": "x", "n_keep": 5}, "n_keep"), ({"prompt": "x", "dry_multiplier": 0.8}, "dry_multiplier"),
    ({"prompt": "x", "xtc_probability": 0.5}, "xtc_probability"), ({"prompt": "x", "n_cmpl": 2}, "n_cmpl"),
    ({"prompt": "x", "post_sampling_probs": True}, "post_sampling_probs"),
    ({"prompt": "x", "dynatemp_range": 0.5}, "dynatemp_range"), ({"prompt": "x", "n_indent": 4}, "n_indent"),
    ({"prompt": "x", "t_max_predict_ms": 100}, "t_max_predict_ms"),
]


def t_native_bad_input(ctx):
    for body, param in BAD:
        st, _, b = post(ctx.port, "/completion", body)
        e = expect_error(st, b, 400, json.dumps(body)[:80])
        assert e.get("param") == param, (body, e)
    raw = [b'{"prompt":"x","prompt":"y"}', b'{"prompt":"x","n_predict":1e400}', b'{"prompt":"x",}', b'[1,2]',
           b'{"prompt":"\\u0000"}', b'{"prompt":"\xff"}', b'{"prompt":' + b'[' * 5000 + b']' * 5000 + b'}', b'']
    for body in raw:
        st, _, b = post(ctx.port, "/completion", body)
        expect_error(st, b, 400, repr(body[:40]))
    # huge: too many prompt parts; a token-id prompt longer than the context
    st, _, b = post(ctx.port, "/completion", {"prompt": [1] * 70000})
    assert expect_error(st, b, 400, "70000 parts").get("param") == "prompt"
    st, _, b = post(ctx.port, "/completion", {"prompt": [1] * (ctx.n_ctx + 5), "n_predict": 4})
    e = expect_error(st, b, 400, "ids beyond the context")
    assert e["code"] == "context_length_exceeded" and e["n_prompt_tokens"] == ctx.n_ctx + 5 and e["n_ctx"] == ctx.n_ctx, e
    st, _, b = post(ctx.port, "/completion", {"prompt": "x " * 300000})
    assert st == 400, (st, b[:200])
    st, _, b = post(ctx.port, "/completion", b"\x00" * 100)
    assert st == 400, st


# ---------------------------------------------------------------- 3. server information

def t_props(ctx):
    st, _, b = request(ctx.port, "GET", "/props")
    assert st == 200, st
    p = json.loads(b)
    assert p["total_slots"] == 2 and p["n_ctx"] == ctx.n_ctx and p["model_alias"] == "tiny-alias", p
    assert p["model_path"].endswith("tiny-llama-Q4_K_M.gguf"), p["model_path"]
    assert isinstance(p["chat_template"], str) and p["chat_template_family"], p
    # the tiny model has no tokenizer.chat_template: its family renders
    assert p["chat_template_engine"] == "builtin", p["chat_template_engine"]
    assert p["build_info"].startswith("edgellm "), p["build_info"]
    d = p["default_generation_settings"]
    assert d["n_ctx"] == ctx.n_ctx and d["is_processing"] is False, d
    par = d["params"]
    # the server's --temp 0.5 --seed 7 -n 6 are the defaults
    assert abs(par["temperature"] - 0.5) < 1e-6 and par["seed"] == 7 and par["n_predict"] == 6, par
    assert par["top_k"] == 40 and abs(par["top_p"] - 0.95) < 1e-6 and abs(par["min_p"] - 0.05) < 1e-6, par


def t_server_defaults(ctx):
    a = native(ctx, return_tokens=True)
    b = native(ctx, return_tokens=True)
    assert a["tokens_predicted"] == 6 or a["stop_type"] == "eos", a          # -n 6
    assert a["tokens"] == b["tokens"], "--seed 7: every request without a seed samples the same"
    assert abs(a["generation_settings"]["temperature"] - 0.5) < 1e-6, a["generation_settings"]
    c = post_json(ctx.port, "/v1/completions", {"prompt": PROMPT})        # OpenAI's 16 gives way to -n
    assert c["usage"]["completion_tokens"] == 6 or c["choices"][0]["finish_reason"] == "stop", c
    # a request's own values win
    d = native(ctx, n_predict=2, seed=99, temperature=0)
    assert d["tokens_predicted"] == 2 and d["generation_settings"]["seed"] == 99, d


def t_slots(ctx):
    st, _, b = request(ctx.port, "GET", "/slots")
    assert st == 200, st
    slots = json.loads(b)
    assert [s["id"] for s in slots] == [0, 1] and not any(s["is_processing"] for s in slots), slots
    # a long stream pinned to slot 1: /slots shows it busy while it runs
    done = threading.Event()
    res = {}

    def run():
        try:
            res["r"] = post(ctx.port, "/completion", {"prompt": PROMPT, "n_predict": ctx.n_ctx - 64, "id_slot": 1,
                                                      "ignore_eos": True, "stream": True, "temperature": 0})
        finally:
            done.set()
    th = threading.Thread(target=run)
    th.start()
    seen = None
    deadline = time.time() + 30
    while time.time() < deadline and not done.is_set():
        slots = json.loads(request(ctx.port, "GET", "/slots")[2])
        if slots[1]["is_processing"]:
            seen = slots
            break
        time.sleep(0.01)
    th.join(120)
    assert seen is not None, "slot 1 was never seen processing"
    assert seen[1]["params"]["n_predict"] == ctx.n_ctx - 64 and seen[1]["params"]["ignore_eos"] is True, seen[1]
    assert seen[0]["is_processing"] is False and "params" not in seen[0], seen  # idle: no request, no params
    assert res["r"][0] == 200
    last = json.loads(sse_events(res["r"][2])[-1])
    assert last["id_slot"] == 1, last
    st, _, b = post(ctx.port, "/slots/9?action=save", {"filename": "x"})
    expect_error(st, b, 404, "/slots/9")
    for bad in ("abc", "-1", "99999999999", "1x", "", "0%201", "%32"):  # %32 is "2": no such slot
        st, _, b = post(ctx.port, "/slots/%s?action=save" % bad, {"filename": "x"})
        assert st in (400, 404), (bad, st, b[:200])  # %00-style escapes are the prelude's 400
        expect_error(st, b, st, "/slots/" + bad)
    st, _, b = post(ctx.port, "/slots/1?action=save", {"filename": "x"})
    expect_error(st, b, 501, "/slots/1 save (not implemented)")


def t_no_slots(ctx):
    st, _, b = request(ctx.key_srv.port, "GET", "/slots", headers={"X-Api-Key": "secret"})
    expect_error(st, b, 501, "--no-slots")


def t_apply_template_input_tokens(ctx):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}]
    p = post_json(ctx.port, "/apply-template", {"messages": msgs})["prompt"]
    assert "Hello there" in p and "Be brief." in p, p
    n = post_json(ctx.port, "/v1/chat/completions/input_tokens", {"messages": msgs})
    assert n["object"] == "response.input_tokens" and isinstance(n["input_tokens"], int), n
    assert n == post_json(ctx.port, "/chat/completions/input_tokens", {"messages": msgs})
    chat = post_json(ctx.port, "/v1/chat/completions", {"messages": msgs, "max_tokens": 1})
    assert chat["usage"]["prompt_tokens"] == n["input_tokens"], (chat["usage"], n)
    assert len(tokenize(ctx, p)) == n["input_tokens"], (p, n)
    # the rendered prompt, sent to /completion, is the chat prompt
    r = native(ctx, prompt=p, n_predict=1)
    assert r["tokens_evaluated"] == n["input_tokens"], r
    for path in ("/apply-template", "/v1/chat/completions/input_tokens"):
        for body in ({}, {"messages": []}, {"messages": "hi"}, {"messages": [{"role": "wizard", "content": "x"}]},
                     {"messages": [{"role": "user"}]}, {"messages": [{"role": "user", "content": 5}]},
                     {"messages": [{"role": "user", "content": "a"}], "messages": None}, [1],
                     # two assistant messages at the end (llama-server's 400; one is a prefill)
                     {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                   {"role": "assistant", "content": "c"}]}):
            st, _, b = post(ctx.port, path, body)
            expect_error(st, b, 400, "%s %r" % (path, body))
        st, _, b = post(ctx.port, path, {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})
        assert st == 200, (path, "one trailing assistant message", st, b[:200])
        for raw in (b"{", b"\xff\xfe", b'{"messages":[{"role":"user","content":"\\u0000"}]}'):
            st, _, b = post(ctx.port, path, raw)
            expect_error(st, b, 400, "%s %r" % (path, raw))
        # huge: a message near the 1 MiB body limit renders (and counts) whole; beyond it, 413
        big = "word " * 190000
        st, _, b = post(ctx.port, path, {"messages": [{"role": "user", "content": big}]})
        assert st == 200 and (big in json.loads(b).get("prompt", big)), (path, st, b[:200])
        st, _, b = post(ctx.port, path, {"messages": [{"role": "user", "content": "x" * (1 << 20)}]})
        expect_error(st, b, 413, path + " over 1 MiB")
        st, _, b = request(ctx.port, "GET", path)
        expect_error(st, b, 405, "GET " + path)


# ---------------------------------------------------------------- 6. stream shape, errors

def t_chat_stream_shape(ctx):
    for extra in ({}, {"logprobs": True, "top_logprobs": 2}, {"stream_options": {"include_usage": True}}):
        body = dict({"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 20,
                     "temperature": 0, "stream": True}, **extra)
        st, _, b = post(ctx.port, "/v1/chat/completions", body)
        assert st == 200, st
        ev = sse_events(b)
        assert ev[-1] == "[DONE]", ev[-2:]
        chunks = [json.loads(e) for e in ev[:-1]]
        first = chunks[0]["choices"][0]
        assert first["delta"] == {"role": "assistant", "content": None}, first
        with_choice = [c for c in chunks if c["choices"]]
        last = with_choice[-1]["choices"][0]
        assert last["delta"] == {} and last["finish_reason"] in ("stop", "length"), last
        for c in with_choice[1:-1]:
            d = c["choices"][0]["delta"]
            assert "role" not in d and isinstance(d.get("content"), str) and d["content"] != "", c
            assert c["choices"][0]["finish_reason"] is None
        if extra.get("logprobs"):
            n_lp = sum(len((c["choices"][0].get("logprobs") or {}).get("content") or []) for c in with_choice)
            usage = post_json(ctx.port, "/v1/chat/completions", dict(body, stream=False))["usage"]
            assert n_lp == usage["completion_tokens"], (n_lp, usage)
        if "stream_options" in extra:
            assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0, chunks[-1]


def t_context_overflow(ctx):
    st, _, b = post(ctx.port, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                        "max_tokens": ctx.n_ctx})
    e = expect_error(st, b, 400, "chat overflow")
    assert e["code"] == "context_length_exceeded" and e["n_ctx"] == ctx.n_ctx, e
    assert isinstance(e["n_prompt_tokens"], int) and 0 < e["n_prompt_tokens"] < ctx.n_ctx, e
    st, _, b = post(ctx.port, "/v1/completions", {"prompt": "hello " * ctx.n_ctx})
    e = expect_error(st, b, 400, "prompt alone overflows")
    assert e["code"] == "context_length_exceeded" and e["n_prompt_tokens"] >= ctx.n_ctx and e["n_ctx"] == ctx.n_ctx, e
    st, _, b = post(ctx.port, "/completion", {"prompt": PROMPT, "n_predict": ctx.n_ctx})
    e = expect_error(st, b, 400, "native overflow")
    assert e["param"] == "n_predict" and e["n_ctx"] == ctx.n_ctx, e


def t_truncated(ctx):
    # -1: until the context is full; the context is small, so the answer says truncated
    r = native(ctx, n_predict=-1, ignore_eos=True, temperature=0)
    assert r["truncated"] is True and r["stop_type"] == "limit", {k: r[k] for k in ("truncated", "stop_type")}
    assert r["tokens_evaluated"] + r["tokens_predicted"] >= ctx.n_ctx, r["tokens_predicted"]


def t_concurrent(ctx):
    errors = []

    def worker(i):
        try:
            for j in range(6):
                k = (i + j) % 5
                if k == 0:
                    r = native(ctx, n_predict=3, temperature=0, n_probs=2)
                    assert len(r["completion_probabilities"]) == r["tokens_predicted"]
                elif k == 1:
                    c = native_stream(ctx, n_predict=3, temperature=0)
                    assert c[-1]["stop"] is True
                elif k == 2:
                    st, _, b = post(ctx.port, "/completion", BAD[(i * 7 + j) % len(BAD)][0])
                    assert st == 400, (st, b[:100])
                elif k == 3:
                    assert request(ctx.port, "GET", "/slots")[0] == 200
                    assert request(ctx.port, "GET", "/props")[0] == 200
                else:
                    n = post_json(ctx.port, "/v1/chat/completions/input_tokens",
                                  {"messages": [{"role": "user", "content": "x" * (i + 1)}]})
                    assert n["input_tokens"] > 0
        except Exception as e:  # noqa: BLE001
            errors.append("%d: %r" % (i, e))
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(10)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    assert not errors, errors[:3]


def t_health(ctx):
    st, _, b = request(ctx.port, "GET", "/health")
    assert st == 200, st


def t_stream_error_at_shutdown(ctx):
    """SIGINT while a /completion stream runs: it ends with an error event in
    llama-server's shape ({"error": {"code": 503, "message", "type"}}), no [DONE]."""
    srv = ctx.srv
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
    body = json.dumps({"prompt": PROMPT, "n_predict": ctx.n_ctx - 16, "ignore_eos": True,
                       "stream": True}).encode()
    s.sendall(b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    got = b""
    while b'"content"' not in got:  # the stream is running
        chunk = s.recv(65536)
        assert chunk, got[-300:]
        got += chunk
    code = srv.interrupt()
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    s.close()
    assert code == 0, "exit %r:\n%s" % (code, srv.stderr()[-2000:])
    for m in ("LeakSanitizer", "ERROR: AddressSanitizer", "runtime error:"):
        assert m not in srv.stderr(), srv.stderr()[-3000:]
    events = [ln[5:].strip() for ln in got.decode("utf-8", "replace").splitlines() if ln.startswith("data:")]
    assert events and "[DONE]" not in events, events[-3:]
    last = json.loads(events[-1])
    # ~2000 tokens take seconds on this model; the signal comes after the first one
    assert "error" in last, "the stream did not end with an error event: %r" % events[-2:]
    e = last["error"]
    assert e["code"] == 503 and e["type"] == "unavailable_error" and e["message"], e
    assert all("error" not in json.loads(x) for x in events[:-1]), events


def main():
    cli, model = require_setup("tiny-llama-Q4_K_M.gguf")
    if cli is None:
        return model
    ctx = Ctx()
    ctx.n_ctx = 1024  # the model's whole context (beyond it serve refuses); a stream to its end runs long enough to be interrupted
    R = Runner()
    srv = Server(cli, model, "--parallel", "2", "-c", str(ctx.n_ctx), "-t", "1", "--alias", "tiny-alias, tiny-second,",
                 "--temp", "0.5", "--seed", "7", "-n", "6")
    ctx.srv = srv
    tmpl = os.path.join(os.environ.get("TMPDIR", "/tmp"), "el_test_llama_server_%d.jinja" % os.getpid())
    with open(tmpl, "w") as f:
        f.write(JINJA_FILE)
    ctx.key_srv = Server(cli, model, "--parallel", "1", "-c", "128", "-t", "1", "--api-key", "secret", "--no-slots",
                         "--chat-template-file", tmpl, "--chat-template-kwargs", SERVER_KWARGS, "--no-ui")
    ctx.cli, ctx.model = cli, model
    try:
        if not R.run("start server (--parallel 2 --alias --temp --seed -n)", srv.start):
            print("%d passed, %d failed" % (R.passed, R.failed))
            return 1
        ctx.port = srv.port
        for name, fn in [("routes without /v1; embeddings 501", t_routes_without_v1),
                         ("openai client, base URL without /v1", t_openai_client_no_v1),
                         ("/completion == /v1/completions (greedy)", t_native_matches_openai),
                         ("/completion: token-id and mixed prompts", t_native_token_prompts),
                         ("/completion stream == non-stream", t_native_stream),
                         ("/completion return_tokens detokenize", t_return_tokens),
                         ("/completion stop word", t_stop_word),
                         ("/completion ignore_eos, logit_bias", t_ignore_eos_logit_bias),
                         ("/completion n_probs", t_n_probs),
                         ("logit_bias text keys (tokenized), repeats add up", t_logit_bias_text),
                         ("verbose: __verbose; timings_per_token: timings", t_verbose_timings),
                         ("prefill; add_generation_prompt / continue_final_message", t_continuation_fields),
                         ("/tokenize with_pieces", t_tokenize_pieces),
                         ("tools refused (400)", t_constraints_refused),
                         ("/completion response_fields", t_response_fields),
                         ("/completion sampler fields, seed", t_sampler_fields),
                         ("/completion hostile input: 400 naming the field", t_native_bad_input),
                         ("/props", t_props),
                         ("--temp/--seed/-n as request defaults", t_server_defaults),
                         ("/slots (busy while running), /slots/N", t_slots),
                         ("/apply-template, input_tokens", t_apply_template_input_tokens),
                         ("chat stream shape: role chunk first", t_chat_stream_shape),
                         ("context overflow: n_prompt_tokens, n_ctx", t_context_overflow),
                         ("n_predict -1: truncated at the context", t_truncated),
                         ("concurrent mixed traffic", t_concurrent),
                         ("healthy at the end", t_health)]:
            R.run(name, fn, ctx)
        if R.run("start server --api-key --no-slots", ctx.key_srv.start):
            R.run("X-Api-Key like Authorization: Bearer", t_x_api_key, ctx)
            R.run("--no-slots: /slots 501", t_no_slots, ctx)
            R.run("--chat-template-file renders chats; --chat-template-kwargs; add_generation_prompt",
                  t_chat_template_file, ctx)
            R.run("--no-ui: GET / 404", t_no_ui, ctx)
        R.run("--chat-template-kwargs not an object: refused", t_bad_server_kwargs, ctx)
        R.run("SIGINT mid /completion stream: error event, exit 0", t_stream_error_at_shutdown, ctx)
        if ctx.key_srv.proc:
            def stop_key():
                assert ctx.key_srv.interrupt() == 0, ctx.key_srv.stderr()[-2000:]
            R.run("SIGINT key server", stop_key)
    finally:
        srv.kill()
        ctx.key_srv.kill()
        os.unlink(tmpl)
    if R.failed:
        print("failed: " + "; ".join(R.names))
    print("%d passed, %d failed" % (R.passed, R.failed))
    return 1 if R.failed else 0


if __name__ == "__main__":
    sys.exit(main())
