#!/usr/bin/env python3
"""test_fleet.py — `edgellm fleet`: staged rollout with automatic rollback
on a simulated fleet of real `edgellm serve` processes (docs/FLEET.md).

Every package is a real tiny fixture model (tests/fixtures), signed here
with a fresh key: v1 = tiny-llama F16 on every device; a good v2 =
tiny-llama BF16 (a different file whose greedy output on the canary prompts
is F16's); a drifting v2 = tiny-llama Q2_K (a genuinely different model: its
greedy output differs). Faults are real:
  - crash under load: serve's EL_FAULT_SERVE_CRASH=SHA256:N (set here in the
    fleet's environment, inherited by its devices; a manifest cannot set it)
    makes the process serving the file with that SHA-256 abort() after its
    Nth request: a real SIGABRT death the fleet sees through waitpid;
  - a device killed mid-install: `--fault-kill-install DEV:MS` has the fleet
    SIGKILL that device's `edgellm install` process MS ms after it started;
  - the kill switch: the config's file created while the rollout runs;
  - an expired package: v2 signed with --expires in the past; each device's
    own `edgellm install` refuses it (expiry check).
Each scenario asserts the devices' stores afterwards (`edgellm status`,
which verifies the active version) and that `fleet replay` reproduces the
log's decisions; tampered logs are refused; malformed config and gate files
are refused with their path and member named.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_server import SANITIZER_MARKERS, Runner, require_setup  # noqa: E402

CANARY = ["Hello, my name is", "The capital of France is", "1, 2, 3, 4,"]
TRAFFIC = ["Once upon a time", "The weather today is", "In a small village"]
GATES = {"format": "edgellm-gates/1", "min_crash_free_rate": 1.0, "max_p95_ttft_ms": 60000,
         "max_refusal_rate": 0.0, "min_canary_agreement": 1.0, "max_install_failures": 0}


def fleet_config(tmp, classes, stages, requests=3, kill_switch=None):
    c = {"format": "edgellm-fleet/1", "classes": classes, "stages": stages,
         "traffic": {"requests_per_device": requests, "n_predict": 6, "prompts": TRAFFIC},
         "canary": {"prompts": CANARY, "n_predict": 8}, "ctx": 128}
    if kill_switch:
        c["kill_switch"] = kill_switch
    return c


def small_fleet(n_phone=2, n_box=2):
    return [{"name": "phone", "count": n_phone, "threads": 1, "mem_budget_mib": 256, "temp_mc": 41000},
            {"name": "edge-box", "count": n_box, "threads": 2, "temp_mc": 68000}]


class Ctx:
    def __init__(self, cli, models):
        self.cli = cli
        self.tmp = tempfile.mkdtemp(prefix="el-fleet-")
        self.n = 0
        run = lambda *a: subprocess.run([cli] + list(a), capture_output=True, text=True, timeout=300)  # noqa: E731
        r = run("keygen", "--out", os.path.join(self.tmp, "rel"))
        assert r.returncode == 0, r.stderr
        self.pub = os.path.join(self.tmp, "rel.pub")
        self.pkgs = {}
        for name, (model, version, extra) in models.items():
            d = os.path.join(self.tmp, "pkg-" + name)
            os.mkdir(d)
            shutil.copyfile(model, os.path.join(d, "model.gguf"))
            r = run("sign", "--key", os.path.join(self.tmp, "rel.sec"), os.path.join(d, "model.gguf"),
                    "--version", str(version), *extra)
            if "--expires" in extra:  # sign writes it, then its own read-back refuses it as expired
                assert r.returncode == 16 and "expiry check failed" in r.stderr, r.stderr
            else:
                assert r.returncode == 0, r.stderr
            self.pkgs[name] = os.path.join(d, "model.gguf")

    def write(self, name, obj):
        p = os.path.join(self.tmp, name)
        with open(p, "w") as f:
            f.write(obj if isinstance(obj, str) else json.dumps(obj))
        return p

    def fleet(self, config, new, *extra, env=None, background=False):
        self.n += 1
        out = os.path.join(self.tmp, "run%d" % self.n)
        args = [self.cli, "fleet", "--config", self.write("fleet%d.json" % self.n, config),
                "--gates", self.write("gates.json", GATES), "--base", self.pkgs["v1"], "--package",
                self.pkgs[new], "--pub", self.pub, "--out", out] + list(extra)
        e = dict(os.environ)
        e.update(env or {})
        if background:
            return out, subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
        r = subprocess.run(args, capture_output=True, text=True, timeout=900, env=e)
        assert not any(m in r.stderr for m in SANITIZER_MARKERS), r.stderr[-3000:]
        return out, r

    def status(self, store):
        r = subprocess.run([self.cli, "status", "--store", store], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (store, r.stdout, r.stderr)  # the active version verifies
        act = [ln for ln in r.stdout.splitlines() if ln.startswith("active:")][0]
        return int(act.split()[1][1:])

    def replay(self, log):
        return subprocess.run([self.cli, "fleet", "replay", log], capture_output=True, text=True, timeout=120)


def events(out):
    with open(os.path.join(out, "rollout.jsonl")) as f:
        return [json.loads(ln) for ln in f]


def versions(ctx, out, n):
    """Every device's active version (each verified by `status`); and no sanitizer report in any of the
    devices' process logs (serve, install, rollback: under ASan they are ASan builds too)."""
    for i in range(n):
        for name in ("serve.log", "store.log"):
            with open(os.path.join(out, "dev-%02d" % i, name), errors="replace") as f:
                text = f.read()
            assert not any(m in text for m in SANITIZER_MARKERS), (i, name, text[-3000:])
    return [ctx.status(os.path.join(out, "dev-%02d" % i, "store")) for i in range(n)]


