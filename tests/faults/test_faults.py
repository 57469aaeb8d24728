#!/usr/bin/env python3
"""Disk faults at every writer of edgellm (issue 36 part 3), injected by the
LD_PRELOAD shim tests/faults/faultshim.c into the real CLI / server process.

Writers x faults, each case asserting its outcome:

  slot save (POST /slots/0?action=save over a good file of the same name,
    and to a new name): write ENOSPC / EIO / short, fsync EIO, rename EIO,
    open ENOSPC -> HTTP `save_failed` whose message carries the OS error, 507
    when the disk is full (ENOSPC, short), 500 for EIO;
    the old file byte-identical and restorable, no new visible file, no
    temporary file left; kill -9 at every write, fsync and rename of a save
    -> after a restart the old file intact and restorable, nothing new
    visible (a leftover hidden temp cannot be named by restore);
  store install (`edgellm install` of v3 over active v2 / previous v1):
    write ENOSPC / EIO / short, fsync EIO, rename EIO, open ENOSPC -> exit
    != 0 with the OS error on stderr, the store still active v2 (status
    verifies, `run --store` answers), and a later install without the fault
    succeeds; kill -9 at every write / fsync / rename / open -> active v2
    or v3, verifying and runnable;
  store activate (`edgellm rollback`): write ENOSPC / EIO, fsync EIO,
    rename EIO -> exit != 0, still active v2; kill -9 at each -> v2 or v1;
  telemetry spool and audit log (serve --telemetry-dir / --audit-log): write
    ENOSPC / EIO / short -> requests still answered 200, the failures
    counted in /metrics, every line in the files a whole JSON object (a
    short write is cut back, never left as half a line); kill -9 at each
    write -> every line whole after the kill;
  LoRA registry loads (serve --lora): read EIO / short at startup -> the
    server exits != 0 naming the adapter and the error; at a request's lazy
    load -> an error answer naming the adapter, the adapter not resident, a
    request without it still 200.

Prints a matrix (writer, fault, outcome) and "N passed, N failed".
Exit 0 all passed, 1 something failed, 77 skipped (no fixture model, no
shim; under CI=true a missing fixture fails).
"""
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "server"))
from test_server import SANITIZER_MARKERS, metrics, post, request, require_setup, Runner, Server  # noqa: E402

ERRTEXT = {"ENOSPC": "No space left on device", "EIO": "Input/output error", "short": "No space left on device"}
MATRIX = []  # (writer, fault, outcome) rows, printed at the end


def shim_env(fault=None, path=None, log=None):
    env = dict(os.environ)
    env["LD_PRELOAD"] = SHIM
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
    for k, v in (("EL_FAULT", fault), ("EL_FAULT_PATH", path), ("EL_FAULT_LOG", log)):
        if v is not None:
            env[k] = v
        else:
            env.pop(k, None)
    return env


class FServer(Server):
    """A server under the shim (env given), or without it (env None)."""

    def __init__(self, cli, model, env, *extra):
        super().__init__(cli, model, *extra)
        self.env = env

    def spawn(self):
        import threading
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=self.env)
        self.reader = threading.Thread(target=self._read_stderr, daemon=True)
        self.reader.start()
        return self


def no_sanitizer(text):
    for m in SANITIZER_MARKERS:
        assert m not in text, "sanitizer report:\n" + text[text.find(m) - 200:][:3000]


