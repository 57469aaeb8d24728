#!/usr/bin/env python3
"""End-to-end tests of `edgellm serve --embeddings` (issue 20, item 5).

Starts `edgellm serve` ($EL_CLI_PATH) on tiny-llama-Q8_0 from
$EL_FIXTURE_DIR/reference/models four times — --pooling mean (--parallel 2),
--pooling last, --embeddings alone (the model names no pooling: none, as
llama-server), and without --embeddings — and checks over real HTTP:

  shapes: /v1/embeddings answers OpenAI's list (object, data[i].index /
     object / embedding of n_embd floats, usage = the input's tokens, the
     request's model echoed); /embeddings and /embedding llama-server's
     native [{index, embedding: [[...]]}], as is /v1/embeddings with
     "content"; pooling none: one unnormalised row per token on the native
     routes, 400 on /v1/embeddings;
  values: the mean and last vectors equal llama.cpp's
     (tests/data/embd-goldens.json) within 1e-3 cosine distance, and pooling
     none's first/last rows too; L2 norm 1 by default, embd_normalize -1
     (raw: not unit, same direction), 1 (taxicab: sum |x| = 1);
  inputs: a batch of strings equals the strings one by one (same floats); a
     token-id array equals its text; arrays of id arrays and mixed
     [ids..., "text"]; base64 decodes to the float list; the openai client
     (which asks for base64) gets the same vectors; dimensions = n_embd
     accepted;
  errors (400 naming the field): [] and "" (empty input), too long (with
     n_prompt_tokens and n_ctx, "too large"), out-of-vocabulary and negative
     ids, wrong types, nested arrays, objects, encoding_format "hex",
     dimensions != n_embd, embd_normalize out of range, malformed JSON;
     without --embeddings all three routes answer 501;
  concurrency: 8 clients at once on 2 slots get the sequential answers; the
     servers stay healthy and exit 0 on SIGINT with no sanitizer report.

Exit status: 0 all passed, 1 something failed, 77 skipped (no reference model
or no `openai` package).
"""
import base64
import json
import math
import os
import struct
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_server import expect_error, post, request, require_setup, Runner, Server  # noqa: E402

MODEL = "tiny-llama-Q8_0.gguf"
GOLDENS = os.path.join(HERE, "..", "data", "embd-goldens.json")
N_CTX = 64
COS_TOL = 1e-3


class Ctx:
    pass


def ok_json(port, path, body):
    st, _, b = post(port, path, body)
    assert st == 200, "%s: status %d: %r" % (path, st, b[:400])
    return json.loads(b)


def l2(v):
    return math.sqrt(sum(x * x for x in v))


def cos_dist(a, b):
    return 1.0 - sum(x * y for x, y in zip(a, b)) / (l2(a) * l2(b))


def goldens(pooling):
    doc = json.load(open(GOLDENS))
    m = [m for m in doc["models"] if m["model"] == MODEL][0]
    return [c for c in m["cases"] if c["pooling"] == pooling]


def tokenize(ctx, text):
    return ok_json(ctx.mean.port, "/tokenize", {"content": text, "add_special": True})["tokens"]


# ---------------------------------------------------------------- shapes and values

def t_oai_shape(ctx):
    j = ok_json(ctx.mean.port, "/v1/embeddings", {"input": "Once upon a time", "model": "my-embedder"})
    assert j["object"] == "list" and j["model"] == "my-embedder", j.keys()
    assert len(j["data"]) == 1 and j["data"][0]["index"] == 0 and j["data"][0]["object"] == "embedding"
    v = j["data"][0]["embedding"]
    assert len(v) == ctx.n_embd == 256 and all(isinstance(x, float) for x in v), len(v)
    n = len(tokenize(ctx, "Once upon a time"))
    assert j["usage"] == {"prompt_tokens": n, "total_tokens": n}, (j["usage"], n)
    assert abs(l2(v) - 1) < 1e-5, l2(v)
    j = ok_json(ctx.mean.port, "/v1/embeddings", {"input": "x"})
    assert j["model"] == MODEL, j["model"]  # no model in the request: the server's id


