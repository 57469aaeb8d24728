#!/usr/bin/env python3
"""`edgellm serve --spec ngram`: speculative decoding in the server (issue 14).

Two servers on the tiny llama reference model, one plain and one with
n-gram speculation (fixed γ = 4, so every round verifies a draft); the same
greedy requests — /v1/completions, /v1/chat/completions, llama-server's
/completion, streamed and not — give the same text and token counts from
both, on a prompt that copies itself (drafts accepted) and one that does
not; the speculative server's /metrics count drafted and accepted tokens
(accepted <= drafted, both > 0 after the copy prompt), the plain one's stay
0; bad flags (`--draft-max 0`, `--spec bogus`) exit 2 before listening;
both servers exit 0 on SIGINT with no sanitizer report.
With a draft model (`--draft-model`, tiny-llama-Q4_0 drafting for the Q8_0
target, 2 slots, each with its own draft session): the same texts as the
plain server on every route, drafts counted in /metrics; a draft with
another tokenizer (tiny-qwen2) or a larger draft (F16) makes serve exit
before listening with the reason.

Exit status: 0 all passed, 1 something failed, 77 skipped (no reference model).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import (assert_clean_stop, metrics, post, require_setup, Runner, serve_refused, Server,  # noqa: E402
                     sse_objects)

COPY = ("def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n\ndef add(a, b):\n"
        "    return a + b\n\ndef add(a, b):\n")
PLAIN = "The weather in the mountains changes quickly, and"


def complete(port, prompt, path="/v1/completions", stream=False):
    if path == "/completion":
        body = {"prompt": prompt, "n_predict": 40, "temperature": 0, "stream": stream, "cache_prompt": False}
    elif path == "/v1/chat/completions":
        body = {"model": "m", "messages": [{"role": "user", "content": prompt}], "max_tokens": 40, "temperature": 0,
                "stream": stream}
    else:
        body = {"model": "m", "prompt": prompt, "max_tokens": 40, "temperature": 0, "stream": stream}
    st, _, data = post(port, path, json.dumps(body).encode())
    assert st == 200, "%s: %d %s" % (path, st, data[:300])
    if stream:
        text = ""
        for j in sse_objects(data):
            if path == "/completion":
                text += j.get("content", "")
            elif path == "/v1/chat/completions":
                text += (j["choices"][0]["delta"].get("content") or "") if j.get("choices") else ""
            else:
                text += j["choices"][0].get("text", "") if j.get("choices") else ""
        return text, None
    j = json.loads(data)
    if path == "/completion":
        return j["content"], j.get("tokens_predicted")
    if path == "/v1/chat/completions":
        return j["choices"][0]["message"]["content"], j["usage"]["completion_tokens"]
    return j["choices"][0]["text"], j["usage"]["completion_tokens"]


def main():
    cli, model = require_setup("tiny-llama-Q8_0.gguf", need_openai=False)
    if cli is None:
        return model
    r = Runner()
    plain = Server(cli, model, "-c", "512").start()
    spec = Server(cli, model, "-c", "512", "--spec", "ngram", "--draft-max", "4", "--spec-fixed").start()
    models = os.path.dirname(model)
    draft = Server(cli, model, "-c", "512", "--parallel", "2", "--draft-model", os.path.join(models, "tiny-llama-Q4_0.gguf"),
                   "--draft-max", "4", "--spec-fixed").start()

    def same(prompt, path, stream):
        a = complete(plain.port, prompt, path, stream)
        b = complete(spec.port, prompt, path, stream)
        assert a == b, "%s stream=%s: plain %r, speculative %r" % (path, stream, a, b)
        assert a[0], "empty output"
        c = complete(draft.port, prompt, path, stream)
        assert a == c, "%s stream=%s: plain %r, draft model %r" % (path, stream, a, c)

    for name, prompt in (("copy", COPY), ("plain", PLAIN)):
        for path in ("/v1/completions", "/v1/chat/completions", "/completion"):
            for stream in (False, True):
                r.run("same text %s %s stream=%s" % (name, path, stream), same, prompt, path, stream)

    def spec_metrics():
        m = metrics(spec.port)
        d, a = m.get("edgellm_spec_drafted_tokens_total", -1), m.get("edgellm_spec_accepted_tokens_total", -1)
        assert d > 0 and 0 < a <= d, "drafted %s accepted %s" % (d, a)
        assert m.get("edgellm_spec_verifications_total", 0) > 0
        rate = m.get("edgellm_spec_acceptance_rate", -1)
        assert abs(rate - a / d) < 1e-5, (rate, a, d)
        p = metrics(plain.port)
        assert p.get("edgellm_spec_drafted_tokens_total") == 0 and p.get("edgellm_spec_verifications_total") == 0, p
    r.run("metrics count drafts", spec_metrics)

    def draft_metrics():
        m = metrics(draft.port)
        d, a = m.get("edgellm_spec_drafted_tokens_total", -1), m.get("edgellm_spec_accepted_tokens_total", -1)
        assert d > 0 and 0 <= a <= d and m.get("edgellm_spec_verifications_total", 0) > 0, m
    r.run("metrics count the draft model's drafts", draft_metrics)

    def bad_drafts():
        for name, want in (("tiny-qwen2-F16.gguf", "tokenizer"), ("tiny-llama-F16.gguf", "larger than the target")):
            p = serve_refused(cli, model, "--draft-model", os.path.join(models, name))
            assert p.returncode != 0 and want in p.stderr, (name, p.returncode, p.stderr[-300:])
    r.run("a foreign or larger draft: serve exits with the reason", bad_drafts)

    def bad_flags():
        for extra in (["--draft-max", "0"], ["--spec", "bogus"], ["--draft-max", "33"]):
            p = serve_refused(cli, model, "--spec", "ngram", *extra)
            assert p.returncode == 2 and p.stderr.strip(), (extra, p.returncode, p.stderr[-300:])
    r.run("bad flags exit 2", bad_flags)

    r.run("plain server exits 0", assert_clean_stop, plain)
    r.run("speculative server exits 0", assert_clean_stop, spec)
    r.run("draft-model server exits 0", assert_clean_stop, draft)
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