def check_replay(ctx, out):
    r = ctx.replay(os.path.join(out, "rollout.jsonl"))
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "decisions reproduced" in r.stdout, r.stdout
    return r.stdout


def test_good(ctx, state):
    """6 devices, stages 1/10/50/100 % (1, 1, 3, 6 devices): every gate passes, all on v2."""
    out, r = ctx.fleet(fleet_config(ctx.tmp, small_fleet(3, 3), [1, 10, 50, 100]), "good")
    assert r.returncode == 0, r.stderr[-3000:]
    ev = events(out)
    gates = [e for e in ev if e["event"] == "gate"]
    assert [g["devices"] for g in gates] == [1, 1, 3, 6], gates
    assert all(g["decision"] == "advance" for g in gates)
    assert all(g["observed"]["canary_agreement"] == 1.0 for g in gates)
    assert gates[-1]["requests"] >= 6 * 3, gates[-1]  # every device answered the stage's traffic
    assert not [e for e in ev if e["event"] == "rollback"]
    assert ev[-1]["event"] == "end" and ev[-1]["outcome"] == "complete", ev[-1]
    assert versions(ctx, out, 6) == [2] * 6
    # each device ran with its class's thermal source reading
    with open(os.path.join(out, "dev-04", "thermal")) as f:
        assert f.read().strip() == "68000"
    state["good"] = out
    print(check_replay(ctx, out), end="")


def halted_at_first_stage(ctx, out, r, n, why):
    assert r.returncode == 3, (r.returncode, r.stderr[-3000:])
    ev = events(out)
    gates = [e for e in ev if e["event"] == "gate"]
    assert len(gates) == 1 and gates[0]["stage"] == 0 and gates[0]["decision"] == "halt", gates
    assert why in gates[0]["failed"], gates[0]
    took = sorted({e["device"] for e in ev if e["event"] == "install" and e["version_after"] == 2})
    rolled = sorted(e["device"] for e in ev if e["event"] == "rollback")
    assert took == rolled == [0], (took, rolled)
    assert all(e["version_after"] == 1 for e in ev if e["event"] == "rollback")
    assert ev[-1]["outcome"] == "halted"
    assert versions(ctx, out, n) == [1] * n
    return ev, gates[0]