def t_native_shape(ctx):
    for path in ("/embedding", "/embeddings"):
        j = ok_json(ctx.mean.port, path, {"content": "Once upon a time"})
        assert isinstance(j, list) and len(j) == 1 and j[0]["index"] == 0, (path, str(j)[:200])
        assert len(j[0]["embedding"]) == 1 and len(j[0]["embedding"][0]) == ctx.n_embd, path
        k = ok_json(ctx.mean.port, path, {"input": ["a", "b"]})  # "input" on the native routes: still native
        assert [e["index"] for e in k] == [0, 1], k
    v1 = ok_json(ctx.mean.port, "/v1/embeddings", {"input": "Once upon a time"})["data"][0]["embedding"]
    nat = ok_json(ctx.mean.port, "/embedding", {"content": "Once upon a time"})[0]["embedding"][0]
    assert nat == v1, "native and OpenAI vectors differ"
    j = ok_json(ctx.mean.port, "/v1/embeddings", {"content": "Once upon a time"})  # "content": native shape
    assert isinstance(j, list) and j[0]["embedding"][0] == v1


def t_parity_mean_last(ctx):
    worst = 0.0
    for srv, pooling in ((ctx.mean, "mean"), (ctx.last, "last")):
        for case in goldens(pooling):
            assert tokenize(ctx, case["prompt"]) == case["tokens"], case["prompt"]
            v = ok_json(srv.port, "/v1/embeddings", {"input": case["prompt"]})["data"][0]["embedding"]
            d = cos_dist(v, case["vector"])
            worst = max(worst, d)
            assert d < COS_TOL, (pooling, case["prompt"], d)
            assert abs(l2(v) - 1) < 1e-5
    print("     llama.cpp parity (mean, last): worst cosine distance %.2e" % worst)


def t_pooling_none(ctx):
    case = goldens("none")[0]
    st, _, b = post(ctx.none.port, "/v1/embeddings", {"input": case["prompt"]})
    e = expect_error(st, b, 400, "/v1/embeddings with pooling none")
    assert "not OAI compatible" in e["message"], e
    j = ok_json(ctx.none.port, "/embeddings", {"input": case["prompt"]})
    rows = j[0]["embedding"]
    assert len(rows) == len(case["tokens"]) and all(len(r) == ctx.n_embd for r in rows), len(rows)
    assert cos_dist(rows[0], case["first"]) < COS_TOL and cos_dist(rows[-1], case["last"]) < COS_TOL
    assert abs(l2(rows[-1]) / l2(case["last"]) - 1) < 0.01, "per-token rows are not normalised"
    assert all(abs(l2(r) - 1) > 1e-3 for r in rows), [l2(r) for r in rows]


def t_normalize(ctx):
    text = "The capital of France is Paris"
    unit = ok_json(ctx.mean.port, "/v1/embeddings", {"input": text})["data"][0]["embedding"]
    raw = ok_json(ctx.mean.port, "/v1/embeddings", {"input": text, "embd_normalize": -1})["data"][0]["embedding"]
    assert abs(l2(raw) - 1) > 1e-2 and cos_dist(raw, unit) < 1e-6, (l2(raw), cos_dist(raw, unit))
    scaled = [x / l2(raw) for x in raw]
    assert max(abs(a - b) for a, b in zip(scaled, unit)) < 1e-6
    taxi = ok_json(ctx.mean.port, "/v1/embeddings", {"input": text, "embd_normalize": 1})["data"][0]["embedding"]
    assert abs(sum(abs(x) for x in taxi) - 1) < 1e-4 and cos_dist(taxi, unit) < 1e-6
    mx = ok_json(ctx.mean.port, "/v1/embeddings", {"input": text, "embd_normalize": 0})["data"][0]["embedding"]
    assert abs(max(abs(x) for x in mx) - 32760) < 0.05, max(abs(x) for x in mx)


# ---------------------------------------------------------------- inputs

