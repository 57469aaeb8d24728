#!/usr/bin/env python3
"""Tool calls and reasoning in the chat template's format, through the server.

On the tiny qwen2 fixture (tiny-qwen2-Q4_K_M: no template of its own) behind
`edgellm serve --chat-template-file`, with templates that carry each
family's markers:
  - /props tool_call_format names the format detected from the template
    (hermes, llama3, mistral_nemo, functionary31, functionary32, command_r,
    deepseek, granite, gpt_oss; a template without markers keeps the
    built-in family);
  - hermes (grammar: chatml's <tool_call> block): tool_choice required and a
    named tool over seeds x temperatures 0 / 0.7 / 1.0: every reply ends with
    finish_reason "tool_calls", arguments valid (jsonschema), streamed =
    non-streamed;
  - formats whose markers are special tokens (mistral_nemo, granite, gpt_oss,
    ...) have no call grammar: required / named are a 400 naming the format,
    "auto" answers 200 (the reply parsed; random weights never call);
  - reasoning, on replies made synthetic by a grammar that forces the exact
    text ("<think>" is three tokens in this vocabulary, so every marker is
    cut across stream chunks): message.reasoning_content / content split,
    the stream's delta.reasoning_content and delta.content concatenations
    equal the non-streamed fields (a piece of a marker that leaked would
    show in them);
    reasoning_format "none" (request) and --reasoning-format none (server)
    keep the tags in the content; an unterminated <think> is all reasoning;
    a long reasoning (300 forced bytes) streams whole; text that is not a
    think block at the start stays content as it came; a bad
    reasoning_format is a 400 and a bad --reasoning-format exits 2;
  - every server exits 0 on SIGINT with no sanitizer report.

Exit status: 0 all passed, 1 something failed, 77 skipped (no fixture, no
`jsonschema` package).
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_server import post, request, require_setup, Runner, SANITIZER_MARKERS, Server, sse_events  # noqa: E402
from test_tools import MSGS, SCHEMAS, TOOLS  # noqa: E402

LIGHT = os.environ.get("EL_TOOLS_LIGHT") == "1"
SEEDS = range(1 if LIGHT else 3)
TEMPS = (0.0, 0.7, 1.0)

BODY = """{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""
TOOLS_PART = """{%- if tools %}<|im_start|>system
Tools: {% for t in tools %}{{ t | tojson }}
{% endfor %}MARK<|im_end|>
{% endif %}"""
MARKS = {
    "hermes": '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>',
    "llama3": "<|start_header_id|>ipython<|end_header_id|> <|python_tag|>",
    "mistral_nemo": "[TOOL_CALLS]",
    "functionary31": "<function=NAME>{args}</function>",
    "functionary32": ">>>all",
    "command_r": "<|START_ACTION|>[...]<|END_ACTION|>",
    "deepseek": "<\uff5ctool\u2581calls\u2581begin\uff5c>",
    "granite": "<|tool_call|>",
    "gpt_oss": "<|channel|>",
}


def template(dirpath, fmt):
    path = os.path.join(dirpath, "%s.jinja" % (fmt or "plain"))
    with open(path, "w", encoding="utf-8") as f:
        f.write((TOOLS_PART.replace("MARK", MARKS[fmt]) if fmt else "") + BODY)
    return path


def chat(port, body):
    st, _, data = post(port, "/v1/chat/completions", dict({"messages": MSGS}, **body), timeout=300)
    return st, json.loads(data)


def stream(port, body):
    st, _, data = post(port, "/v1/chat/completions", dict({"messages": MSGS, "stream": True}, **body), timeout=300)
    assert st == 200, (st, data[:300])
    chunks = [json.loads(e) for e in sse_events(data) if e != "[DONE]"]
    return [c for c in chunks if c.get("choices")]


def main():
    cli, model = require_setup("tiny-qwen2-Q4_K_M.gguf", need_openai=False)
    if cli is None:
        return model
    try:
        import jsonschema
    except ImportError as e:
        print("skip: %s (pip install jsonschema)" % e)
        return 77
    r = Runner()
    tmp = tempfile.mkdtemp(prefix="el-toolwire-")

    # ---- the format from the template: /props, and what each format allows
    def detect_all():
        for fmt in list(MARKS) + [None]:
            srv = Server(cli, model, "-c", "512", "--chat-template-file", template(tmp, fmt)).start()
            try:
                st, _, data = request(srv.port, "GET", "/props")
                got = json.loads(data)["tool_call_format"]
                assert got == (fmt or "chatml"), (fmt, got)
                if fmt not in ("hermes", "llama3", None):
                    st, j = chat(srv.port, {"tools": TOOLS, "tool_choice": "required", "max_tokens": 8})
                    assert st == 400 and fmt in j["error"]["message"], (fmt, st, j)
                    assert j["error"]["param"] == "tool_choice", j
                    st, j = chat(srv.port, {"tools": TOOLS, "max_tokens": 8, "seed": 1})
                    assert st == 200 and j["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls"), j
            finally:
                assert srv.interrupt() == 0
    r.run("tool_call_format per template; no grammar: required 400, auto 200", detect_all)

    # ---- hermes: the format's grammar and parser end to end
    srv = Server(cli, model, "-c", "1024", "--chat-template-file", template(tmp, "hermes")).start()
    port = srv.port

    def check(ch, only):
        assert ch["finish_reason"] == "tool_calls", ch
        calls = ch["message"].get("tool_calls") or []
        assert calls and (only is None or len(calls) == 1), ch["message"]
        for tc in calls:
            assert tc["id"].startswith("call_") and tc["type"] == "function", tc
            assert only is None or tc["function"]["name"] == only, tc
            jsonschema.validate(json.loads(tc["function"]["arguments"]), SCHEMAS[tc["function"]["name"]])
        return len(calls)

    for label, choice, only in (("required", "required", None),
                                ("named search", {"type": "function", "function": {"name": "search"}}, "search")):
        def matrix(choice=choice, only=only, label=label):
            ok = calls = 0
            for temp in TEMPS:
                for seed in SEEDS:
                    st, j = chat(port, {"tools": TOOLS, "tool_choice": choice, "seed": seed, "temperature": temp,
                                        "max_tokens": 200})
                    assert st == 200, j
                    calls += check(j["choices"][0], only)
                    ok += 1
            print("  hermes %s: %d/%d replies end in tool_calls with valid arguments (%d calls)"
                  % (label, ok, ok, calls))
        r.run("hermes template: %s -> tool_calls, arguments valid" % label, matrix)

        def streamed(choice=choice):
            body = {"tools": TOOLS, "tool_choice": choice, "seed": 3, "temperature": 0.7, "max_tokens": 200}
            st, whole = chat(port, body)
            calls, finish = {}, None
            for c in stream(port, body):
                ch = c["choices"][0]
                finish = ch.get("finish_reason") or finish
                for tc in ch["delta"].get("tool_calls") or []:
                    if tc["function"].get("name"):
                        calls[tc["index"]] = [tc["function"]["name"], tc["function"]["arguments"]]
                    else:
                        calls[tc["index"]][1] += tc["function"]["arguments"]
            want = [[t["function"]["name"], t["function"]["arguments"]] for t in whole["choices"][0]["message"]["tool_calls"]]
            assert finish == "tool_calls" and [calls[i] for i in sorted(calls)] == want, (calls, want, finish)
        r.run("hermes template: %s streamed = non-streamed" % label, streamed)

    # ---- reasoning on forced replies (the same server: no tools, a grammar)
    def forced(text):
        return 'root ::= "%s"' % text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    def split(body):
        chunks = stream(port, body)
        rs = "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in chunks)
        cs = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        return rs, cs, len(chunks)

    cases = [
        ("<think>I plan: look it up.</think>\n\nParis is sunny.", "I plan: look it up.", "Paris is sunny."),
        ("<think>a < b and </thin are not the end</think>Done", "a < b and </thin are not the end", "Done"),
        ("Hello <think>x</think>", None, "Hello <think>x</think>"),
        ("<think></think>Only content", None, "Only content"),
    ]

    def reasoning_split():
        for text, want_r, want_c in cases:
            body = {"grammar": forced(text), "max_tokens": 120, "temperature": 0}
            st, j = chat(port, body)
            assert st == 200, j
            m = j["choices"][0]["message"]
            assert m.get("reasoning_content") == want_r and m["content"] == want_c, (text, m)
            rs, cs, n = split(body)
            assert rs == (want_r or "") and cs == want_c, (text, rs, cs)
            assert n > 3, n  # the text came in many chunks: the markers were cut across them
    r.run("reasoning_content split: non-streamed and streamed agree, markers cut across chunks", reasoning_split)

    def reasoning_none():
        text = "<think>hidden?</think>Shown"
        st, j = chat(port, {"grammar": forced(text), "max_tokens": 60, "temperature": 0, "reasoning_format": "none"})
        m = j["choices"][0]["message"]
        assert st == 200 and m["content"] == text and "reasoning_content" not in m, j
        rs, cs, _ = split({"grammar": forced(text), "max_tokens": 60, "temperature": 0, "reasoning_format": "none"})
        assert rs == "" and cs == text, (rs, cs)
        st, j = chat(port, {"grammar": forced(text), "reasoning_format": "deepseek", "max_tokens": 60})
        assert j["choices"][0]["message"]["reasoning_content"] == "hidden?", j
        for bad in ("nope", 3, "", ["auto"]):
            st, j = chat(port, {"reasoning_format": bad, "max_tokens": 4})
            assert st == 400 and j["error"]["param"] == "reasoning_format", (bad, st, j)
    r.run("reasoning_format none / deepseek per request; bad values 400", reasoning_none)

    def unterminated_and_long():
        body = {"grammar": forced("<think>cut short and never closed"), "max_tokens": 60, "temperature": 0}
        st, j = chat(port, body)
        m = j["choices"][0]["message"]
        assert m["reasoning_content"] == "cut short and never closed" and m["content"] == "", m
        rs, cs, _ = split(body)
        assert rs == "cut short and never closed" and cs == "", (rs, cs)
        long = "<think>" + "step < by </ step " * 17 + "</think>ok"
        body = {"grammar": forced(long), "max_tokens": 400, "temperature": 0}
        st, j = chat(port, body)
        m = j["choices"][0]["message"]
        assert j["choices"][0]["finish_reason"] == "stop", j
        assert m["reasoning_content"] == ("step < by </ step " * 17).strip() and m["content"] == "ok", m
        rs, cs, _ = split(body)
        assert rs == "step < by </ step " * 17 and cs == "ok", (rs, cs)
        # cut by max_tokens inside the think: reasoning only, finish length
        st, j = chat(port, dict(body, max_tokens=10))
        m = j["choices"][0]["message"]
        assert j["choices"][0]["finish_reason"] == "length" and m["content"] == "" and m["reasoning_content"], j
    r.run("unterminated think is reasoning; a long reasoning streams whole", unterminated_and_long)

    def done():
        code = srv.interrupt()
        assert code == 0, "exit %s" % code
        assert not any(mk in srv.stderr() for mk in SANITIZER_MARKERS), srv.stderr()[-2000:]
    r.run("hermes server exits 0", done)

    def server_none():
        s2 = Server(cli, model, "-c", "512", "--reasoning-format", "none").start()
        try:
            st, j = chat(s2.port, {"grammar": forced("<think>x</think>y"), "max_tokens": 30})
            assert st == 200 and j["choices"][0]["message"]["content"] == "<think>x</think>y", j
            st, j = chat(s2.port, {"grammar": forced("<think>x</think>y"), "max_tokens": 30, "reasoning_format": "auto"})
            assert j["choices"][0]["message"]["reasoning_content"] == "x", j
        finally:
            assert s2.interrupt() == 0
        p = subprocess.run([cli, "serve", "-m", model, "--reasoning-format", "sometimes"], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 2 and "--reasoning-format" in p.stderr, (p.returncode, p.stderr[-500:])
    r.run("--reasoning-format none is the default a request overrides; a bad one exits 2", server_none)
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