def test_crash(ctx, state):
    """v2 crashes under load (EL_FAULT_SERVE_CRASH on its SHA-256): halted at stage 0, device 0 back on v1."""
    import hashlib
    with open(ctx.pkgs["good"], "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    out, r = ctx.fleet(fleet_config(ctx.tmp, small_fleet(), [25, 50, 100]), "good",
                       env={"EL_FAULT_SERVE_CRASH": sha + ":2"})
    ev, gate = halted_at_first_stage(ctx, out, r, 4, "crash_free_rate")
    assert gate["observed"]["crash_free_rate"] == 0.0, gate
    assert gate["crashes"] == [{"device": 0, "ended": "signal 6"}], gate["crashes"]
    with open(os.path.join(out, "dev-00", "serve.log")) as f:
        assert "EL_FAULT_SERVE_CRASH: aborting after 2 requests" in f.read()
    # v1 never matched the hash: the other devices served every request
    with open(os.path.join(out, "dev-01", "serve.log")) as f:
        assert "EL_FAULT_SERVE_CRASH matches" not in f.read()
    # device 0 is serving again after its rollback: its serve.log shows a second start on v1
    with open(os.path.join(out, "dev-00", "serve.log")) as f:
        assert f.read().count("listening on") == 3  # v1, v2, v1 again
    state["crash"] = out
    print(check_replay(ctx, out), end="")


def test_drift(ctx, state):
    """v2 is a different model (Q2_K): the canary disagrees, halted at stage 0, device 0 back on v1."""
    out, r = ctx.fleet(fleet_config(ctx.tmp, small_fleet(), [25, 50, 100]), "drift")
    ev, gate = halted_at_first_stage(ctx, out, r, 4, "canary_agreement")
    assert gate["observed"]["canary_agreement"] < 1.0, gate
    assert gate["observed"]["crash_free_rate"] == 1.0, gate  # it runs fine; only its outputs moved
    state["drift"] = out
    print(check_replay(ctx, out), end="")


def test_kill_mid_install(ctx, state):
    """Device 1's installer SIGKILLed 30 ms in: its store holds one complete version (verified), the
    rollout retries the install and completes; never half."""
    out, r = ctx.fleet(fleet_config(ctx.tmp, small_fleet(), [25, 50, 100]), "good", "--fault-kill-install", "1:30")
    assert r.returncode == 0, r.stderr[-3000:]
    ev = events(out)
    ins = [e for e in ev if e["event"] == "install" and e["device"] == 1]
    assert ins[0]["result"] == "signal 9", ins
    assert ins[0]["store_verified"] is True and ins[0]["version_after"] in (1, 2), ins
    landed = "before the switch (v1 kept, retried)" if ins[0]["version_after"] == 1 else "after the switch (v2)"
    if ins[0]["version_after"] == 1:
        assert len(ins) == 2 and ins[1]["result"] == "exit 0" and ins[1]["version_after"] == 2, ins
    print("    the kill landed %s" % landed)
    assert versions(ctx, out, 4) == [2] * 4
    check_replay(ctx, out)


def test_kill_switch(ctx, state):
    """The kill switch file appears after stage 0's gate: halted, every device that took v2 back on v1."""
    ks = os.path.join(ctx.tmp, "KILL")
    out, p = ctx.fleet(fleet_config(ctx.tmp, small_fleet(3, 3), [20, 50, 100], requests=12, kill_switch=ks),
                       "good", background=True)
    log = os.path.join(out, "rollout.jsonl")
    t0 = time.time()
    try:
        while time.time() - t0 < 300:
            if os.path.exists(log) and '"event":"gate"' in open(log).read():
                open(ks, "w").close()
                break
            if p.poll() is not None:
                break
            time.sleep(0.02)
        _, err = p.communicate(timeout=600)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 3, (p.returncode, err[-3000:])
    assert not any(m in err for m in SANITIZER_MARKERS), err[-3000:]
    ev = events(out)
    k = [e for e in ev if e["event"] == "kill_switch"]
    assert len(k) == 1 and k[0]["source"] == "file", k
    took = sorted({e["device"] for e in ev if e["event"] == "install" and e["version_after"] == 2})
    rolled = sorted(e["device"] for e in ev if e["event"] == "rollback")
    assert took and took == rolled, (took, rolled)
    assert ev[-1]["outcome"] == "halted" and ev[-1]["reason"] == "kill switch", ev[-1]
    assert versions(ctx, out, 6) == [1] * 6
    print("    halted at stage %d; devices %s rolled back" % (k[0]["stage"], rolled))
    check_replay(ctx, out)