def sha(p):
    with open(p, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def count_calls(log):
    n = {}
    if os.path.exists(log):
        for line in open(log):
            op = line.split(" ", 1)[0]
            n[op] = n.get(op, 0) + 1
    return n


def spread(n, cap):
    """1..n, or cap of them spread evenly (first and last included)."""
    if n <= cap:
        return list(range(1, n + 1))
    return sorted({1 + round(i * (n - 1) / (cap - 1)) for i in range(cap)})


# ---------------------------------------------------------------- slot save

def slot_prime(port, prompt="Once upon a time"):
    """Fills slot 0's cache (the baseline file holds this prompt; the faulted saves another, so they differ)."""
    st, _, b = post(port, "/completion", {"prompt": prompt, "n_predict": 6, "temperature": 0,
                                         "cache_prompt": True, "id_slot": 0})
    assert st == 200, (st, b[:200])


def slot_baseline(ctx):
    """A good keep.bin in a fresh folder, saved by a server without the shim."""
    d = tempfile.mkdtemp(prefix="slots-", dir=ctx.tmp)
    srv = FServer(ctx.cli, ctx.model, None, "-c", "256", "-t", "1", "--slot-save-path", d).start()
    try:
        slot_prime(srv.port)
        st, _, b = post(srv.port, "/slots/0?action=save", {"filename": "keep.bin"})
        assert st == 200, (st, b)
    finally:
        srv.interrupt()
    return d, sha(os.path.join(d, "keep.bin"))


def slot_check_intact(ctx, d, good):
    assert sorted(f for f in os.listdir(d) if not f.startswith(".")) == ["keep.bin"], os.listdir(d)
    assert sha(os.path.join(d, "keep.bin")) == good, "keep.bin changed"
    srv = FServer(ctx.cli, ctx.model, None, "-c", "256", "-t", "1", "--slot-save-path", d).start()
    try:
        st, _, b = post(srv.port, "/slots/0?action=restore", {"filename": "keep.bin"})
        assert st == 200, "restore of the old file after the fault: %d %r" % (st, b[:300])
    finally:
        srv.interrupt()
        no_sanitizer(srv.stderr())


def t_slot_fault(ctx, op, kind):
    d, good = slot_baseline(ctx)
    srv = FServer(ctx.cli, ctx.model, shim_env("%s:%s" % (op, kind), d), "-c", "256", "-t", "1",
                  "--slot-save-path", d).start()
    try:
        slot_prime(srv.port)
        for name in ("keep.bin", "new.bin"):
            st, _, b = post(srv.port, "/slots/0?action=save", {"filename": name})
            # a full disk is 507 Insufficient Storage (a short write ends in ENOSPC); any other I/O error 500
            want = 507 if kind in ("ENOSPC", "short") else 500
            assert st == want, "save %s under %s:%s: %d (want %d) %r" % (name, op, kind, st, want, b[:300])
            msg = json.loads(b)["error"]["message"]
            assert ERRTEXT[kind] in msg, "the message lacks the OS error: %r" % msg
            assert json.loads(b)["error"]["code"] == "save_failed", b
        assert [f for f in os.listdir(d) if f.startswith(".")] == [], "temporary files left: %r" % os.listdir(d)
        st, _, b = post(srv.port, "/slots/0?action=restore", {"filename": "keep.bin"})
        assert st == 200, "restore under the fault: %d %r" % (st, b[:300])
    finally:
        srv.interrupt()
        no_sanitizer(srv.stderr())
    slot_check_intact(ctx, d, good)
    MATRIX.append(("slot save", "%s %s" % (op, kind), "%d save_failed + OS error; old file intact, restorable; "
                                                      "no temp left" % (507 if kind in ("ENOSPC", "short") else 500)))


def t_slot_kill(ctx):
    d, good = slot_baseline(ctx)
    log = os.path.join(ctx.tmp, "slot-count.log")
    srv = FServer(ctx.cli, ctx.model, shim_env(None, d, log), "-c", "256", "-t", "1", "--slot-save-path", d).start()
    try:
        slot_prime(srv.port, "The weather today is")  # as the killed saves below
        st, _, b = post(srv.port, "/slots/0?action=save", {"filename": "count.bin"})
        assert st == 200, (st, b)
    finally:
        srv.interrupt()
    os.unlink(os.path.join(d, "count.bin"))
    n = count_calls(log)
    good = sha(os.path.join(d, "keep.bin"))
    kills = replaced = 0
    for op in ("write", "fsync", "rename"):
        for k in spread(n.get(op, 0), 40):
            srv = FServer(ctx.cli, ctx.model, shim_env("%s:kill:nth=%d" % (op, k), d), "-c", "256", "-t", "1",
                          "--slot-save-path", d).start()
            try:
                slot_prime(srv.port, "The weather today is")
                try:
                    post(srv.port, "/slots/0?action=save", {"filename": "keep.bin"}, timeout=30)
                except OSError:
                    pass
                srv.proc.wait(30)
                assert srv.proc.returncode == -9, "the server was not killed at %s %d: %s" % (op, k, srv.proc.returncode)
                kills += 1
            finally:
                srv.kill()
            visible = sorted(f for f in os.listdir(d) if not f.startswith("."))
            assert visible == ["keep.bin"], visible
            now = sha(os.path.join(d, "keep.bin"))
            if now != good:  # only a kill after the rename (the folder's fsync) may leave the new file, whole
                assert op == "fsync" and k == n["fsync"], "keep.bin changed by a save killed at %s %d" % (op, k)
                slot_check_intact(ctx, d, now)
                replaced += 1
                good = now
            for f in os.listdir(d):  # a leftover temp: hidden, never a name restore accepts; remove it as gc would
                if f.startswith("."):
                    os.unlink(os.path.join(d, f))
    slot_check_intact(ctx, d, sha(os.path.join(d, "keep.bin")))
    print("     (slot save: %s calls per save; killed at %d of them; %d after the rename)" % (n, kills, replaced))
    assert replaced == 1, "the kill after the rename (the folder's fsync) did not leave the new file"
    MATRIX.append(("slot save", "kill -9 at each write/fsync/rename (%d)" % kills,
                   "before the rename: old file intact; after it: the new file, whole; both restorable; "
                   "a leftover temp is hidden (restore refuses dot names)"))


# ---------------------------------------------------------------- store

def store_run(ctx, *args, env=None, timeout=120):
    # errors="replace": `run -n 2` may print a token that is half of a UTF-8 character
    return subprocess.run([ctx.cli, *args], capture_output=True, text=True, errors="replace", timeout=timeout,
                          env=env)


def store_fresh(ctx):
    s = tempfile.mkdtemp(prefix="store-", dir=ctx.tmp)
    shutil.rmtree(s)
    shutil.copytree(ctx.store0, s)
    return s


def store_state(ctx, s):
    r = store_run(ctx, "status", "--store", s)
    no_sanitizer(r.stderr)
    assert r.returncode == 0, "status after the fault: %d %s" % (r.returncode, r.stdout + r.stderr)
    assert "active verifies" in r.stdout, r.stdout
    m = re.search(r"active:\s+v(\d+)", r.stdout)
    p = re.search(r"previous:\s+(?:v(\d+)|none)", r.stdout)
    return int(m.group(1)), (int(p.group(1)) if p and p.group(1) else None)


def store_runs(ctx, s):
    r = store_run(ctx, "run", "--store", s, "-p", "Hello", "-n", "2", "-t", "1")
    no_sanitizer(r.stderr)
    assert r.returncode == 0, "run --store after the fault: %d %s" % (r.returncode, r.stderr[-500:])


def t_store_install_fault(ctx, op, kind):
    s = store_fresh(ctx)
    r = store_run(ctx, "install", ctx.pkg[3], "--store", s, env=shim_env("%s:%s" % (op, kind), s))
    no_sanitizer(r.stderr)
    assert r.returncode != 0, "install under %s:%s exited 0" % (op, kind)
    assert ERRTEXT[kind] in r.stderr, "install's message lacks the OS error: %r" % r.stderr[-500:]
    act, prev = store_state(ctx, s)
    assert act == 2 and prev in (1, None), "after a failed install: active v%s previous v%s" % (act, prev)
    store_runs(ctx, s)
    r2 = store_run(ctx, "install", ctx.pkg[3], "--store", s)
    assert r2.returncode == 0, "install without the fault afterwards: %s" % r2.stderr[-500:]
    assert store_state(ctx, s)[0] == 3
    MATRIX.append(("store install", "%s %s" % (op, kind), "exit %d + OS error; still active v2 (verifies, runs); "
                                                          "the next install succeeds" % r.returncode))


def t_store_install_kill(ctx):
    s = store_fresh(ctx)
    log = os.path.join(ctx.tmp, "install-count.log")
    r = store_run(ctx, "install", ctx.pkg[3], "--store", s, env=shim_env(None, s, log))
    assert r.returncode == 0, r.stderr
    n = count_calls(log)
    kills, seen = 0, set()
    for op in ("open", "write", "fsync", "rename"):
        for k in range(1, n.get(op, 0) + 1):
            s = store_fresh(ctx)
            r = store_run(ctx, "install", ctx.pkg[3], "--store", s, env=shim_env("%s:kill:nth=%d" % (op, k), s))
            assert r.returncode == -9, "install not killed at %s %d: %d" % (op, k, r.returncode)
            kills += 1
            act, prev = store_state(ctx, s)
            last = op == "fsync" and k == n["fsync"]  # the folder's fsync after the switch's rename
            assert act == (3 if last else 2), "killed at %s %d: active v%s" % (op, k, act)
            seen.add(act)
            store_runs(ctx, s)
            g = store_run(ctx, "gc", "--store", s)
            assert g.returncode == 0, g.stderr
    print("     (install: %s calls; killed at each of %d; active after: %s)" % (n, kills, sorted(seen)))
    MATRIX.append(("store install", "kill -9 at each open/write/fsync/rename (%d)" % kills,
                   "active v2 (before the switch's rename) or v3 (after it), verifies and runs; gc cleans"))


def t_store_rollback_fault(ctx, op, kind):
    s = store_fresh(ctx)
    r = store_run(ctx, "rollback", "--store", s, env=shim_env("%s:%s" % (op, kind), s))
    no_sanitizer(r.stderr)
    assert r.returncode != 0, "rollback under %s:%s exited 0" % (op, kind)
    assert ERRTEXT[kind] in r.stderr, "rollback's message lacks the OS error: %r" % r.stderr[-500:]
    assert store_state(ctx, s) == (2, 1), "a failed rollback changed the store"
    store_runs(ctx, s)
    MATRIX.append(("store activate (rollback)", "%s %s" % (op, kind), "exit %d + OS error; still active v2, "
                                                                      "previous v1" % r.returncode))


def t_store_rollback_kill(ctx):
    log = os.path.join(ctx.tmp, "rollback-count.log")
    s = store_fresh(ctx)
    r = store_run(ctx, "rollback", "--store", s, env=shim_env(None, s, log))
    assert r.returncode == 0, r.stderr
    n = count_calls(log)
    kills = 0
    for op in ("write", "fsync", "rename"):
        for k in range(1, n.get(op, 0) + 1):
            s = store_fresh(ctx)
            r = store_run(ctx, "rollback", "--store", s, env=shim_env("%s:kill:nth=%d" % (op, k), s))
            assert r.returncode == -9, "rollback not killed at %s %d" % (op, k)
            kills += 1
            want = (1, 2) if op == "fsync" and k == n["fsync"] else (2, 1)  # after the rename: rolled back
            assert store_state(ctx, s) == want, "rollback killed at %s %d left %s" % (op, k, store_state(ctx, s))
            store_runs(ctx, s)
    MATRIX.append(("store activate (rollback)", "kill -9 at each write/fsync/rename (%d)" % kills,
                   "before the rename v2 (previous v1), after it v1 (previous v2); verifies and runs"))


# ---------------------------------------------------------------- telemetry spool, audit log

def jsonl_whole(path):
    """Every line of path (and its rotations) a whole JSON object; returns the count."""
    n = 0
    for p in glob.glob(path.replace(".jsonl", "*.jsonl")) if path.endswith(".jsonl") else glob.glob(path + "*"):
        data = open(p, "rb").read()
        if not data:
            continue
        assert data.endswith(b"\n"), "%s ends in half a line: %r" % (p, data[-80:])
        for line in data.split(b"\n")[:-1]:
            try:
                assert isinstance(json.loads(line), dict)
            except ValueError:
                raise AssertionError("%s holds a broken line: %r" % (p, line[:200]))
            n += 1
    return n


def spool_server(ctx, env, d):
    return FServer(ctx.cli, ctx.model, env, "-c", "256", "-t", "1", "--telemetry-dir", d,
                   "--audit-log", os.path.join(d, "audit.jsonl"))


def spool_traffic(port, n=6):
    for _ in range(n):
        st, _, b = post(port, "/v1/completions", {"prompt": "Hi", "max_tokens": 2, "temperature": 0})
        assert st == 200, "a request while the spool's disk fails: %d %r" % (st, b[:200])


def t_spool_fault(ctx, which, kind):
    d = tempfile.mkdtemp(prefix="spool-", dir=ctx.tmp)
    target = os.path.join(d, "telemetry.jsonl" if which == "telemetry" else "audit.jsonl")
    srv = spool_server(ctx, shim_env("write:%s:nth=3" % kind, target), d).start()
    try:
        spool_traffic(srv.port)
        m = metrics(srv.port)
    finally:
        srv.interrupt()
        no_sanitizer(srv.stderr())
    key = ('edgellm_telemetry_events_total{outcome="dropped"}' if which == "telemetry"
           else "edgellm_audit_write_failures_total")
    assert m.get(key, 0) >= 1, "%s: no failure counted in /metrics (%s)" % (which, key)
    n = jsonl_whole(target)
    assert n >= 1, "%s: the lines before the fault are gone" % which
    MATRIX.append(("%s spool" % which, "write %s" % kind, "requests 200; failure counted (%s %d); %d whole lines, "
                                                           "no partial line" % (key.split("{")[0], m.get(key), n)))


def t_spool_kill(ctx, which):
    kills = 0
    for k in (1, 2, 4, 7):
        d = tempfile.mkdtemp(prefix="spool-", dir=ctx.tmp)
        target = os.path.join(d, "telemetry.jsonl" if which == "telemetry" else "audit.jsonl")
        srv = spool_server(ctx, shim_env("write:kill:nth=%d" % k, target), d).start()
        try:
            try:
                spool_traffic(srv.port, 8)
            except (OSError, AssertionError):
                pass
            srv.proc.wait(30)
            assert srv.proc.returncode == -9, "not killed at write %d" % k
            kills += 1
        finally:
            srv.kill()
        assert jsonl_whole(target) == k - 1, "killed at write %d: not exactly the %d lines before" % (k, k - 1)
    MATRIX.append(("%s spool" % which, "kill -9 at write 1/2/4/7", "exactly the lines before the kill, all whole"))


# ---------------------------------------------------------------- LoRA registry

def t_lora_startup(ctx, kind):
    srv = FServer(ctx.cli, ctx.model, shim_env("read:%s" % kind, ctx.lora), "-c", "256", "-t", "1",
                  "--lora", "a=" + ctx.lora)
    srv.spawn()
    rc = srv.proc.wait(60)
    srv.reader.join(5)
    err = srv.stderr()
    no_sanitizer(err)
    assert rc != 0, "serve started with an adapter that could not be read"
    want = "Input/output error" if kind == "EIO" else ("file shrank", "Input/output error")
    assert "--lora a" in err and any(w in err for w in ((want,) if isinstance(want, str) else want)), err[-800:]
    MATRIX.append(("LoRA registry load (startup)", "read %s" % kind, "serve exits %d naming the adapter and the "
                                                                    "error" % rc))


def t_lora_lazy(ctx):
    log = os.path.join(ctx.tmp, "lora-count.log")
    srv = FServer(ctx.cli, ctx.model, shim_env(None, ctx.lora, log), "-c", "256", "-t", "1", "--lora",
                  "a=" + ctx.lora).start()
    srv.interrupt()
    n0 = count_calls(log).get("read", 0)
    srv = FServer(ctx.cli, ctx.model, shim_env("read:EIO:nth=%d" % (n0 + 1), ctx.lora), "-c", "256", "-t", "1",
                  "--lora", "a=%s:0" % ctx.lora).start()  # default scale 0: requests that do not ask stay without it
    try:
        st, _, b = post(srv.port, "/v1/completions", {"prompt": "Hi", "max_tokens": 2, "temperature": 0,
                                                      "lora": [{"id": 0, "scale": 1.0}]})
        assert st >= 400, "a request whose adapter cannot be read: %d" % st
        msg = json.loads(b)["error"]["message"]
        assert "'a'" in msg and "Input/output error" in msg, msg
        st2, _, b2 = request(srv.port, "GET", "/lora-adapters")
        assert st2 == 200 and not any(e.get("resident") for e in json.loads(b2)), b2[:300]
        st3, _, _ = post(srv.port, "/v1/completions", {"prompt": "Hi", "max_tokens": 2, "temperature": 0})
        assert st3 == 200, st3
    finally:
        srv.interrupt()
        no_sanitizer(srv.stderr())
    MATRIX.append(("LoRA registry load (request)", "read EIO", "%d generation_failed naming the adapter + OS error; "
                                                               "not resident; requests without it 200" % st))


# ---------------------------------------------------------------- main

def main():
    global SHIM
    cli, model = require_setup("tiny-llama-Q4_K_M.gguf", need_openai=False)
    if cli is None:
        return model
    SHIM = os.environ.get("EL_FAULT_SHIM", "")
    if not os.path.exists(SHIM):
        print("skip: EL_FAULT_SHIM (the faultshim library) not built: %r" % SHIM)
        return 1 if os.environ.get("CI") == "true" else 77

    class Ctx:
        pass
    ctx = Ctx()
    ctx.cli, ctx.model = cli, model
    ctx.tmp = tempfile.mkdtemp(prefix="el-faults-")
    only = os.environ.get("EL_FAULTS_ONLY", "")
    R = Runner()
    t0 = time.time()
    try:
        # packages v1..v3 of the same model, a store with v2 active over v1
        r = store_run(ctx, "keygen", "--out", os.path.join(ctx.tmp, "rel"))
        assert r.returncode == 0, r.stderr
        ctx.pkg = {}
        for v in (1, 2, 3):
            d = os.path.join(ctx.tmp, "v%d" % v)
            os.mkdir(d)
            ctx.pkg[v] = os.path.join(d, "model.gguf")
            shutil.copy(model, ctx.pkg[v])
            r = store_run(ctx, "sign", "--key", os.path.join(ctx.tmp, "rel.sec"), ctx.pkg[v], "--version", str(v))
            assert r.returncode == 0, r.stderr
        ctx.store0 = os.path.join(ctx.tmp, "store0")
        for v in (1, 2):
            extra = ("--pub", os.path.join(ctx.tmp, "rel.pub")) if v == 1 else ()
            r = store_run(ctx, "install", ctx.pkg[v], "--store", ctx.store0, *extra)
            assert r.returncode == 0, r.stderr
        ctx.lora = os.path.join(ctx.tmp, "a.gguf")
        r = subprocess.run([sys.executable, os.path.join(REPO, "tests", "tools", "gen_lora.py"), "adapter", "--base",
                            model, "--out", ctx.lora, "--rank", "4", "--seed", "1"], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, "gen_lora.py: " + r.stderr[-500:]

        faults = [("write", "ENOSPC"), ("write", "EIO"), ("write", "short"), ("fsync", "EIO"), ("rename", "EIO"),
                  ("open", "ENOSPC")]
        cases = []
        for op, kind in faults:
            cases.append(("slot save: %s %s" % (op, kind), t_slot_fault, ctx, op, kind))
        cases.append(("slot save: kill -9 at each write", t_slot_kill, ctx))
        for op, kind in faults:
            cases.append(("store install: %s %s" % (op, kind), t_store_install_fault, ctx, op, kind))
        cases.append(("store install: kill -9 at each write", t_store_install_kill, ctx))
        for op, kind in faults[:5]:
            cases.append(("store rollback: %s %s" % (op, kind), t_store_rollback_fault, ctx, op, kind))
        cases.append(("store rollback: kill -9 at each write", t_store_rollback_kill, ctx))
        for which in ("telemetry", "audit"):
            for kind in ("ENOSPC", "EIO", "short"):
                cases.append(("%s spool: write %s" % (which, kind), t_spool_fault, ctx, which, kind))
            cases.append(("%s spool: kill -9 at writes" % which, t_spool_kill, ctx, which))
        for kind in ("EIO", "short"):
            cases.append(("LoRA load at startup: read %s" % kind, t_lora_startup, ctx, kind))
        cases.append(("LoRA load at a request: read EIO", t_lora_lazy, ctx))
        for name, fn, *a in cases:
            if only and only not in name:
                continue
            R.run(name, fn, *a)
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)
    print("\n| writer | fault | outcome |\n|---|---|---|")
    for w, f, o in MATRIX:
        print("| %s | %s | %s |" % (w, f, o))
    print("(%.1f s)" % (time.time() - t0))
    return R.finish()


SHIM = ""
if __name__ == "__main__":
    sys.exit(main())
