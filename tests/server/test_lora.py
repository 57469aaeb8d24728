#!/usr/bin/env python3
"""End-to-end tests of LoRA adapters in `edgellm serve` (issue 15, item 3-4).

Starts `edgellm serve` ($EL_CLI_PATH) on tiny-llama-F16 from
$EL_FIXTURE_DIR/reference/models with three random adapters of rank 8 made by
tests/tools/gen_lora.py (a, b, c; 626,560 bytes each), registered as
--lora a=A --lora b=B:0 --lora c=C:0 with --lora-budget for two of them and
two slots, and checks over real HTTP:

  list/defaults: GET /lora-adapters has llama-server's fields (id, path,
    scale = the default) and edgellm's (name, sha256, bytes, resident, refs,
    loads, evictions); nothing is resident before a request uses it;
    POST /lora-adapters [{"id","scale"}] sets the defaults (ids not named: 0)
    and a request without "lora" then runs with them;
  per request: "lora": [{"id","scale"}] picks adapters (others 0); greedy
    replies with a, b, c and none differ from each other and are each
    reproducible; scale 0 equals no adapter; the reply's system_fingerprint
    is the server's plus "+lora-<8 hex>" exactly when an adapter is active,
    different for another adapter or scale;
  prompt cache: the same prompt alternately with and without an adapter
    (cache_prompt on) gives each its own reply every time (a slot whose
    adapter set changes drops its cache);
  LRU residency: using a, b, then c evicts a (least recently used), then a
    evicts b; /lora-adapters and edgellm_lora_* in /metrics show loads,
    evictions, resident bytes <= the budget;
  hot swap: while a long stream runs with b, other requests load c and a
    (evicting, reloading) on the other slot; the stream finishes, uninterrupted,
    with exactly the tokens it gives alone; b is never evicted while in use
    (a request that would need it evicted is refused with 503 lora_budget_busy
    and Retry-After, a stream with that error event);
    the base model is loaded once (one "loaded" line, same process);
  bad input (400, the server unaffected): an unknown id, a negative scale,
    NaN, a non-array "lora", adapters that together exceed --lora-budget, a
    bad POST /lora-adapters body;
  startup: --lora-budget smaller than an adapter, an adapter for another
    architecture, a truncated adapter, a name given twice, a --mem-budget that
    holds the model and slots but not --lora-budget besides: the server refuses
    to start with why;
  telemetry: request-end events of requests with adapters carry "edgellm.lora" (the fingerprint suffix's
    8 hex digits as a number), the others none; no content.

Exit status: 0 all passed, 1 something failed, 77 skipped.
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from test_server import (expect_error, metrics, post, request, require_setup, Runner, SANITIZER_MARKERS,  # noqa: E402
                         Server, sse_events)

PROMPT = "Once upon a time, there was a little robot who"


class Ctx:
    pass


def gen(base, out, seed, rank=8, extra=()):
    r = subprocess.run([sys.executable, os.path.join(REPO, "tests", "tools", "gen_lora.py"), "adapter", "--base", base,
                        "--out", out, "--rank", str(rank), "--seed", str(seed), *extra],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError("gen_lora.py: " + r.stderr)


def complete(port, prompt=PROMPT, lora=None, n=10, cache=True, ignore_eos=False):
    body = {"prompt": prompt, "n_predict": n, "temperature": 0, "cache_prompt": cache, "return_tokens": True,
            "ignore_eos": ignore_eos}
    if lora is not None:
        body["lora"] = lora
    st, _, b = post(port, "/completion", body, timeout=120)
    assert st == 200, "status %d: %r" % (st, b[:300])
    return json.loads(b)["tokens"]


def chat_fp(port, lora=None):
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0}
    if lora is not None:
        body["lora"] = lora
    st, _, b = post(port, "/v1/chat/completions", body)
    assert st == 200, "status %d: %r" % (st, b[:300])
    return json.loads(b)["system_fingerprint"]


def adapters(port):
    st, _, b = request(port, "GET", "/lora-adapters")
    assert st == 200, st
    return json.loads(b)


def t_list(c):
    a = adapters(c.port)
    assert [e["id"] for e in a] == [0, 1, 2] and [e["name"] for e in a] == ["a", "b", "c"], a
    assert [e["scale"] for e in a] == [1, 0, 0], a
    for e in a:
        for k in ("path", "task_name", "prompt_prefix", "sha256", "bytes", "resident", "refs", "loads", "evictions"):
            assert k in e, (k, e)
        assert e["bytes"] == c.size and not e["resident"] and e["loads"] == 0, e
    assert a[0]["path"] == c.paths[0]


def t_per_request(c):
    p = c.port
    none = complete(p, lora=[{"id": 0, "scale": 0}])
    ta = complete(p, lora=[{"id": 0, "scale": 1}])
    tb = complete(p, lora=[{"id": 1, "scale": 1}])
    tc = complete(p, lora=[{"id": 2, "scale": 1}])
    assert len({tuple(none), tuple(ta), tuple(tb), tuple(tc)}) == 4, (none, ta, tb, tc)
    dflt = complete(p)  # defaults: a at 1
    assert dflt == ta, (dflt, ta)
    assert complete(p, lora=[{"id": 1, "scale": 1}]) == tb
    assert complete(p, lora=[{"id": 0, "scale": 0}, {"id": 2, "scale": 0}]) == none
    c.tokens = {"none": none, "a": ta, "b": tb, "c": tc}


def t_fingerprint(c):
    p = c.port
    base = chat_fp(p, [{"id": 0, "scale": 0}])
    assert base.startswith("edgellm-") and "+lora" not in base, base
    fa = chat_fp(p, [{"id": 0, "scale": 1}])
    fa2 = chat_fp(p, [{"id": 0, "scale": 0.5}])
    fb = chat_fp(p, [{"id": 1, "scale": 1}])
    for f in (fa, fa2, fb):
        assert f.startswith(base + "+lora-") and len(f) == len(base) + 14, f
    assert len({fa, fa2, fb}) == 3, (fa, fa2, fb)
    assert chat_fp(p) == fa  # the defaults: a at 1
    # a stream's chunks carry it too
    st, _, b = post(p, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
                                                "stream": True, "lora": [{"id": 1, "scale": 1}]})
    ev = [json.loads(e) for e in sse_events(b) if e != "[DONE]"]
    assert st == 200 and ev and all(e["system_fingerprint"] == fb for e in ev), (st, ev[:2])


def t_prompt_cache(c):
    p = c.port
    for _ in range(2):
        assert complete(p, lora=[{"id": 0, "scale": 0}]) == c.tokens["none"]
        assert complete(p, lora=[{"id": 2, "scale": 1}]) == c.tokens["c"]


def state(port):
    return {e["name"]: e for e in adapters(port)}


def t_lru(c):
    p = c.port
    complete(p, lora=[{"id": 0, "scale": 1}], n=2)
    complete(p, lora=[{"id": 1, "scale": 1}], n=2)
    s0 = state(p)
    assert s0["a"]["resident"] and s0["b"]["resident"] and not s0["c"]["resident"], s0
    m0 = metrics(p)
    complete(p, lora=[{"id": 2, "scale": 1}], n=2)  # c: a is the least recently used
    s1 = state(p)
    assert not s1["a"]["resident"] and s1["b"]["resident"] and s1["c"]["resident"], s1
    assert s1["a"]["evictions"] == s0["a"]["evictions"] + 1
    complete(p, lora=[{"id": 0, "scale": 1}], n=2)  # a again: b is now the least recently used
    s2 = state(p)
    assert s2["a"]["resident"] and not s2["b"]["resident"] and s2["c"]["resident"], s2
    assert s2["a"]["loads"] == s1["a"]["loads"] + 1
    m1 = metrics(p)
    assert m1["edgellm_lora_evictions_total"] == m0["edgellm_lora_evictions_total"] + 2, (m0, m1)
    assert m1["edgellm_lora_loads_total"] == m0["edgellm_lora_loads_total"] + 2
    assert m1["edgellm_lora_resident"] == 2 and m1["edgellm_lora_resident_bytes"] == 2 * c.size
    assert m1["edgellm_lora_resident_bytes"] <= m1["edgellm_lora_budget_bytes"] == c.budget
    assert m1["edgellm_lora_adapters"] == 3
    c.planned = m1["edgellm_memory_planned_bytes"]


def t_hot_swap(c):
    p = c.port
    n_long = 1000
    alone = complete(p, lora=[{"id": 1, "scale": 1}], n=n_long, cache=False, ignore_eos=True)
    assert len(alone) == n_long
    out = {}

    def streamer():
        body = {"prompt": PROMPT, "n_predict": n_long, "temperature": 0, "cache_prompt": False, "stream": True,
                "return_tokens": True, "ignore_eos": True, "lora": [{"id": 1, "scale": 1}]}
        st, _, b = post(p, "/completion", body, timeout=300)
        toks = []
        for e in sse_events(b):
            toks += json.loads(e).get("tokens", [])
        out["st"], out["toks"] = st, toks

    th = threading.Thread(target=streamer)
    th.start()
    deadline = time.time() + 60
    while time.time() < deadline and state(p)["b"]["refs"] == 0:
        time.sleep(0.005)
    assert state(p)["b"]["refs"] == 1, "the stream never held b: %r" % (th.join(60) or out,)
    # while b is held, a request needing a and c together cannot fit the budget: a declared refusal saying why
    # (503 + Retry-After, not a 500: it fits once the stream ends), non-streamed and streamed, b stays
    st, h, b = post(p, "/completion", {"prompt": "x", "n_predict": 2, "lora": [{"id": 0, "scale": 1}, {"id": 2, "scale": 1}]})
    st2, _, b2 = post(p, "/v1/completions", {"prompt": "x", "max_tokens": 2, "stream": True,
                                             "lora": [{"id": 0, "scale": 1}, {"id": 2, "scale": 1}]})
    held = state(p)["b"]["refs"] == 1
    if held:
        e = expect_error(st, b, 503, "a and c while b is held")
        assert e["code"] == "lora_budget_busy" and "held by running requests" in e["message"], e
        assert h.get("retry-after") == "1", h
        ev = [json.loads(x) for x in sse_events(b2) if x != "[DONE]"]
        assert st2 == 200 and ev and ev[-1]["error"]["code"] == 503, (st2, b2[:300])  # llama-server's shape
        assert "held by running requests" in ev[-1]["error"]["message"], ev[-1]
    swaps_during = 0
    while th.is_alive() and swaps_during < 40:  # c then a on the other slot: each load evicts the other, never b
        for idx in (2, 0):
            assert complete(p, lora=[{"id": idx, "scale": 1}], n=2, cache=False) == c.tokens["c" if idx == 2 else "a"][:2]
            s = state(p)
            assert s["b"]["resident"], s
            swaps_during += s["b"]["refs"] == 1
    th.join(300)
    assert out.get("st") == 200 and out["toks"] == alone, (out.get("st"), len(out.get("toks", [])), len(alone))
    assert held and swaps_during >= 2, (held, swaps_during)
    # one model load in this process's life
    loads = [ln for ln in c.srv.lines if "UNSIGNED model" in ln]
    assert len(loads) == 1, loads
    print("     hot swap: %d loads of c/a while the stream held b; the stream's %d tokens equal its run alone"
          % (swaps_during, len(alone)))


def t_concurrent(c):
    p = c.port
    res = {}

    def go(name, idx):
        res[name] = complete(p, lora=[{"id": idx, "scale": 1}], cache=False)

    ts = [threading.Thread(target=go, args=("a", 0)), threading.Thread(target=go, args=("c", 2))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert res.get("a") == c.tokens["a"] and res.get("c") == c.tokens["c"], res


def t_defaults_post(c):
    p = c.port
    st, _, b = post(p, "/lora-adapters", [{"id": 2, "scale": 1}])
    assert st == 200 and json.loads(b) == {"success": True}, (st, b)
    a = adapters(p)
    assert [e["scale"] for e in a] == [0, 0, 1], a
    assert complete(p) == c.tokens["c"]
    st, _, b = post(p, "/lora-adapters", [{"id": 0, "scale": 1}])
    assert st == 200
    assert complete(p) == c.tokens["a"]


def t_bad(c):
    p = c.port
    for body, what in [({"prompt": "x", "lora": [{"id": 3, "scale": 1}]}, "unknown id"),
                       ({"prompt": "x", "lora": [{"id": 0, "scale": -0.5}]}, "negative scale"),
                       ({"prompt": "x", "lora": "a"}, "not an array"),
                       ({"prompt": "x", "lora": [{"scale": 1}]}, "no id"),
                       ({"prompt": "x", "lora": [{"id": -1, "scale": 1}]}, "negative id"),
                       ({"prompt": "x", "lora": [{"id": i, "scale": 1} for i in range(3)]}, "more than the budget")]:
        for path in ("/completion", "/v1/completions"):
            st, _, b = post(p, path, body)
            e = expect_error(st, b, 400, "%s %s" % (path, what))
            assert what != "more than the budget" or "more than --lora-budget" in e["message"], e
    st, _, b = post(p, "/completion", '{"prompt": "x", "lora": [{"id": 0, "scale": NaN}]}')
    expect_error(st, b, 400, "NaN scale")
    for body in ('[{"id": 7, "scale": 1}]', '{"id": 0}', '[{"id": 0, "scale": "x"}]', 'nope'):
        st, _, b = post(p, "/lora-adapters", body)
        expect_error(st, b, 400, "POST /lora-adapters %s" % body)
    assert complete(p, lora=[{"id": 0, "scale": 1}]) == c.tokens["a"]  # unaffected


def t_telemetry(c):
    lines = []
    for name in os.listdir(c.tel):
        with open(os.path.join(c.tel, name), encoding="utf-8") as f:
            lines += [json.loads(x) for x in f if x.strip()]
    ends = [e for e in lines if e.get("event") == "request_end"]
    assert ends, lines[:3]
    with_lora = [e for e in ends if isinstance(e.get("edgellm.lora"), int) and e["edgellm.lora"] > 0]
    without = [e for e in ends if "edgellm.lora" not in e]
    assert with_lora and without, (len(with_lora), len(without))
    assert all(PROMPT not in json.dumps(e) for e in lines)


def refuses(cli, model, *args, want=""):
    srv = Server(cli, model, *args)
    try:
        srv.start(timeout=60)
    except RuntimeError as e:
        assert want in str(e), str(e)[-800:]
        return
    finally:
        srv.kill()
    raise AssertionError("the server started with %r" % (args,))


def t_startup(c):
    cli, model = c.cli, c.model
    refuses(cli, model, "--lora", "a=" + c.paths[0], "--lora-budget", "600000", want="more than --lora-budget")
    refuses(cli, model, "--lora", "q=" + c.qwen_adapter, want="architecture 'qwen2', the model is 'llama'")
    refuses(cli, model, "--lora", "t=" + c.cut, want="t.gguf")
    refuses(cli, model, "--lora", "a=" + c.paths[0], "--lora", "a=" + c.paths[1], want="registered twice")
    # admission counts --lora-budget: the main server's plan less half the budget is refused with the same --lora
    if getattr(c, "planned", 0):
        refuses(cli, model, "-np", "2", "--lora", "a=" + c.paths[0], "--lora-budget", str(c.budget),
                "--mem-budget", str(int(c.planned - c.budget // 2)), want="refused")
        plain = Server(cli, model, "-np", "2", "--mem-budget", str(int(c.planned - c.budget // 2)))
        try:
            plain.start(timeout=60)  # the same budget without adapters: admitted
        finally:
            plain.kill()


def main():
    cli, model = require_setup("tiny-llama-F16.gguf", need_openai=False)
    if cli is None:
        return model
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("skip: numpy is needed to make the adapters (tests/tools/gen_lora.py)")
        return 77
    c = Ctx()
    c.cli, c.model = cli, model
    tmp = tempfile.mkdtemp(prefix="el-lora-srv-")
    c.paths = [os.path.join(tmp, n + ".gguf") for n in "abc"]
    for i, path in enumerate(c.paths):
        gen(model, path, i + 1)
    c.size = os.path.getsize(c.paths[0])
    c.budget = 2 * c.size + 1000
    c.qwen_adapter = os.path.join(tmp, "q.gguf")
    gen(os.path.join(os.path.dirname(model), "tiny-qwen2-F16.gguf"), c.qwen_adapter, 9)
    c.cut = os.path.join(tmp, "t.gguf")
    with open(c.paths[0], "rb") as f, open(c.cut, "wb") as g:
        g.write(f.read()[: c.size // 2])
    c.tel = os.path.join(tmp, "tel")
    c.srv = Server(cli, model, "-np", "2", "--lora", "a=" + c.paths[0], "--lora", "b=%s:0" % c.paths[1],
                   "--lora", "c=%s:0" % c.paths[2], "--lora-budget", str(c.budget), "--telemetry-dir", c.tel)
    r = Runner()
    try:
        c.srv.start()
        c.port = c.srv.port
        r.run("list", t_list, c)
        if r.run("per_request", t_per_request, c):
            r.run("fingerprint", t_fingerprint, c)
            r.run("prompt_cache", t_prompt_cache, c)
            r.run("lru", t_lru, c)
            r.run("hot_swap", t_hot_swap, c)
            r.run("concurrent", t_concurrent, c)
            r.run("defaults_post", t_defaults_post, c)
            r.run("bad_input", t_bad, c)
        code = c.srv.interrupt()
        r.run("telemetry", t_telemetry, c)
        r.run("clean_exit", lambda: (code == 0 and not any(m in c.srv.stderr() for m in SANITIZER_MARKERS))
              or (_ for _ in ()).throw(AssertionError("exit %r\n%s" % (code, c.srv.stderr()[-2000:]))))
        r.run("startup_refusals", t_startup, c)
    finally:
        c.srv.kill()
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