def test_kill_signal(ctx, state):
    """SIGUSR1 to the fleet is the kill switch too."""
    out, p = ctx.fleet(fleet_config(ctx.tmp, small_fleet(1, 1), [50, 100], requests=12), "good", background=True)
    log = os.path.join(out, "rollout.jsonl")
    t0 = time.time()
    while time.time() - t0 < 300 and p.poll() is None:
        if os.path.exists(log) and '"event":"install"' in open(log).read():
            p.send_signal(signal.SIGUSR1)
            break
        time.sleep(0.02)
    _, err = p.communicate(timeout=600)
    assert p.returncode == 3, (p.returncode, err[-3000:])
    ev = events(out)
    assert [e["source"] for e in ev if e["event"] == "kill_switch"] == ["signal"], ev[-3:]
    assert versions(ctx, out, 2) == [1, 1]
    check_replay(ctx, out)


def test_expired(ctx, state):
    """v2 expired (signed --expires 2020-01-01): device 0's own install refuses it (exit 16, expiry);
    the install gate halts the rollout at stage 0, nothing to roll back, every device on v1."""
    out, r = ctx.fleet(fleet_config(ctx.tmp, small_fleet(), [25, 50, 100]), "expired")
    assert r.returncode == 3, r.stderr[-3000:]
    ev = events(out)
    ins = [e for e in ev if e["event"] == "install"]
    assert len(ins) == 1 and ins[0]["result"] == "exit 16" and ins[0]["version_after"] == 1, ins
    gate = [e for e in ev if e["event"] == "gate"][0]
    assert gate["failed"] == ["install_failures"] and gate["decision"] == "halt", gate
    assert not [e for e in ev if e["event"] == "rollback"]
    with open(os.path.join(out, "dev-00", "store.log")) as f:
        assert "expiry check failed" in f.read()
    assert versions(ctx, out, 4) == [1] * 4
    # and a device does not serve it either: serve -m on the expired package refuses to start
    r2 = subprocess.run([ctx.cli, "serve", "-m", ctx.pkgs["expired"], "--pub", ctx.pub, "--port", "0"],
                        capture_output=True, text=True, timeout=120)
    assert r2.returncode == 16 and "expiry check failed" in r2.stderr, (r2.returncode, r2.stderr[-500:])
    check_replay(ctx, out)


def tamper(ctx, src, name, fn):
    with open(os.path.join(src, "rollout.jsonl")) as f:
        lines = f.read().splitlines()
    lines = fn(lines)
    p = ctx.write(name, "\n".join(lines) + "\n")
    return ctx.replay(p)


def edit(lines, event, f, nth=0):
    out, seen = [], 0
    for ln in lines:
        o = json.loads(ln)
        if o["event"] == event:
            if seen == nth:
                f(o)
                ln = json.dumps(o, separators=(",", ":"))
            seen += 1
        out.append(ln)
    return out


