#!/usr/bin/env python3
"""soak.py — a bounded soak of one `edgellm serve` under mixed traffic on loopback.

  python3 bench/soak/soak.py --cli build/edgellm --model GEMMA.gguf --minutes 30 --out soak-out/

Contract:
  - starts one `edgellm serve` (the model, 2 slots, --policy with a thermal
    section and --thermal-source, --cloud-url to the fake cloud of
    actors.py, --slot-save-path, three random LoRA adapters made by
    tests/tools/gen_lora.py with a budget for two, --embeddings) on
    127.0.0.1 and nothing else: every socket is loopback;
  - first sends every kind once (prime(): before the clock starts, thermal
    normal, the cloud up; its requests count like the others, at t < 0);
  - then runs --clients client threads drawing request kinds from traffic.KINDS
    (seeded by --seed), the Flipper (thermal levels, cloud up/down on a 60 s
    cycle), a Slowloris and an RssSampler (every --sample-s s), until
    --minutes have passed or --max-requests were sent, whichever comes
    first; then waits for the requests in flight (each bounded by
    traffic.TIMEOUT_S) and stops the server with SIGINT;
  - writes to --out: soak.json (every figure below, the verdict, the
    failures' details), soak.md (a summary) and soak.png (RSS per sample,
    p50/p99 per minute; skipped with a note when matplotlib is missing);
  - the verdict's checks, each pass/fail/"n/a" (too short to judge):
      rss_growth      median RSS of the last minute vs the minute after
                      --warmup-min: growth < 2 % (n/a unless a full minute
                      separates them);
      no_undeclared_5xx  every 5xx is a declared refusal (traffic.py);
      every_answered  no request ended without an answer or a declared
                      refusal (no reset, timeout, malformed body, 4xx);
      p99_last_vs_min2  p99 latency of the last full minute <= 1.2x the
                      second minute's;
      latency_drift   each kind's median latency in the second half of
                      the minutes from minute 2 on vs the first half,
                      geometric mean weighted by count <= 1.2;
                      both reported from 3 full minutes and judged from 10
                      (LATENCY_MIN_MINUTES: the 30-minute soak). A 5-minute
                      run has too few requests of each kind to judge
                      latency within 20 % (docs/SOAK.md);
      slowloris_evicted  every slowloris connection closed by the server
                      within 30 s;
      clean_exit      SIGINT: exit 0 within 30 s, no sanitizer report;
      kinds_seen      every kind ran at least once with an "ok" outcome
                      (cloud: routed to the cloud at least once);
  - exit status: 0 when every judged check passes, 1 otherwise, 2 on a
    setup error (missing model, adapters not made, server did not start).
"""
import argparse
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import actors  # noqa: E402
import traffic  # noqa: E402

SANITIZER_MARKERS = ("LeakSanitizer", "ERROR: AddressSanitizer", "runtime error:")
POLICY = {
    "format": "edgellm-policy/1", "version": "soak-2026-12-06",
    "classes": {"private": {"cloud": "never"}, "public": {"cloud": "allowed", "legal_basis": "contract"}},
    "thermal": {"derate_c": 70, "hot_c": 85, "hysteresis_c": 5, "sample_ms": 100, "max_tokens_derated": 8,
                "slots_derated": 1},
    "cloud": {"down_for_s": 3, "timeout_s": 5},
}


def pct(xs, p):
    """The p-th percentile (nearest rank) of xs, None when empty."""
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(p / 100.0 * len(s) + 0.5)) - 1))]


def median(xs):
    return pct(xs, 50)


