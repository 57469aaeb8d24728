#!/usr/bin/env python3
"""`edgellm run --route` and `edgellm chat --route` (issue 18 item 1, "and
run/chat with --route"), end to end.

"The cloud" is a real `edgellm serve` on loopback (tiny llama reference
model); faults come from harness.py's fault server (503, a stream cut
mid-way) and from killing the cloud. The device's temperature comes from a
sensor file (--thermal-source). Checks:
  - cloud: `run --route` streams the cloud's completion to stdout, equal to
    the cloud's own /v1/completions answer (greedy); --json gives the same
    text in {"cloud":true,...} lines and a final object with "source":
    "cloud" and the route; the route is printed on stderr;
  - local: the same output as a plain `run`, the route (local_preferred)
    on stderr and in the --json final object;
  - declined (hot + private; unknown class; with_consent without consent;
    model missing + private): exit 4, nothing on stdout, why and what to do
    on stderr, and the cloud's request counter does not move;
  - model missing + public: the cloud answers; with_consent + --consent:
    the cloud;
  - `chat --route`: each turn goes to the cloud with the whole history and
    equals the cloud's own /v1/chat/completions answer to that history;
  - typed failures, nothing local, nothing spliced: the cloud killed
    (cloud_unreachable), answering 503 (cloud_http_error), a stream cut
    mid-way (cloud_stream_broken: the partial text, then the error, and no
    local text after it);
  - usage: routing flags without --route are refused (exit 2).

Exit status: 0 all passed, 1 something failed, 77 skipped (no reference model).
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import (FaultHandler, cloud_requests, count_unclean_stop, post, require_setup, route_ctx,  # noqa: E402
                     route_policy, Runner, sanitizer_report, serve_in_thread, Server, write_file)

POLICY = route_policy("cli-2026-12-02", 10, thermal={"derate_c": 70, "hot_c": 85, "hysteresis_c": 5})
PROMPT = "Once upon a time"


def run(ctx, *args, model=None, stdin=None, cloud=None, hot=True):
    argv = [ctx.cli, args[0], "-m", model or ctx.model, "--allow-unsigned", "--temp", "0", "-n", "8", "--route",
            "--policy", ctx.policy_path, "--thermal-source", ctx.hot if hot else ctx.cool]
    if cloud is not False:
        argv += ["--cloud-url", cloud or ctx.cloud.base() + "/v1"]
    argv += list(args[1:])
    p = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=120)
    assert not sanitizer_report(p.stderr), p.stderr[-3000:]
    return p.returncode, p.stdout, p.stderr


def direct_completion(ctx, prompt):
    st, _, b = post(ctx.cloud.port, "/v1/completions", {"prompt": prompt, "max_tokens": 8, "temperature": 0})
    assert st == 200, b[:300]
    return json.loads(b)["choices"][0]["text"]


def direct_chat(ctx, msgs):
    st, _, b = post(ctx.cloud.port, "/v1/chat/completions", {"messages": msgs, "max_tokens": 8, "temperature": 0})
    assert st == 200, b[:300]
    return json.loads(b)["choices"][0]["message"]["content"]


def t_cloud_run(ctx):
    want = direct_completion(ctx, PROMPT)
    assert want, "the cloud answered nothing"
    rc, out, err = run(ctx, "run", "-p", PROMPT, "--data-class", "public")
    assert rc == 0, (rc, err)
    assert out == want + "\n", (out, want)
    assert "route source=cloud; reason=thermal_hot; policy=cli-2026-12-02; class=public" in err, err
    rc, out, err = run(ctx, "run", "-p", PROMPT, "--data-class", "public", "--json")
    assert rc == 0, (rc, err)
    lines = [json.loads(x) for x in out.splitlines()]
    text = bytes(b for x in lines[:-1] for b in x["bytes"]).decode()
    assert all(x.get("cloud") for x in lines[:-1]) and text == want, (lines, want)
    fin = lines[-1]
    assert fin["done"] and fin["source"] == "cloud" and fin["route"]["reason"] == "thermal_hot", fin
    assert fin["route"]["legal_basis"] == "contract" and fin["finish"] == "length", fin


def t_local_run(ctx):
    p = subprocess.run([ctx.cli, "run", "-m", ctx.model, "--allow-unsigned", "--temp", "0", "-n", "8", "-p", PROMPT],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    before = cloud_requests(ctx)
    rc, out, err = run(ctx, "run", "-p", PROMPT, "--data-class", "public", hot=False)
    assert rc == 0 and out == p.stdout, (rc, out, p.stdout, err)
    assert "route source=local; reason=local_preferred" in err, err
    rc, out, err = run(ctx, "run", "-p", PROMPT, "--json", hot=False)  # no class: the strictest, local
    fin = json.loads(out.splitlines()[-1])
    assert rc == 0 and fin["route"]["source"] == "local" and fin["route"]["reason"] == "local_only_class", fin
    assert fin["route"]["data_class"] == "private" and fin["n_generated"] == 8, fin
    assert cloud_requests(ctx) == before


def t_declined(ctx):
    before = cloud_requests(ctx)
    cases = [
        (("--data-class", "private"), "thermal_hot", "retry later", None),
        ((), "thermal_hot", "retry later", None),                       # no class: the strictest
        (("--data-class", "medical"), "unknown_data_class", "private, ask, public", None),
        (("--data-class", "Bad Name"), "unknown_data_class", "send one of", None),
        (("--data-class", "ask"), "thermal_hot", "consent", None),     # with_consent, none given
        (("--data-class", "private"), "model_unavailable", "install", "/nonexistent/model.gguf"),
    ]
    for extra, reason, advice, model in cases:
        rc, out, err = run(ctx, "run", "-p", PROMPT, *extra, model=model)
        assert rc == 4, (extra, rc, out, err)
        assert out == "", (extra, out)
        assert "declined (%s)" % reason in err and advice in err, (extra, err)
    rc, out, err = run(ctx, "chat", "--data-class", "private", stdin="hello\n")
    assert rc == 4 and out == "" and "declined (thermal_hot)" in err, (rc, out, err)
    assert cloud_requests(ctx) == before, "a declined request reached the cloud"


def t_cloud_allowed_paths(ctx):
    want = direct_completion(ctx, PROMPT)
    rc, out, err = run(ctx, "run", "-p", PROMPT, "--data-class", "public", model="/nonexistent/model.gguf", hot=False)
    assert rc == 0 and out == want + "\n" and "reason=model_unavailable" in err, (rc, out, err)
    rc, out, err = run(ctx, "run", "-p", PROMPT, "--data-class", "ask", "--consent")
    assert rc == 0 and out == want + "\n" and "source=cloud" in err, (rc, out, err)


def t_chat_cloud(ctx):
    turns = ["Tell me about the sea.", "And the sky?"]
    rc, out, err = run(ctx, "chat", "-sys", "Be brief.", "--data-class", "public", stdin="\n".join(turns) + "\n")
    assert rc == 0, (rc, err)
    msgs = [{"role": "system", "content": "Be brief."}]
    want = ""
    for t in turns:
        msgs.append({"role": "user", "content": t})
        reply = direct_chat(ctx, msgs)
        msgs.append({"role": "assistant", "content": reply})
        want += reply + "\n"
    assert out == want, (out, want)
    assert "edgellm chat: route source=cloud; reason=thermal_hot" in err, err


def t_faults(ctx):
    # 503 and a cut stream, from the fault server
    rc, out, err = run(ctx, "run", "-p", PROMPT, "--data-class", "public", cloud=ctx.fault + "/e503/v1")
    assert rc == 1 and out == "" and "cloud_error (cloud_http_error)" in err and "nothing ran locally" in err, (rc, out, err)
    rc, out, err = run(ctx, "chat", "--data-class", "public", cloud=ctx.fault + "/cut/v1", stdin="hi\n")
    assert rc == 1 and "cloud_error (cloud_stream_broken)" in err, (rc, out, err)
    assert out == "partial\n", out  # what the cloud sent, then the typed failure: no local text spliced after it
    # the cloud killed
    ctx.dead = Server(ctx.cli, ctx.model, "-c", "256").start()
    url = ctx.dead.base() + "/v1"
    ctx.dead.kill()
    rc, out, err = run(ctx, "run", "-p", PROMPT, "--data-class", "public", cloud=url)
    assert rc == 1 and out == "" and "cloud_error (cloud_unreachable)" in err and "nothing ran locally" in err, (rc, out, err)
    # no cloud configured: public + hot is declined, not run locally
    rc, out, err = run(ctx, "run", "-p", PROMPT, "--data-class", "public", cloud=False)
    assert rc == 4 and "no cloud is configured" in err, (rc, out, err)


def t_usage(ctx):
    for extra in (["--data-class", "public"], ["--consent"], ["--policy", ctx.policy_path],
                  ["--cloud-url", "http://127.0.0.1:1/v1"], ["--thermal-source", ctx.hot]):
        p = subprocess.run([ctx.cli, "run", "-m", ctx.model, "--allow-unsigned", "-p", "x", *extra],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and "need --route" in p.stderr, (extra, p.returncode, p.stderr)


def main():
    cli, model = require_setup("tiny-llama-Q4_K_M.gguf", need_openai=False)
    if cli is None:
        return model
    ctx = route_ctx(cli, model, "el_runroute_", POLICY)
    ctx.hot = write_file(os.path.join(ctx.tmp, "hot"), "90000\n")
    ctx.cool = write_file(os.path.join(ctx.tmp, "cool"), "40000\n")
    fault = serve_in_thread(FaultHandler)
    ctx.fault = "http://127.0.0.1:%d" % fault.server_address[1]
    ctx.cloud = Server(cli, model, "-c", "512").start()
    ctx.dead = None
    r = Runner()
    try:
        r.run("run --route: the cloud's completion streamed", t_cloud_run, ctx)
        r.run("run --route: local as a plain run", t_local_run, ctx)
        r.run("declined: exit 4, why, nothing sent", t_declined, ctx)
        r.run("model missing / consent: the cloud", t_cloud_allowed_paths, ctx)
        r.run("chat --route: every turn in the cloud", t_chat_cloud, ctx)
        r.run("cloud 503 / cut / killed: typed, nothing local", t_faults, ctx)
        r.run("routing flags need --route", t_usage, ctx)
        count_unclean_stop(r, ctx.cloud, "cloud clean exit")
    finally:
        ctx.cloud.kill()
        if ctx.dead:
            ctx.dead.kill()
        fault.shutdown()
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