def t_batch_and_tokens(ctx):
    texts = ["Once upon a time", "Hello world", "The capital of France is Paris"]
    one = [ok_json(ctx.mean.port, "/v1/embeddings", {"input": t})["data"][0]["embedding"] for t in texts]
    j = ok_json(ctx.mean.port, "/v1/embeddings", {"input": texts})
    assert [d["index"] for d in j["data"]] == [0, 1, 2]
    assert [d["embedding"] for d in j["data"]] == one, "a batch differs from the inputs one by one"
    ids = [tokenize(ctx, t) for t in texts]
    assert j["usage"]["prompt_tokens"] == sum(len(i) for i in ids), (j["usage"], ids)
    k = ok_json(ctx.mean.port, "/v1/embeddings", {"input": ids[0]})
    assert k["data"][0]["embedding"] == one[0], "token ids differ from their text"
    k = ok_json(ctx.mean.port, "/v1/embeddings", {"input": ids})
    assert [d["embedding"] for d in k["data"]] == one, "arrays of ids differ from their texts"
    # mixed: the ids of "Once upon" then " a time" as text continues the same tokens
    head = tokenize(ctx, "Once upon")
    tail_ids = ids[0][len(head):]
    assert ids[0][:len(head)] == head, (ids[0], head)
    k = ok_json(ctx.mean.port, "/v1/embeddings", {"input": [ids[0][:len(head)] + tail_ids]})
    assert k["data"][0]["embedding"] == one[0]
    k = ok_json(ctx.mean.port, "/v1/embeddings", {"input": [texts[1], ids[2]]})
    assert [d["embedding"] for d in k["data"]] == [one[1], one[2]]
    k = ok_json(ctx.mean.port, "/v1/embeddings", {"input": texts[0], "dimensions": ctx.n_embd})
    assert k["data"][0]["embedding"] == one[0]


def t_base64(ctx):
    text = "Once upon a time"
    f = ok_json(ctx.mean.port, "/v1/embeddings", {"input": text})["data"][0]["embedding"]
    j = ok_json(ctx.mean.port, "/v1/embeddings", {"input": [text, text], "encoding_format": "base64"})
    for d in j["data"]:
        assert d["encoding_format"] == "base64" and isinstance(d["embedding"], str)
        raw = base64.b64decode(d["embedding"])
        assert len(raw) == 4 * ctx.n_embd
        got = list(struct.unpack("<%df" % ctx.n_embd, raw))
        assert got == [struct.unpack("<f", struct.pack("<f", x))[0] for x in f], "base64 != floats"


def t_openai_client(ctx):
    from openai import OpenAI
    client = OpenAI(base_url=ctx.mean.base() + "/v1", api_key="unused")
    texts = ["Once upon a time", "Hello world"]
    want = ok_json(ctx.mean.port, "/v1/embeddings", {"input": texts})["data"]
    r = client.embeddings.create(model="text-embedding-3-small", input=texts)
    assert len(r.data) == 2 and r.model == "text-embedding-3-small"
    for got, w in zip(r.data, want):
        assert max(abs(a - b) for a, b in zip(got.embedding, w["embedding"])) < 1e-7
    r = client.embeddings.create(model="x", input="Once upon a time", encoding_format="float")
    assert len(r.data[0].embedding) == ctx.n_embd


# ---------------------------------------------------------------- errors

def t_errors(ctx):
    p = ctx.mean.port
    long_text = "hello " * 200
    cases = [
        ({"input": []}, "input", "must not be empty"),
        ({"input": ""}, "input", "empty"),
        ({"input": ["ok", ""]}, "input", "input[1] is empty"),
        ({"input": [[]]}, "input", "input[0] is empty"),
        ({"input": [1, 99999999]}, "input", "not in the vocabulary"),
        ({"input": [[5], [-1]]}, "input", "not a token id"),
        ({"input": [1.5]}, "input", "not a token id"),
        ({"input": 5}, "input", "expected"),
        ({"input": True}, "input", "expected"),
        ({"input": [[["a"]]]}, "input", "expected a token id or a string"),
        ({"input": [{"content": [{"type": "text", "text": "x"}]}]}, "input", "not supported"),
        ({"input": {"prompt_string": "x"}}, "input", "not supported"),
        ({"input": "x", "encoding_format": "hex"}, "encoding_format", "float"),
        ({"input": "x", "dimensions": 12}, "dimensions", "256"),
        ({"input": "x", "embd_normalize": 1000}, "embd_normalize", None),
        ({"input": "x", "embd_normalize": "2"}, "embd_normalize", None),
        ({"model": "x"}, "input", "must be provided"),
    ]
    for body, param, needle in cases:
        st, _, b = post(p, "/v1/embeddings", body)
        e = expect_error(st, b, 400, json.dumps(body)[:80])
        assert e.get("param") == param, (body, e)
        assert needle is None or needle in e["message"], (body, e["message"])
    st, _, b = post(p, "/v1/embeddings", {"input": ["short", long_text]})
    e = expect_error(st, b, 400, "too long")
    n = len(tokenize(ctx, long_text))
    assert e["code"] == "context_length_exceeded" and e["n_ctx"] == N_CTX and e["n_prompt_tokens"] == n, e
    assert "too large" in e["message"] and "input[1]" in e["message"], e
    st, _, b = post(p, "/v1/embeddings", b'{"input": "x"')
    expect_error(st, b, 400, "malformed JSON")
    st, _, b = post(p, "/v1/embeddings", b'{"input": "x", "input": "y"}')
    expect_error(st, b, 400, "duplicate key")
    # at the context exactly: fine
    ids = tokenize(ctx, "hello")[:1] * N_CTX
    j = ok_json(p, "/v1/embeddings", {"input": ids})
    assert j["usage"]["prompt_tokens"] == N_CTX