class Server:
    def __init__(self, args):
        self.args = args
        self.lines, self.port, self.ready = [], None, threading.Event()

    def start(self, timeout):
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.time() + timeout
        while time.time() < deadline and self.proc.poll() is None:
            if self.ready.wait(0.2):
                o = traffic.health(self.port, None, 0)
                if o.cls == "ok" and o.status == 200:
                    return True
        return False

    def _read(self):
        for raw in iter(self.proc.stderr.readline, b""):
            line = raw.decode("utf-8", "replace")
            self.lines.append(line)
            m = re.search(r"listening on http://[^\s:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                self.ready.set()

    def stop(self, timeout=30):
        """SIGINT; (exit code or None when it had to be killed, seconds taken)."""
        t = time.time()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None, timeout
        time.sleep(0.5)  # the stderr reader's last lines
        return self.proc.returncode, round(time.time() - t, 2)

    def stderr(self):
        return "".join(self.lines)


def make_adapters(model, tmp):
    """Three rank-8 adapters on q and v (seeds 1-3); their paths."""
    paths = []
    for i in range(3):
        p = os.path.join(tmp, "lora%d.gguf" % i)
        r = subprocess.run([sys.executable, os.path.join(REPO, "tests", "tools", "gen_lora.py"), "adapter",
                            "--base", model, "--out", p, "--rank", "8", "--seed", str(i + 1), "--targets", "q,v",
                            "--amp-b", "0.1"], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError("gen_lora.py: %s" % r.stderr[-2000:])
        paths.append(p)
    return paths


class Recorder:
    def __init__(self, t0):
        self.t0, self.mu, self.rows, self.in_flight = t0, threading.Lock(), [], 0

    def run(self, kind, fn, port, rng, seq):
        with self.mu:
            self.in_flight += 1
        t = time.time()
        o = fn(port, rng, seq)
        row = {"t": round(t - self.t0, 3), "lat": round(time.time() - t, 4), "kind": kind, "cls": o.cls,
               "status": o.status, "detail": o.detail, "extra": o.extra}
        with self.mu:
            self.rows.append(row)
            self.in_flight -= 1
        return o


def prime(rec, port, seed, n_clients, budget):
    """Every kind once before the clock starts (thermal normal, the cloud up), spread over n_clients
    threads: first-use allocations (an adapter's load, a grammar, a slot file) happen before the
    RSS baseline, and every kind has had its chance to answer ok however short the run."""
    names = sorted(traffic.KINDS)

    def go(i):
        rng = random.Random(seed * 1000 + i)
        for kind in names[i::n_clients]:
            if budget.take():
                rec.run(kind, traffic.KINDS[kind][0], port, rng, rng.randrange(1 << 30))
    ths = [threading.Thread(target=go, args=(i,), daemon=True) for i in range(n_clients)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(len(names) * traffic.TIMEOUT_S)


def client(rec, port, seed, stop_at, budget):
    rng = random.Random(seed)
    names = sorted(traffic.KINDS)
    weights = [traffic.KINDS[n][1] for n in names]
    while time.time() < stop_at and budget.take():
        kind = rng.choices(names, weights)[0]
        o = rec.run(kind, traffic.KINDS[kind][0], port, rng, rng.randrange(1 << 30))
        if o.status == 503:  # a client backs off after a refusal (Retry-After, capped at 1 s here)
            time.sleep(1.0)


class Budget:
    def __init__(self, n):
        self.n, self.mu = n, threading.Lock()

    def take(self):
        with self.mu:
            if self.n <= 0:
                return False
            self.n -= 1
            return True


LATENCY_MIN_MINUTES = 10  # the latency rules judge runs of at least this many full minutes (the 30-minute soak)
DRIFT_MIN_N = 5  # requests of one kind in each half for that kind to count in latency_drift


def latency_drift(rows, lo, hi):
    """Latency in the second half of [lo, hi) against the first half, kind by kind: the median latency of each
    kind's "ok" requests in each half, their ratio, and the geometric mean of the ratios weighted by the smaller
    count. A server that slows down over the run (a leak that lengthens a scan, fragmentation, a queue that does
    not drain) moves every kind's median; the draw of kinds into a minute, which moves a single minute's p99
    by +-20 % on a healthy server (docs/SOAK.md), does not enter a per-kind comparison."""
    mid = (lo + hi) / 2.0
    by = {}
    for r in rows:
        if r["cls"] == "ok" and lo <= r["t"] < hi:
            by.setdefault(r["kind"], ([], []))[r["t"] >= mid].append(r["lat"])
    kinds, num, den = {}, 0.0, 0
    for k, (a, b) in sorted(by.items()):
        if len(a) >= DRIFT_MIN_N and len(b) >= DRIFT_MIN_N and median(a) > 0:
            q = median(b) / median(a)
            w = min(len(a), len(b))
            kinds[k] = {"n": [len(a), len(b)], "median_s": [median(a), median(b)], "ratio": round(q, 4)}
            num, den = num + w * math.log(q), den + w
    return {"window_s": [lo, mid, hi], "kinds": kinds, "ratio": round(math.exp(num / den), 4) if den else None}


def analyse(rows, samples, minutes, warmup_min, slow, exit_code, stop_s, stderr, elapsed):
    full = int(min(elapsed, minutes * 60) // 60)  # whole minutes of sending (the drain after is not one)
    per_min = []
    for m in range(full):
        lat = [r["lat"] for r in rows if r["cls"] == "ok" and m * 60 <= r["t"] < (m + 1) * 60]
        per_min.append({"minute": m + 1, "n": sum(1 for r in rows if m * 60 <= r["t"] < (m + 1) * 60),
                        "n_ok": len(lat), "p50": median(lat), "p90": pct(lat, 90), "p99": pct(lat, 99),
                        "max": max(lat) if lat else None})
    status, kinds = {}, {}
    for r in rows:
        status[str(r["status"])] = status.get(str(r["status"]), 0) + 1
        k = kinds.setdefault(r["kind"], {"ok": 0, "declared": 0, "left": 0, "fail": 0, "extra": {}})
        k[r["cls"]] += 1
        for x, v in r["extra"].items():
            if isinstance(v, int):
                k["extra"][x] = k["extra"].get(x, 0) + v
    declared = {}
    for r in rows:
        if r["cls"] == "declared":
            key = "%d %s" % (r["status"], r["detail"])
            declared[key] = declared.get(key, 0) + 1
    fails = [r for r in rows if r["cls"] == "fail"]
    checks = {}
    w0 = warmup_min * 60
    base = [s[1] for s in samples if w0 <= s[0] < w0 + 60]
    last = [s[1] for s in samples if s[0] >= elapsed - 60]
    rss = {"base_kb": median(base), "last_kb": median(last), "max_after_warmup_kb":
           max((s[1] for s in samples if s[0] >= w0), default=None),
           "anon_base_kb": median([s[5] for s in samples if w0 <= s[0] < w0 + 60]),
           "anon_last_kb": median([s[5] for s in samples if s[0] >= elapsed - 60]),
           "file_base_kb": median([s[6] for s in samples if w0 <= s[0] < w0 + 60]),
           "file_last_kb": median([s[6] for s in samples if s[0] >= elapsed - 60])}
    if base and last and elapsed - 60 >= w0 + 60:
        g = (rss["last_kb"] - rss["base_kb"]) / rss["base_kb"]
        rss["growth"] = round(g, 5)
        checks["rss_growth"] = "pass" if g < 0.02 else "fail"
    else:
        checks["rss_growth"] = "n/a"
    bad5 = [r for r in fails if r["status"] >= 500]
    checks["no_undeclared_5xx"] = "pass" if not bad5 else "fail"
    checks["every_answered"] = "pass" if not fails else "fail"
    ratio = None
    if full >= 3 and per_min[1]["p99"] and per_min[-1]["p99"]:
        ratio = per_min[-1]["p99"] / per_min[1]["p99"]
    checks["p99_last_vs_min2"] = ("pass" if ratio <= 1.2 else "fail") if ratio and full >= LATENCY_MIN_MINUTES else "n/a"
    drift = latency_drift(rows, 60, full * 60)
    checks["latency_drift"] = ("pass" if drift["ratio"] <= 1.2 else "fail") if drift["ratio"] and full >= LATENCY_MIN_MINUTES else "n/a"
    checks["slowloris_evicted"] = "pass" if slow.held and max(slow.held) <= 30 else "fail"
    san = [m for m in SANITIZER_MARKERS if m in stderr]
    checks["clean_exit"] = "pass" if exit_code == 0 and not san else "fail"
    missing = [k for k in traffic.KINDS if kinds.get(k, {}).get("ok", 0) == 0 and k not in ("cancel", "disconnect")]
    missing += [k for k in ("cancel", "disconnect") if kinds.get(k, {}).get("left", 0) == 0]
    if kinds.get("cloud", {}).get("extra", {}).get("route_cloud", 0) == 0:
        missing.append("cloud(route_cloud)")
    checks["kinds_seen"] = "pass" if not missing else "fail"
    return {
        "elapsed_s": round(elapsed, 1), "requests": len(rows), "status_counts": status, "kinds": kinds,
        "declared_refusals": declared, "per_minute": per_min, "p99_ratio_last_vs_min2": ratio, "latency_drift": drift, "rss": rss,
        "slowloris": {"opened": slow.opened, "closed_by_server": len(slow.held), "answered": slow.answered,
                      "max_held_s": max(slow.held) if slow.held else None, "median_held_s": median(slow.held)},
        "exit": {"code": exit_code, "stop_s": stop_s, "sanitizer": san},
        "kinds_missing": missing, "failures": fails[:100], "n_failures": len(fails), "checks": checks,
        "pass": all(v != "fail" for v in checks.values()),
    }


def fmt(x, unit=""):
    return "—" if x is None else ("%.3f%s" % (x, unit) if isinstance(x, float) else "%s%s" % (x, unit))


def write_md(path, rep):
    L = ["# Soak report", "", "%s; %s; %d requests in %.0f s after %s s priming every kind; load average at start %s, "
         "at end %s." % (rep["when"], rep["binary"], rep["requests"], rep["elapsed_s"], rep.get("prime_s"),
                         rep["load_start"], rep["load_end"]), "",
        "| check | result |", "|---|---|"]
    L += ["| %s | %s |" % kv for kv in rep["checks"].items()]
    r = rep["rss"]
    L += ["", "RSS (KiB, medians): after warm-up %s, last minute %s, growth %s, max after warm-up %s (of which anonymous: "
          "%s → %s; file-backed, the mapped model: %s → %s); fds %s → %s, threads %s → %s." % (
        r["base_kb"], r["last_kb"], fmt(r.get("growth")), r["max_after_warmup_kb"], r["anon_base_kb"],
        r["anon_last_kb"], r["file_base_kb"], r["file_last_kb"], rep["fds_first_last"][0],
        rep["fds_first_last"][1], rep["threads_first_last"][0], rep["threads_first_last"][1]),
        "p99 last minute / minute 2: %s. Latency drift (per-kind medians, second half / first half of %s s): %s." % (
            fmt(rep["p99_ratio_last_vs_min2"]), rep["latency_drift"]["window_s"], fmt(rep["latency_drift"]["ratio"])),
        "",
        "| minute | requests | ok | p50 s | p90 s | p99 s | max s |", "|---|---|---|---|---|---|---|"]
    L += ["| %d | %d | %d | %s | %s | %s | %s |" % (m["minute"], m["n"], m["n_ok"], fmt(m["p50"]), fmt(m["p90"]),
                                                 fmt(m["p99"]), fmt(m["max"])) for m in rep["per_minute"]]
    L += ["", "| kind | ok | declared | left | fail | counters |", "|---|---|---|---|---|---|"]
    L += ["| %s | %d | %d | %d | %d | %s |" % (k, v["ok"], v["declared"], v["left"], v["fail"],
                                             ", ".join("%s %d" % kv for kv in sorted(v["extra"].items())))
          for k, v in sorted(rep["kinds"].items())]
    L += ["", "HTTP statuses: " + ", ".join("%s × %d" % kv for kv in sorted(rep["status_counts"].items())), "",
          "Declared refusals: " + (", ".join("%s × %d" % kv for kv in sorted(rep["declared_refusals"].items())) or "none"),
          "", "Slowloris: %(opened)d connections, %(closed_by_server)d closed by the server, held %(median_held_s)s s "
          "median, %(max_held_s)s s at most." % rep["slowloris"],
          "", "Server exit: code %s after SIGINT in %s s; sanitizer reports: %s." % (
              rep["exit"]["code"], rep["exit"]["stop_s"], rep["exit"]["sanitizer"] or "none")]
    if rep["n_failures"]:
        L += ["", "Failures (%d; first 10):" % rep["n_failures"], ""]
        L += ["- t=%.1f s %s: %s %s" % (f["t"], f["kind"], f["status"], f["detail"][:200]) for f in rep["failures"][:10]]
    m = rep["server_metrics"]
    L += ["", "Server counters at the end: " + ", ".join("%s %s" % (k, m[k]) for k in sorted(m)), ""]
    with open(path, "w") as f:
        f.write("\n".join(L))


def plot(path, rep, samples):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib missing: no plot"
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    a1.plot([s[0] / 60 for s in samples], [s[1] / 1024 for s in samples], marker=".")
    a1.set_ylabel("RSS (MiB)")
    after = [s[1] / 1024 for s in samples if s[0] >= rep["warmup_min"] * 60]
    if after:  # the scale of the judged part (start-up, from a few MiB, would flatten it)
        a1.set_ylim(min(after) * 0.98, max(after) * 1.02)
    a1.axvline(rep["warmup_min"], color="grey", linestyle=":", label="end of warm-up")
    a1.legend()
    pm = [m for m in rep["per_minute"] if m["p99"] is not None]
    a2.plot([m["minute"] - 0.5 for m in pm], [m["p99"] for m in pm], marker="o", label="p99")
    a2.plot([m["minute"] - 0.5 for m in pm], [m["p50"] for m in pm], marker=".", label="p50")
    a2.set_ylabel("latency (s)")
    a2.set_xlabel("minute")
    a2.legend()
    a1.set_title("edgellm serve soak: %d requests, %.0f min" % (rep["requests"], rep["elapsed_s"] / 60))
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    return None


def server_metrics(port):
    keep = ("edgellm_requests_total", "edgellm_lora_loads_total", "edgellm_lora_evictions_total",
            "edgellm_route_decisions_total", "edgellm_thermal_transitions_total")
    try:
        st, _, b = traffic._request(port, "GET", "/metrics", timeout=30)
    except OSError:
        return {}
    out = {}
    for line in b.decode().splitlines():
        m = re.match(r"^([a-z_]+(?:\{[^}]*\})?)\s+(\S+)", line)
        if m and m.group(1).startswith(keep):
            out[m.group(1)] = float(m.group(2))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(REPO, "build", "edgellm"))
    ap.add_argument("--model", required=True)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--max-requests", type=int, default=100000)
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--warmup-min", type=float, default=2)
    ap.add_argument("--sample-s", type=float, default=10)
    ap.add_argument("--seed", type=int, default=36)
    ap.add_argument("--threads", default="2")
    ap.add_argument("--start-timeout", type=float, default=300)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    if not os.path.exists(a.model):
        print("soak: no model at %s" % a.model)
        return 2
    tmp = tempfile.mkdtemp(prefix="el-soak-")
    try:
        loras = make_adapters(a.model, tmp)
    except (RuntimeError, subprocess.TimeoutExpired) as ex:
        print("soak: %s" % ex)
        return 2
    sensor = os.path.join(tmp, "temp")
    with open(sensor, "w") as f:
        f.write(actors.TEMPS["normal"])
    ppath = os.path.join(tmp, "policy.json")
    with open(ppath, "w") as f:
        json.dump(POLICY, f)
    slots = os.path.join(tmp, "slots")
    os.mkdir(slots)
    cloud = actors.FakeCloud()
    cloud.up()
    budget = 2 * max(os.path.getsize(p) for p in loras) + 65536
    args = [a.cli, "serve", "-m", a.model, "--allow-unsigned", "--host", "127.0.0.1", "--port", "0", "-c", "2048",
            "-np", "2", "-t", a.threads, "--policy", ppath, "--cloud-url", cloud.url(), "--thermal-source", sensor,
            "--slot-save-path", slots, "--embeddings", "--pooling", "mean", "--lora-budget", str(budget)]
    for i, p in enumerate(loras):
        args += ["--lora", "l%d=%s:0" % (i, p)]
    srv = Server(args)
    load_start = os.getloadavg()
    if not srv.start(a.start_timeout):
        print("soak: the server did not start:\n%s" % srv.stderr()[-3000:])
        srv.stop(5)
        return 2
    rec = Recorder(time.time())
    bud = Budget(a.max_requests)
    t_prime = time.time()
    prime(rec, srv.port, a.seed, a.clients, bud)
    t0 = time.time()
    for row in rec.rows:  # the priming requests: before the clock (t < 0)
        row["t"] = round(row["t"] - (t0 - t_prime), 3)
    rec.t0 = t0
    flip = actors.Flipper(sensor, cloud, t0)
    flip.apply(0)
    flip.start()
    slow = actors.Slowloris(srv.port).start()
    rss = actors.RssSampler(srv.proc.pid, t0, a.sample_s).start()
    stop_at = t0 + a.minutes * 60
    ths = [threading.Thread(target=client, args=(rec, srv.port, a.seed * 100 + i, stop_at, bud), daemon=True)
           for i in range(a.clients)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(a.minutes * 60 + traffic.TIMEOUT_S + 60)
    elapsed = time.time() - t0
    slow.stop()
    rss.sample()
    rss.stop()
    flip.stop()
    hung = rec.in_flight
    metrics = server_metrics(srv.port)
    code, stop_s = srv.stop()
    rows = list(rec.rows)
    rep = analyse(rows, rss.samples, a.minutes, a.warmup_min, slow, code, stop_s, srv.stderr(), elapsed)
    if hung:
        rep["checks"]["every_answered"] = "fail"
        rep["pass"] = False
    rep.update({"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0)), "binary": a.cli,
                "model": os.path.basename(a.model), "args": vars(a), "serve_args": args[1:],
                "load_start": "%.2f %.2f %.2f" % load_start, "load_end": "%.2f %.2f %.2f" % os.getloadavg(),
                "warmup_min": a.warmup_min, "prime_s": round(t0 - t_prime, 1), "hung_at_end": hung,
                "rss_samples": rss.samples,
                "fds_first_last": [rss.samples[0][4], rss.samples[-1][4]] if rss.samples else [None, None],
                "threads_first_last": [rss.samples[0][3], rss.samples[-1][3]] if rss.samples else [None, None],
                "schedule_changes": flip.changes[:40], "cloud_hits": cloud.hits, "server_metrics": metrics,
                "stderr_tail": srv.stderr()[-4000:]})
    with open(os.path.join(a.out, "soak.json"), "w") as f:
        json.dump(rep, f, indent=1)
    write_md(os.path.join(a.out, "soak.md"), rep)
    note = plot(os.path.join(a.out, "soak.png"), rep, rss.samples)
    print("soak: %d requests in %.0f s; checks %s%s" % (rep["requests"], elapsed, json.dumps(rep["checks"]),
                                                        "; " + note if note else ""))
    print("soak: %s" % ("PASS" if rep["pass"] else "FAIL"))
    return 0 if rep["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