def test_replay_refuses_tampering(ctx, state):
    """replay recomputes, it does not trust: each edit below is caught (exit 3 not reproduced, 1 malformed)."""
    good, drift = state["good"], state["drift"]
    cases = [
        (good, "flip", lambda L: edit(L, "gate", lambda o: o.update(decision="halt")), 3, "logged halt"),
        (good, "obs", lambda L: edit(L, "gate", lambda o: o["observed"].update(canary_agreement=0.5), 1), 3,
         "canary_agreement logged pass"),
        (drift, "hide", lambda L: edit(L, "gate", lambda o: o["observed"].update(canary_agreement=1.0)), 3,
         "canary_agreement logged fail"),
        (good, "gates", lambda L: edit(L, "start", lambda o: o["gates"].update(max_p95_ttft_ms=0.001)), 3,
         "p95_ttft_ms logged pass"),
        (drift, "norollback", lambda L: [ln for ln in L if '"rollback"' not in ln], 3, "seq"),
        (drift, "nolast", lambda L: L[:-1], 1, "no end line"),
        (good, "size", lambda L: edit(L, "start", lambda o: o.update(stages=[50, 100])), 3, "devices"),
        (good, "junk", lambda L: L[:3] + ["{not json"] + L[3:], 1, ":4: not one JSON object"),
        (good, "badgate", lambda L: edit(L, "start", lambda o: o["gates"].update(min_crash_free_rate=2)), 1,
         "gates: min_crash_free_rate"),
        (drift, "outcome", lambda L: edit(L, "end", lambda o: o.update(outcome="complete")), 3, "outcome"),
    ]
    for src, name, fn, code, text in cases:
        r = tamper(ctx, src, "tampered-%s.jsonl" % name, fn)
        assert r.returncode == code and text in r.stderr, (name, r.returncode, r.stderr)


