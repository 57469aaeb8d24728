#!/usr/bin/env python3
"""Tool calls on a real model in its own template's format: Qwen2.5-Coder 1.5B
Instruct (Q4_K_M; `bash scripts/fetch-model.sh qwen2.5-coder-1.5b`,
EL_QWEN_MODEL overrides the path) behind `edgellm serve`, its Jinja template
rendering the tools and detected as the hermes format (<tool_call> blocks,
bare JSON), with the two tools of test_tools.py and a question that clearly
needs one ("What is the weather in Paris? Answer in celsius.").

Over temperatures 0 / 0.7 / 1.0 x seeds (1 seed by default: 10 requests of
about 12 s each on an idle 2-core machine, ~2 min; several times that when
the cores are shared; EL_QWEN_TOOLS_FULL=1: 3 seeds and the parallel mode
below, 36 requests):
  - tool_choice "required" with parallel_tool_calls false, and a named tool
    (get_weather): every reply is one call ending with finish_reason
    "tool_calls", content null, its arguments valid (jsonschema) against the
    function's parameters — the grammar guarantees it, so it is asserted;
  - (full only) "required" with parallel calls allowed (the default): every
    call made validates; the count of replies that end in "tool_calls" is
    printed — at temperature 1 the model may chain calls and be cut by
    max_tokens ("length"), which the grammar allows;
  - tool_choice "auto": the model may answer in text, so only this is
    asserted: a reply with calls ends in "tool_calls" and its calls name an
    offered tool with a JSON object as arguments; how many replies called,
    and how many of those calls validate against the schema, is printed (the
    lazy grammar constrains a call only once its trigger — "<tool_call>", or
    "{"name"" at the reply's start — appears; a call fenced in ```json is
    parsed but not constrained);
  - the first "required" request streamed gives the same call and
    finish_reason as it did non-streamed.
max_tokens is 96 (one call is ~25 tokens). The counts are printed per mode.

Exit status: 0 all passed, 1 something failed, 77 skipped (no model, no
`jsonschema` package; under CI=true a missing model fails).
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
import fixtures  # noqa: E402
from test_server import post, request, require_cli, Runner, SANITIZER_MARKERS, Server, sse_events  # noqa: E402
from test_tools import SCHEMAS, TOOLS  # noqa: E402

FULL = os.environ.get("EL_QWEN_TOOLS_FULL") == "1"
SEEDS = range(3 if FULL else 1)
TEMPS = (0.0, 0.7, 1.0)
MAX_TOKENS = 96
MSGS = [{"role": "user", "content": "What is the weather in Paris? Answer in celsius."}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


def qwen_path():
    return os.environ.get("EL_QWEN_MODEL") or os.path.expanduser(
        "~/.cache/edgellm/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")


def main():
    q = qwen_path()
    if not os.path.exists(q):
        fixtures.missing(q, "bash scripts/fetch-model.sh qwen2.5-coder-1.5b")  # 77, or a failure under CI=true
    try:
        import jsonschema
    except ImportError as e:
        print("skip: %s (pip install jsonschema)" % e)
        return 77
    cli = require_cli()
    if cli is None:
        return 1
    r = Runner()
    srv = Server(cli, q, "-c", "1024").start(timeout=300)
    port = srv.port

    def chat(**kw):
        st, _, data = post(port, "/v1/chat/completions", dict(messages=MSGS, tools=TOOLS, max_tokens=MAX_TOKENS, **kw),
                           timeout=600)
        assert st == 200, data[:500]
        return json.loads(data)

    def props():
        st, _, data = request(port, "GET", "/props")
        j = json.loads(data)
        assert j["chat_template_engine"] == "jinja" and j["tool_call_format"] == "hermes", (
            j.get("chat_template_engine"), j.get("tool_call_format"))
    r.run("qwen: its own template, tool format hermes", props)

    def valid(tc):
        try:
            jsonschema.validate(json.loads(tc["function"]["arguments"]), SCHEMAS[tc["function"]["name"]])
            return True
        except jsonschema.ValidationError:
            return False

    first = {}
    modes = [("required, parallel_tool_calls false", dict(tool_choice="required", parallel_tool_calls=False), True),
             ("named get_weather", dict(tool_choice=NAMED), True)]
    if FULL:
        modes.append(("required, parallel default", dict(tool_choice="required"), False))
    for label, kw, strict in modes:
        def forced(kw=kw, label=label, strict=strict):
            ok = calls = toks = ended = 0
            fails = []
            t0 = time.time()
            for temp in TEMPS:
                for seed in SEEDS:
                    j = chat(temperature=temp, seed=seed, **kw)
                    ch = j["choices"][0]
                    first.setdefault(label, (dict(temperature=temp, seed=seed, **kw), ch))
                    toks += j["usage"]["completion_tokens"]
                    tcs = ch["message"].get("tool_calls") or []
                    good = (ch["finish_reason"] == "tool_calls" and len(tcs) == 1 and ch["message"]["content"] is None
                            and all(valid(tc) for tc in tcs) and
                            ("function" not in str(kw) or tcs[0]["function"]["name"] == "get_weather"))
                    if not strict:  # several calls allowed: the model may open one more and hit max_tokens
                        good = tcs and all(valid(tc) for tc in tcs)
                        if ch["finish_reason"] != "tool_calls":
                            print("    %s t=%.1f seed %d: %d calls, then %s" % (label, temp, seed, len(tcs),
                                                                        ch["finish_reason"]))
                    calls += len(tcs)
                    ended += ch["finish_reason"] == "tool_calls"
                    if good:
                        ok += 1
                    else:
                        fails.append((temp, seed, ch["finish_reason"], ch["message"]))
            n = len(TEMPS) * len(SEEDS)
            print("  qwen %s: %d/%d replies pass (%d/%d end in tool_calls; %d calls, all checked against the "
                  "schema; %d tokens, %.1f s)" % (label, ok, n, ended, n, calls, toks, time.time() - t0))
            assert not fails, fails
        r.run("qwen: %s -> every reply ends in valid calls" % label, forced)

    def auto():
        called = valid_calls = n_calls = texts = 0
        t0 = time.time()
        for temp in TEMPS:
            for seed in SEEDS:
                ch = chat(tool_choice="auto", temperature=temp, seed=seed)["choices"][0]
                tcs = ch["message"].get("tool_calls") or []
                if tcs:
                    called += 1
                    assert ch["finish_reason"] == "tool_calls", ch
                    for tc in tcs:
                        assert tc["function"]["name"] in SCHEMAS, tc
                        assert isinstance(json.loads(tc["function"]["arguments"]), dict), tc
                        n_calls += 1
                        valid_calls += valid(tc)
                else:
                    texts += 1
                    print("    auto t=%.1f seed %d answered in text: %r" % (temp, seed, (ch["message"]["content"] or "")[:120]))
        n = len(TEMPS) * len(SEEDS)
        print("  qwen auto: %d/%d replies called a tool (%d calls, %d valid against the schema), %d answered in text "
              "(%.1f s)" % (called, n, n_calls, valid_calls, texts, time.time() - t0))
    r.run("qwen: auto -> calls, when made, end the reply and parse", auto)

    def streamed():
        args, whole = first["required, parallel_tool_calls false"]
        st, _, data = post(port, "/v1/chat/completions",
                           dict(messages=MSGS, tools=TOOLS, max_tokens=MAX_TOKENS, stream=True, **args), timeout=600)
        calls, finish = {}, None
        for e in sse_events(data):
            if e == "[DONE]":
                continue
            c = json.loads(e)
            if not c.get("choices"):
                continue
            finish = c["choices"][0].get("finish_reason") or finish
            for tc in c["choices"][0]["delta"].get("tool_calls") or []:
                if tc["function"].get("name"):
                    calls[tc["index"]] = [tc["function"]["name"], tc["function"]["arguments"]]
                else:
                    calls[tc["index"]][1] += tc["function"]["arguments"]
        want = [[t["function"]["name"], t["function"]["arguments"]] for t in whole["message"]["tool_calls"]]
        assert finish == "tool_calls" == whole["finish_reason"] and [calls[i] for i in sorted(calls)] == want, (
            calls, want, finish)
    r.run("qwen: required streamed = non-streamed", streamed)

    def clean_exit():
        code = srv.interrupt()
        assert code == 0, "exit %s" % code
        assert not any(mk in srv.stderr() for mk in SANITIZER_MARKERS), srv.stderr()[-2000:]
    r.run("qwen server exits 0", clean_exit)
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
