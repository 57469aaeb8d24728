#!/usr/bin/env python3
"""A tool call ends the reply, measured as a user would on a real model.

Gemma 3 270M (the default model: scripts/fetch-model.sh; EL_GEMMA_MODEL
overrides the path) behind `edgellm serve`, through the `openai` client, with
the two tools of test_tools.py. For every seed x temperature (0, 0.7, 1.0) and
each of
  - tool_choice "required" with parallel_tool_calls left at its default (true),
  - tool_choice "required" with parallel_tool_calls false,
  - a named tool ({"type": "function", "function": {"name": "search"}}),
the reply must end with finish_reason "tool_calls" (never "length": the cap,
max_tokens 160, is far above one call's ~40 tokens, so a reply that runs on
after its call fails here), carry at least one call (exactly one when
parallel calls are off or the tool is named), every call's arguments parse as
JSON and validate (jsonschema) against that function's parameters, and the
content is null. One streamed request per mode must give the same calls and
finish_reason as the non-streamed one. The counts are printed per mode, with
the tokens the replies used.

EL_TOOLS_LIGHT=1 (the ASan build) runs 2 seeds instead of 4.

Exit status: 0 all passed, 1 something failed, 77 skipped (no Gemma model, no
`openai` / `jsonschema` package; under CI=true a missing model fails).
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
import fixtures  # noqa: E402
from test_server import require_cli, Runner, SANITIZER_MARKERS, Server  # noqa: E402
from test_tools import MSGS, SCHEMAS, TOOLS, gemma_path  # noqa: E402

LIGHT = os.environ.get("EL_TOOLS_LIGHT") == "1"
SEEDS = range(2 if LIGHT else 4)
TEMPS = (0.0, 0.7, 1.0)
MAX_TOKENS = 160
MODES = [
    ("required, parallel default", dict(tool_choice="required"), None),
    ("required, parallel false", dict(tool_choice="required", parallel_tool_calls=False), 1),
    ("named search", dict(tool_choice={"type": "function", "function": {"name": "search"}}), 1),
]


def main():
    g = gemma_path()
    if not os.path.exists(g):
        fixtures.missing(g, "bash scripts/fetch-model.sh")  # 77, or a failure under CI=true
    try:
        import jsonschema
        import openai
    except ImportError as e:
        print("skip: %s (pip install jsonschema openai)" % e)
        return 77
    cli = require_cli()
    if cli is None:
        return 1
    r = Runner()
    srv = Server(cli, g, "-c", "2048").start()
    client = openai.OpenAI(base_url=srv.base() + "/v1", api_key="x", max_retries=0, timeout=600)

    def check(ch, n_want, only):
        assert ch.finish_reason == "tool_calls", ch
        calls = ch.message.tool_calls or []
        assert calls and (n_want is None or len(calls) == n_want), ch.message
        assert ch.message.content is None, ch.message
        for tc in calls:
            assert tc.type == "function" and tc.id.startswith("call_"), tc
            assert tc.function.name in SCHEMAS and (only is None or tc.function.name == only), tc
            jsonschema.validate(json.loads(tc.function.arguments), SCHEMAS[tc.function.name])
        return len(calls)

    for label, kw, n_want in MODES:
        only = kw["tool_choice"]["function"]["name"] if isinstance(kw["tool_choice"], dict) else None

        def run(kw=kw, n_want=n_want, only=only, label=label):
            ok = bad = calls = toks = 0
            t0 = time.time()
            fails = []
            for temp in TEMPS:
                for seed in SEEDS:
                    c = client.chat.completions.create(model="m", messages=MSGS, tools=TOOLS, seed=seed,
                                                       temperature=temp, max_tokens=MAX_TOKENS, **kw)
                    toks += c.usage.completion_tokens
                    try:
                        calls += check(c.choices[0], n_want, only)
                        ok += 1
                    except (AssertionError, ValueError, jsonschema.ValidationError) as e:
                        bad += 1
                        fails.append((seed, temp, c.choices[0].finish_reason, str(e)[:200]))
            print("  %s: %d/%d replies end in tool_calls with valid arguments (%d calls, %d tokens, %.1f s)"
                  % (label, ok, ok + bad, calls, toks, time.time() - t0))
            assert not fails, fails
        r.run("gemma: %s -> every reply ends at its call(s)" % label, run)

        def streamed(kw=kw):
            args = dict(model="m", messages=MSGS, tools=TOOLS, seed=5, temperature=0.7, max_tokens=MAX_TOKENS, **kw)
            whole = client.chat.completions.create(**args).choices[0]
            calls, finish = {}, None
            for chunk in client.chat.completions.create(stream=True, **args):
                if not chunk.choices:
                    continue
                finish = chunk.choices[0].finish_reason or finish
                for tc in chunk.choices[0].delta.tool_calls or []:
                    if tc.function.name:
                        calls[tc.index] = [tc.function.name, tc.function.arguments or ""]
                    else:
                        calls[tc.index][1] += tc.function.arguments
            got = [calls[i] for i in sorted(calls)]
            want = [[tc.function.name, tc.function.arguments] for tc in whole.message.tool_calls]
            assert finish == "tool_calls" == whole.finish_reason and got == want, (got, want, finish)
        r.run("gemma: %s streamed = non-streamed, finish tool_calls" % label, streamed)

    def clean_exit():
        code = srv.interrupt()
        assert code == 0, "exit %s" % code
        assert not any(mk in srv.stderr() for mk in SANITIZER_MARKERS), srv.stderr()[-2000:]
    r.run("gemma server exits 0", clean_exit)
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