def test_bad_files(ctx, state):
    """Malformed fleet configs and gate files: exit 1, the message names the path and the member."""
    good_cfg = fleet_config(ctx.tmp, small_fleet(), [25, 50, 100])
    def cfg(**kw):
        c = json.loads(json.dumps(good_cfg))
        for k, v in kw.items():
            c[k] = v
        return c
    cls_bad = lambda **kw: cfg(classes=[dict(small_fleet()[0], **kw)])  # noqa: E731
    cases = [
        ("not json", "{", "not valid JSON"),
        ("array", [], "expected a JSON object"),
        ("format", cfg(format="edgellm-fleet/2"), "format"),
        ("unknown", cfg(stagez=[1]), "stagez: unknown member"),
        ("no classes", cfg(classes=[]), "classes: expected"),
        ("count 0", cls_bad(count=0), "classes[0].count"),
        ("threads", cls_bad(threads=1.5), "classes[0].threads"),
        ("name", cls_bad(name="a b"), "classes[0].name"),
        ("temp", cls_bad(temp_mc=999999), "classes[0].temp_mc"),
        ("mem", cls_bad(mem_budget_mib=-1), "classes[0].mem_budget_mib"),
        ("too many", cfg(classes=[dict(small_fleet()[0], count=40), dict(small_fleet()[1], count=40)]),
         "more than 64 devices"),
        ("dup class", cfg(classes=[small_fleet()[0], small_fleet()[0]]), "given twice"),
        ("stages order", cfg(stages=[50, 10, 100]), "stages[1]"),
        ("stages end", cfg(stages=[10, 50]), "the last stage must be 100"),
        ("stage 0", cfg(stages=[0, 100]), "stages[0]"),
        ("traffic", cfg(traffic={"requests_per_device": 0, "prompts": ["a"]}), "traffic.requests_per_device"),
        ("prompts", cfg(traffic={"requests_per_device": 1, "prompts": []}), "traffic.prompts"),
        ("prompt ctl", cfg(canary={"prompts": ["a\u0001"]}), "canary.prompts[0]"),
        ("canary n", cfg(canary={"prompts": ["a"], "n_predict": 9999}), "canary.n_predict"),
        ("ctx", cfg(ctx=1), "ctx"),
        ("kill", cfg(kill_switch=5), "kill_switch"),
    ]
    gates_ok = ctx.write("gates-ok.json", GATES)
    for name, body, text in cases:
        p = ctx.write("bad-config.json", body if isinstance(body, str) else json.dumps(body))
        r = subprocess.run([ctx.cli, "fleet", "check", "--config", p, "--gates", gates_ok],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and p in r.stderr and text in r.stderr, (name, r.returncode, r.stderr)
    cfg_ok = ctx.write("cfg-ok.json", good_cfg)
    g = lambda **kw: dict(GATES, **kw)  # noqa: E731
    gcases = [
        ("not json", "{\"format\":", "not valid JSON"),
        ("format", g(format="x"), "format"),
        ("missing", {k: v for k, v in GATES.items() if k != "max_refusal_rate"}, "max_refusal_rate: missing"),
        ("rate", g(min_crash_free_rate=1.5), "min_crash_free_rate"),
        ("nan-ish", '{"format":"edgellm-gates/1","min_crash_free_rate":"1"}', "min_crash_free_rate"),
        ("p95", g(max_p95_ttft_ms=0), "max_p95_ttft_ms"),
        ("installs", g(max_install_failures=-1), "max_install_failures"),
        ("unknown", g(min_canary=1), "min_canary: unknown member"),
        ("dup", '{"format":"edgellm-gates/1","format":"edgellm-gates/1"}', "given twice"),
        ("trailing", json.dumps(GATES) + " x", "not valid JSON"),
    ]
    for name, body, text in gcases:
        p = ctx.write("bad-gates.json", body if isinstance(body, str) else json.dumps(body))
        r = subprocess.run([ctx.cli, "fleet", "check", "--config", cfg_ok, "--gates", p],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and p in r.stderr and text in r.stderr, (name, r.returncode, r.stderr)
    r = subprocess.run([ctx.cli, "fleet", "check", "--config", os.path.join(ctx.tmp, "nope.json"), "--gates",
                        gates_ok], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "nope.json" in r.stderr, r.stderr
    # special files as the config, the gates or the log to replay: refused at once, naming the path
    fifo = os.path.join(ctx.tmp, "fifo")
    os.mkfifo(fifo)
    for args in (["check", "--config", fifo, "--gates", gates_ok], ["check", "--config", cfg_ok, "--gates", fifo],
                 ["replay", fifo], ["replay", "/dev/zero"], ["check", "--config", "/dev/zero", "--gates", gates_ok]):
        r = subprocess.run([ctx.cli, "fleet", *args], capture_output=True, text=True, timeout=20)
        bad = fifo if fifo in args else "/dev/zero"
        assert r.returncode == 1 and bad in r.stderr and "not a regular file" in r.stderr, (args, r.returncode,
                                                                                             r.stderr)
    os.unlink(fifo)


def main():
    models = {}
    for key, name in (("v1", "tiny-llama-F16.gguf"), ("good", "tiny-llama-BF16.gguf"),
                      ("drift", "tiny-llama-Q2_K.gguf")):
        cli, model = require_setup(name, need_openai=False)
        if cli is None:
            return model
        models[key] = model
    ctx = Ctx(cli, {"v1": (models["v1"], 1, []), "good": (models["good"], 2, []),
                    "drift": (models["drift"], 2, []),
                    "expired": (models["good"], 2, ["--expires", "2020-01-01"])})
    r = Runner()
    state = {}
    try:
        r.run("fleet_bad_files", test_bad_files, ctx, state)
        r.run("fleet_good_to_100", test_good, ctx, state)
        r.run("fleet_crash_halts_at_first_stage", test_crash, ctx, state)
        r.run("fleet_drift_caught_by_canary", test_drift, ctx, state)
        r.run("fleet_kill_mid_install", test_kill_mid_install, ctx, state)
        r.run("fleet_kill_switch_file", test_kill_switch, ctx, state)
        r.run("fleet_kill_switch_signal", test_kill_signal, ctx, state)
        r.run("fleet_expired_refused", test_expired, ctx, state)
        if "good" in state and "drift" in state:
            r.run("fleet_replay_refuses_tampering", test_replay_refuses_tampering, ctx, state)
    finally:
        if r.failed == 0:
            shutil.rmtree(ctx.tmp, ignore_errors=True)
        else:
            print("kept for inspection: " + ctx.tmp)
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
