#!/usr/bin/env python3
"""Structured output (issue 17): JSON Schema / GBNF constrained decoding.

On the tiny llama reference model (random weights: it never "wants" to
write JSON, so every structural token comes from the grammar) through
`edgellm serve` and the `openai` client:
  - response_format json_schema (strict) over 12 seeds x 4 temperatures
    (0, 0.7, 1.0, 1.5), top_p 1 and 0.9: every reply parses and validates
    with the `jsonschema` package and finishes with "stop" (the schema is
    finite, so the grammar must reach its end within max_tokens);
  - the same streamed: the concatenated deltas validate;
  - response_format json_object: a JSON object; a nested/recursive schema
    ($defs + $ref, anyOf, enums, integer ranges, patterns, optional
    properties) on /v1/completions;
  - llama-server's /completion with "json_schema" and with "grammar" (GBNF),
    top_k 40 and min_p (the native defaults), many seeds;
  - a server with --spec ngram gives the plain server's greedy text under a
    grammar;
  - bad input answers 400 naming the field: an invalid schema (with the
    JSON path), invalid GBNF (with line and column), grammar and json_schema
    together, an unknown response_format type;
  - CLI: `run --json-schema @file` validates, `--grammar-file` with a syntax
    error exits 1 naming line:column, two of the flags exit 2;
  - every server exits 0 on SIGINT with no sanitizer report.

Exit status: 0 all passed, 1 something failed, 77 skipped (no reference
model, no `openai` or `jsonschema` package).
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_server import post, require_setup, Runner, SANITIZER_MARKERS, Server, sse_events  # noqa: E402

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "role": {"enum": ["admin", "user", "guest"]},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{1,6}$"}, "maxItems": 3},
        "score": {"type": "number", "minimum": -5, "maximum": 5},
        "active": {"type": "boolean"},
        "id": {"type": "string", "format": "uuid"},
    },
    "required": ["name", "age", "role"],
    "additionalProperties": False,
}

TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "v": {"type": "integer", "exclusiveMinimum": -10, "maximum": 99999},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2},
                "note": {"anyOf": [{"type": "null"}, {"const": "leaf"}]},
            },
            "required": ["v"],
            "additionalProperties": False,
        }
    },
    "type": "object",
    "properties": {"root": {"$ref": "#/$defs/node"}, "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"}},
    "required": ["root", "code"],
    "additionalProperties": False,
}

GBNF = 'root ::= "{\\"ok\\": " ("true" | "false") ", \\"n\\": " [1-9] [0-9]{0,2} "}"\n'


def main():
    cli, model = require_setup("tiny-llama-Q8_0.gguf")
    if cli is None:
        return model
    try:
        import jsonschema
        import openai
    except ImportError as e:
        print("skip: %s (pip install jsonschema openai)" % e)
        return 77
    r = Runner()
    srv = Server(cli, model, "-c", "1024").start()
    spec = Server(cli, model, "-c", "1024", "--spec", "ngram", "--draft-max", "4", "--spec-fixed").start()
    client = openai.OpenAI(base_url=srv.base() + "/v1", api_key="x", max_retries=0, timeout=300)

    def chat_schema(schema, seed, temp, top_p, stream=False):
        rf = {"type": "json_schema", "json_schema": {"name": "t", "schema": schema, "strict": True}}
        msgs = [{"role": "user", "content": "Describe someone as JSON."}]
        if stream:
            text, finish = "", None
            for ch in client.chat.completions.create(model="m", messages=msgs, response_format=rf, seed=seed,
                                                     temperature=temp, top_p=top_p, max_tokens=600, stream=True):
                if ch.choices:
                    text += ch.choices[0].delta.content or ""
                    finish = ch.choices[0].finish_reason or finish
            return text, finish
        c = client.chat.completions.create(model="m", messages=msgs, response_format=rf, seed=seed, temperature=temp,
                                           top_p=top_p, max_tokens=600)
        return c.choices[0].message.content, c.choices[0].finish_reason

    def many_seeds():
        n = 0
        for temp in (0.0, 0.7, 1.0, 1.5):
            for seed in range(12):
                top_p = 0.9 if seed % 3 == 2 else 1.0
                text, finish = chat_schema(PERSON, seed, temp, top_p)
                assert finish == "stop", "seed %d temp %g: finish %s, text %r" % (seed, temp, finish, text)
                doc = json.loads(text)
                jsonschema.validate(doc, PERSON)
                n += 1
        print("  %d chat replies validated" % n)
    r.run("chat json_schema: 48 seeds x temperatures validate", many_seeds)

    def streamed():
        for seed in range(6):
            text, finish = chat_schema(PERSON, 100 + seed, 1.0, 1.0, stream=True)
            assert finish == "stop", (finish, text)
            jsonschema.validate(json.loads(text), PERSON)
    r.run("chat json_schema streamed validates", streamed)

    def json_object():
        for seed in range(6):
            c = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], seed=seed,
                                               temperature=1.0, max_tokens=300, response_format={"type": "json_object"})
            text = c.choices[0].message.content
            if c.choices[0].finish_reason == "stop":
                assert isinstance(json.loads(text), dict), text
            else:  # an unbounded object may run out of tokens: still a prefix of one
                assert text.lstrip().startswith("{"), text
    r.run("chat json_object gives an object", json_object)

    def tree_completions():
        for seed in range(10):
            c = client.completions.create(model="m", prompt="Tree:", seed=seed, temperature=0.9, max_tokens=700,
                                          extra_body={"response_format": {"type": "json_schema",
                                                                          "json_schema": {"schema": TREE}}})
            text = c.choices[0].text
            if c.choices[0].finish_reason == "stop":
                jsonschema.validate(json.loads(text), TREE)
            else:  # recursion is unbounded: a cut tree must still be a valid prefix (checked by the grammar)
                assert text.startswith("{"), text
    r.run("completions recursive schema validates", tree_completions)

    def native():
        for seed in range(10):
            body = {"prompt": "JSON:", "n_predict": 600, "seed": seed, "json_schema": PERSON, "cache_prompt": False}
            st, _, data = post(srv.port, "/completion", json.dumps(body).encode())
            assert st == 200, (st, data[:300])
            j = json.loads(data)
            assert j.get("stop_type") in ("eos", None) or j.get("stopped_eos"), j
            jsonschema.validate(json.loads(j["content"]), PERSON)
            body = {"prompt": "x", "n_predict": 50, "seed": seed, "grammar": GBNF, "temperature": 1.2}
            st, _, data = post(srv.port, "/completion", json.dumps(body).encode())
            assert st == 200, (st, data[:300])
            doc = json.loads(json.loads(data)["content"])
            assert set(doc) == {"ok", "n"} and 1 <= doc["n"] <= 999, doc
    r.run("/completion json_schema and grammar", native)

    def with_spec():
        for seed in range(3):
            body = {"model": "m", "prompt": "Person:", "max_tokens": 300, "temperature": 0,
                    "response_format": {"type": "json_schema", "json_schema": {"schema": PERSON}}}
            a = json.loads(post(srv.port, "/v1/completions", json.dumps(body).encode())[2])
            b = json.loads(post(spec.port, "/v1/completions", json.dumps(body).encode())[2])
            assert a["choices"][0]["text"] == b["choices"][0]["text"], (a, b)
            jsonschema.validate(json.loads(b["choices"][0]["text"]), PERSON)
            body["prompt"] += " again" * (seed + 1)
    r.run("--spec ngram under a grammar: same greedy text", with_spec)

    def bad_input():
        cases = [
            ({"model": "m", "messages": [{"role": "user", "content": "x"}],
              "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object", "properties": {
                  "a": {"type": "strng"}}}}}}, "/v1/chat/completions", "/a: unknown type"),
            ({"model": "m", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "yaml"}},
             "/v1/chat/completions", "not supported"),
            ({"model": "m", "messages": [{"role": "user", "content": "x"}], "response_format": "json"},
             "/v1/chat/completions", "response_format"),
            ({"prompt": "x", "grammar": "root ::= \"a\"\nfoo ::= (\"b\"\n"}, "/completion", "line 2, column 9"),
            ({"prompt": "x", "grammar": "root ::= [a", "json_schema": {}}, "/completion", "not both"),
            ({"prompt": "x", "grammar": "root ::= root \"a\"\n"}, "/completion", "left recursion"),
            ({"prompt": "x", "json_schema": {"type": "integer", "minimum": 3, "maximum": 1}}, "/completion", "no integer"),
        ]
        for body, path, want in cases:
            st, _, data = post(srv.port, path, json.dumps(body).encode())
            assert st == 400 and want in data.decode(), (body, st, data[:400])
    r.run("bad schemas and grammars answer 400 with the place", bad_input)

    def cli_flags():
        with tempfile.TemporaryDirectory() as d:
            sp = os.path.join(d, "s.json")
            with open(sp, "w") as f:
                json.dump(PERSON, f)
            p = subprocess.run([cli, "run", "-m", model, "--allow-unsigned", "-p", "Person:", "-n", "600", "--seed", "5",
                                "--temp", "0.9", "--json-schema", "@" + sp], capture_output=True, text=True, timeout=300)
            assert p.returncode == 0, (p.returncode, p.stderr[-500:])
            jsonschema.validate(json.loads(p.stdout), PERSON)
            gp = os.path.join(d, "g.gbnf")
            with open(gp, "w") as f:
                f.write("root ::= \"a\" | \n  \"b\" x\n")
            p = subprocess.run([cli, "run", "-m", model, "--allow-unsigned", "-p", "x", "--grammar-file", gp],
                               capture_output=True, text=True, timeout=60)
            assert p.returncode == 1 and "line 2, column 7: undefined rule 'x'" in p.stderr, (p.returncode, p.stderr)
            p = subprocess.run([cli, "run", "-m", model, "--allow-unsigned", "-p", "x", "--grammar", "root ::= \"a\"",
                                "--json-schema", "{}"], capture_output=True, text=True, timeout=60)
            assert p.returncode == 2, (p.returncode, p.stderr)
            p = subprocess.run([cli, "run", "-m", model, "--allow-unsigned", "-p", "x", "-n", "20", "--grammar",
                                "root ::= [0-9]{3} \"-\" [a-c]+"], capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, p.stderr[-300:]
            out = p.stdout.strip()
            assert len(out) >= 5 and out[:3].isdigit() and out[3] == "-" and set(out[4:]) <= set("abc"), out
    r.run("CLI --json-schema @file, --grammar-file errors, exclusive flags", cli_flags)

    def clean_exit(s):
        code = s.interrupt()
        assert code == 0, "exit %s" % code
        assert not any(mk in s.stderr() for mk in SANITIZER_MARKERS), s.stderr()[-2000:]
    r.run("server exits 0", clean_exit, srv)
    r.run("speculative server exits 0", clean_exit, spec)
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
