#!/usr/bin/env python3
"""`edgellm serve` on a mixture-of-experts model: expert residency over HTTP.

Starts `edgellm serve` ($EL_CLI_PATH) on tiny-qwen3moe-Q8_0 twice — all
experts resident, and --expert-budget 30% — and checks:

  /metrics carries edgellm_expert_{hits,misses,faulted_bytes,releases}_total,
    _hit_rate, _faulted_bytes_per_token, _resident/_budget/_total_bytes;
    after a completion, hits + misses = n_layer · n_used per evaluated token
    at most and at least n_used per layer per generated token; the counters
    only grow; at 30 % the budget gauge is 30 % of the total, resident stays
    within it and releases happen; at 100 % nothing is released;
  the same greedy request gives the same text under both budgets
    (residency never changes a number);
  serve --expert-budget below one token's experts exits non-zero naming it,
    and on a dense model says it has no routed experts.

Exit status: 0 all passed, 1 something failed, 77 skipped (no reference model).
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import serve_refused  # noqa: E402
from test_server import post, request, require_setup, Runner, Server  # noqa: E402

MODEL = "tiny-qwen3moe-Q8_0.gguf"
N_LAYER, N_USED, N_EXPERT = 4, 4, 16


class Ctx:
    pass


def metrics(port):
    st, _, b = request(port, "GET", "/metrics")
    assert st == 200, st
    out = {}
    for line in b.decode().splitlines():
        m = re.match(r"^(edgellm_expert_\w+) ([0-9.eE+-]+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def complete(port):
    st, _, b = post(port, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0,
                                              "ignore_eos": True})
    assert st == 200, (st, b[:300])
    j = json.loads(b)
    return j["choices"][0]["text"], j["usage"]


def t_metrics(ctx, srv, pct):
    m0 = metrics(srv.port)
    for k in ("hits_total", "misses_total", "hit_rate", "faulted_bytes_total", "faulted_bytes_per_token",
              "releases_total", "resident_bytes", "budget_bytes", "total_bytes"):
        assert "edgellm_expert_" + k in m0, k
    text, usage = complete(srv.port)
    ctx.text[pct] = text
    m1 = metrics(srv.port)
    uses = (m1["edgellm_expert_hits_total"] + m1["edgellm_expert_misses_total"]) - \
           (m0["edgellm_expert_hits_total"] + m0["edgellm_expert_misses_total"])
    gen, prompt = usage["completion_tokens"], usage["prompt_tokens"]
    # decode steps: exactly n_used per layer each; the prefill between n_used and n_expert per layer
    lo = N_LAYER * N_USED * (gen - 1) + N_LAYER * N_USED
    hi = N_LAYER * N_USED * (gen - 1) + N_LAYER * min(N_EXPERT, N_USED * prompt)
    assert lo <= uses <= hi, (uses, lo, hi, usage)
    for k in ("hits_total", "misses_total", "faulted_bytes_total", "releases_total"):
        assert m1["edgellm_expert_" + k] >= m0["edgellm_expert_" + k], k
    total, budget = m1["edgellm_expert_total_bytes"], m1["edgellm_expert_budget_bytes"]
    assert m1["edgellm_expert_resident_bytes"] <= budget
    assert m1["edgellm_expert_faulted_bytes_per_token"] > 0
    if pct == 100:
        assert budget == total and m1["edgellm_expert_releases_total"] == 0, m1
    else:
        assert abs(budget - total * pct / 100) <= 1, (budget, total)
        assert m1["edgellm_expert_releases_total"] > 0, m1


def t_same_text(ctx):
    assert ctx.text[100] == ctx.text[30], ctx.text


def t_refused(ctx):
    r = serve_refused(ctx.cli, ctx.model, "--expert-budget", "1MiB")
    assert r.returncode != 0 and "below one token's experts" in r.stderr, (r.returncode, r.stderr[-500:])
    dense = os.path.join(os.path.dirname(ctx.model), "tiny-llama-Q8_0.gguf")
    r = serve_refused(ctx.cli, dense, "--expert-budget", "50%")
    assert r.returncode != 0 and "no routed experts" in r.stderr, (r.returncode, r.stderr[-500:])


def main():
    cli, model = require_setup(MODEL, need_openai=False)
    if cli is None:
        return model
    ctx = Ctx()
    ctx.cli, ctx.model, ctx.text = cli, model, {}
    common = ("-c", "128", "-t", "1")
    full = Server(cli, model, *common)
    part = Server(cli, model, "--expert-budget", "30%", *common)
    R = Runner()
    try:
        if not all(R.run("start server " + n, s.start) for n, s in (("all resident", full), ("30 %", part))):
            return R.finish()
        R.run("/metrics experts, all resident", t_metrics, ctx, full, 100)
        R.run("/metrics experts, --expert-budget 30%", t_metrics, ctx, part, 30)
        R.run("same greedy text under both budgets", t_same_text, ctx)
        R.run("refused budgets", t_refused, ctx)
    finally:
        full.kill()
        part.kill()
    return R.finish()


if __name__ == "__main__":
    sys.exit(main())
