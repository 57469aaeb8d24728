#!/usr/bin/env python3
"""edgellm's /apply-template equals llama-server --jinja's on the real models, byte for byte.

Starts `edgellm serve` ($EL_CLI_PATH) on Gemma 3 270M ($EL_GEMMA_MODEL or
scripts/fetch-model.sh's path) and Qwen2.5-Coder 1.5B Instruct
($EL_QWEN_MODEL, `bash scripts/fetch-model.sh qwen2.5-coder-1.5b`) and POSTs
to /apply-template the request bodies of
tests/tools/gen_server_template_goldens.py (every conversation of
tests/data/jinja/conversations.json: system prompt, several turns, tools
offered, tool calls with their results, reasoning; a final assistant message
to continue, llama-server's prefill; add_generation_prompt false and true),
then compares the "prompt" with llama-server's, committed in
tests/data/jinja/server_goldens.json (the llama.cpp build is named there).
No llama-server is needed here.

Qwen: its own template; every case must be equal. Gemma 3 270M has no
tokenizer.chat_template: llama-server then renders ChatML, a format the
model was not trained on, while edgellm uses its built-in Gemma turns — a
deliberate difference (docs/SERVER.md), checked as such: edgellm's prompt is
Gemma's (<start_of_turn>, no <|im_start|>) and llama-server's is ChatML with
the same message texts.

Exit status: 0 all passed, 1 something failed, 77 skipped (a model missing;
under CI=true that fails).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import fixtures  # noqa: E402
from gen_server_template_goldens import GEMMA, QWEN, OUT, request_bodies  # noqa: E402
from test_server import post, require_cli, Runner, Server  # noqa: E402

PATHS = {"gemma3-270m": os.environ.get("EL_GEMMA_MODEL") or GEMMA,
         "qwen2.5-coder-1.5b": os.environ.get("EL_QWEN_MODEL") or QWEN}
FETCH = {"gemma3-270m": "bash scripts/fetch-model.sh", "qwen2.5-coder-1.5b": "bash scripts/fetch-model.sh qwen2.5-coder-1.5b"}
# the model has no template: llama-server falls back to ChatML, edgellm to the model's family
DELIBERATE = {"gemma3-270m"}


def first_diff(a, b):
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    return "at byte %d: edgellm %r, llama-server %r" % (i, a[max(0, i - 30):i + 40], b[max(0, i - 30):i + 40])


def main():
    gold = json.load(open(OUT, encoding="utf-8"))
    for name in PATHS:
        if not os.path.exists(PATHS[name]):
            fixtures.missing(PATHS[name], FETCH[name])
    cli = require_cli()
    if cli is None:
        return 1
    bodies = {(c, agp): b for c, agp, b in request_bodies()}
    print("goldens: " + gold["llama_server"])
    R = Runner()
    for m in gold["models"]:
        name = m["model"]
        srv = Server(cli, PATHS[name], "-c", "4096", "-t", "2")
        try:
            if not R.run("start %s" % name, srv.start, 300):
                continue

            def check(m=m, name=name, port=srv.port):
                bad = []
                for case in m["cases"]:
                    key = (case["conversation"], case["add_generation_prompt"])
                    st, _, b = post(port, "/apply-template", bodies[key])
                    assert "status" not in case, ("llama-server refused", key, case)
                    assert st == 200, (key, st, b[:300])
                    ours, theirs = json.loads(b)["prompt"], case["prompt"]
                    if name not in DELIBERATE:
                        if ours != theirs:
                            bad.append("%s agp=%s: %s" % (key[0], key[1], first_diff(ours, theirs)))
                        continue
                    # Gemma without a template: edgellm's Gemma turns, llama-server's ChatML, the same texts
                    assert "<start_of_turn>user\n" in ours and "<|im_start|>" not in ours, (key, ours[:200])
                    assert theirs.startswith("<|im_start|>") and "<start_of_turn>" not in theirs, (key, theirs[:200])
                    for msg in bodies[key]["messages"]:
                        text = msg.get("content") or ""
                        if isinstance(text, str) and text.strip() and msg["role"] != "tool":
                            assert text.strip() in ours and text in theirs, (key, text)
                    last = bodies[key]["messages"][-1]
                    tail = last["content"] if last["role"] == "assistant" else ""  # the prefill: continued
                    gp = key[1] or bool(tail)
                    assert ours.endswith("<start_of_turn>model\n" + tail) == gp, (key, ours[-40:])
                    assert theirs.endswith("<|im_start|>assistant\n" + tail) == gp, (key, theirs[-40:])
                assert not bad, "%d of %d differ:\n  %s" % (len(bad), len(m["cases"]), "\n  ".join(bad))
                print("  %s: %d cases %s" % (name, len(m["cases"]),
                                             "as documented (ChatML vs Gemma)" if name in DELIBERATE else "byte-equal"))
            R.run("%s: /apply-template vs llama-server --jinja" % name, check)
        finally:
            srv.kill()
    print("%d passed, %d failed" % (R.passed, R.failed))
    return 1 if R.failed else 0


if __name__ == "__main__":
    sys.exit(main())