def t_not_enabled(ctx):
    for path in ("/v1/embeddings", "/embeddings", "/embedding"):
        st, _, b = post(ctx.off.port, path, {"input": "hello"})
        e = expect_error(st, b, 501, path)
        assert "--embeddings" in e["message"] and e["type"] == "not_supported_error", e


def t_concurrent(ctx):
    texts = ["text number %d about the sea" % i for i in range(8)]
    want = [ok_json(ctx.mean.port, "/v1/embeddings", {"input": t})["data"][0]["embedding"] for t in texts]
    got = [None] * len(texts)
    errs = []

    def go(i):
        try:
            got[i] = ok_json(ctx.mean.port, "/v1/embeddings", {"input": texts[i]})["data"][0]["embedding"]
        except Exception as e:  # noqa: BLE001
            errs.append(repr(e))
    th = [threading.Thread(target=go, args=(i,)) for i in range(len(texts))]
    for t in th:
        t.start()
    for t in th:
        t.join(120)
    assert not errs, errs
    assert got == want, "concurrent answers differ from sequential ones"
    # generation on the same slots still works after embeddings (session reset)
    j = ok_json(ctx.mean.port, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0})
    assert j["usage"]["completion_tokens"] == 4


def t_health_and_exit(ctx):
    for srv in (ctx.mean, ctx.last, ctx.none, ctx.off):
        st, _, _ = request(srv.port, "GET", "/health")
        assert st == 200
        code = srv.interrupt()
        assert code == 0, "exit %r:\n%s" % (code, srv.stderr()[-2000:])
        for m in ("LeakSanitizer", "ERROR: AddressSanitizer", "runtime error:"):
            assert m not in srv.stderr(), srv.stderr()[-3000:]


def main():
    cli, model = require_setup(MODEL)
    if cli is None:
        return model
    ctx = Ctx()
    ctx.n_embd = 256
    common = ("-c", str(N_CTX), "-t", "1")
    ctx.mean = Server(cli, model, "--embeddings", "--pooling", "mean", "--parallel", "2", *common)
    ctx.last = Server(cli, model, "--embeddings", "--pooling", "last", *common)
    ctx.none = Server(cli, model, "--embeddings", *common)
    ctx.off = Server(cli, model, *common)
    R = Runner()
    try:
        started = all(R.run("start server " + name, srv.start) for name, srv in
                      (("--pooling mean", ctx.mean), ("--pooling last", ctx.last),
                       ("--embeddings (model default: none)", ctx.none), ("without --embeddings", ctx.off)))
        if not started:
            return R.finish()
        for name, fn in [("/v1/embeddings shape, usage, model", t_oai_shape),
                         ("native /embedding, /embeddings shape", t_native_shape),
                         ("mean, last = llama.cpp's (goldens)", t_parity_mean_last),
                         ("pooling none: rows, 400 on /v1", t_pooling_none),
                         ("embd_normalize -1, 0, 1, 2", t_normalize),
                         ("batch and token-id inputs", t_batch_and_tokens),
                         ("encoding_format base64", t_base64),
                         ("openai client", t_openai_client),
                         ("bad input: 400 naming the field", t_errors),
                         ("without --embeddings: 501", t_not_enabled),
                         ("concurrent requests on 2 slots", t_concurrent),
                         ("healthy; SIGINT exits 0", t_health_and_exit)]:
            R.run(name, fn, ctx)
    finally:
        for srv in (ctx.mean, ctx.last, ctx.none, ctx.off):
            srv.kill()
    return R.finish()


if __name__ == "__main__":
    sys.exit(main())
