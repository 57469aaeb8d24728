#!/usr/bin/env python3
"""bench/server-batch/trace.py — summarise an EL_BATCH_TRACE file (runtime/batch.c).

usage: trace.py TRACE

The trace has one line per decode round
  R <n> <start_us> <end_us> <rows> <timed 0/1> <bound_us> <decoding> [<session> <submit_us>]...
one per prefill chunk
  P <n> <start_us> <end_us> <tokens> <session> [<admitted 0/1>]
(admitted: the chunk ran ahead of a due round of fresh sessions, the
admission window of runtime/batch.h; absent in older traces)
and one when a session starts (D) or ends (L) its decode phase
  D <time_us> <session>
Prints where a stream's inter-token time goes, at the batcher (no HTTP):
  - rounds by row count: how many, duration p50/p95 (the forward);
  - rounds started by the wait bound (a set not complete), and with fewer
    rows than sessions decoding;
  - per step of a session (from its first token, D, or its previous round's
    end, to its next round's end: what the client sees as inter-token time,
    minus HTTP): gap = its submission - that start (its sampling and
    callback), wait = its round's start - its submission;
  - steps that missed a round (a round ran in the step without this
    session) and steps that waited for a prefill chunk (a chunk started
    in the step), overall and among the slowest 5 %;
  - idle: time between forwards (neither a round nor a chunk running).
"""
import sys


def pct(v, q):
    v = sorted(v)
    if not v:
        return float("nan")
    return v[min(len(v) - 1, max(0, int(round(q * (len(v) - 1)))))]


def stats(v):
    if not v:
        return "n 0"
    return "n %d mean %.2f p50 %.2f p95 %.2f max %.2f ms" % (
        len(v), sum(v) / len(v) / 1e3, pct(v, .5) / 1e3, pct(v, .95) / 1e3, max(v) / 1e3)


def main():
    rounds, chunks, starts = [], [], {}
    for line in open(sys.argv[1]):
        f = line.split()
        if not f or f[0].startswith("#"):
            continue
        if f[0] == "R":
            n, st, en, k, timed, bound, dec = (int(x) for x in f[1:8])
            rows = [(int(f[8 + 2 * i]), int(f[9 + 2 * i])) for i in range(k)]
            rounds.append(dict(n=n, st=st, en=en, k=k, timed=timed, bound=bound, dec=dec, rows=rows))
        elif f[0] == "P":
            chunks.append(dict(st=int(f[2]), en=int(f[3]), n=int(f[4]), s=int(f[5]),
                               adm=int(f[6]) if len(f) > 6 else 0))
        elif f[0] == "D":
            starts.setdefault(int(f[2]), []).append(int(f[1]))
    if not rounds:
        print("no rounds")
        return
    byk = {}
    for r in rounds:
        byk.setdefault(r["k"], []).append(r["en"] - r["st"])
    print("rounds: %d (%d by the wait bound, %d with fewer rows than sessions decoding)" % (
        len(rounds), sum(r["timed"] for r in rounds), sum(r["k"] < r["dec"] for r in rounds)))
    for k in sorted(byk):
        print("  %d rows: %s" % (k, stats(byk[k])))
    if chunks:
        print("prefill chunks: %d (%d admitted ahead of a fresh round), %s" % (
            len(chunks), sum(c["adm"] for c in chunks), stats([c["en"] - c["st"] for c in chunks])))
    per = {}
    for i, r in enumerate(rounds):
        for s, sub in r["rows"]:
            per.setdefault(s, []).append((i, sub))
    gaps, waits, steps, parts = [], [], [], []
    for s, lst in per.items():
        ds = sorted(starts.get(s, []))
        prev = None  # (the step's start: a D or the previous round's end, that round's index or -1)
        for ib, sub in lst:
            rb = rounds[ib]
            d = [t for t in ds if t <= sub and (prev is None or t > prev[0])]
            if d:
                prev = (d[-1], -1)  # a new decode phase: the step starts at its first token
            elif prev is None:  # no D line (an older trace): steps from its first round on
                if not ds:
                    prev = (rb["en"], ib)
                continue
            t0 = prev[0]
            missed = sum(1 for r in rounds[:ib] if r["st"] > t0)
            chunked = sum(1 for c in chunks if t0 < c["st"] < rb["st"])
            gaps.append(sub - t0)
            waits.append(rb["st"] - sub)
            steps.append(rb["en"] - t0)
            parts.append((rb["en"] - t0, sub - t0, rb["st"] - sub, rb["en"] - rb["st"], missed, chunked, rb["k"]))
            prev = (rb["en"], ib)
    print("steps (first token or round end -> next round end): %s" % stats(steps))
    print("  gap (-> its submission): %s" % stats(gaps))
    print("  wait (submission -> its round's start): %s" % stats(waits))
    print("  steps that missed a round: %d of %d; that waited for a prefill chunk: %d" % (
        sum(p[4] > 0 for p in parts), len(parts), sum(p[5] > 0 for p in parts)))
    parts.sort(reverse=True)
    tail = parts[:max(1, len(parts) // 20)]
    if tail:
        m = lambda i: sum(t[i] for t in tail) / len(tail) / 1e3  # noqa: E731
        print("  slowest 5%% (%d steps): mean %.2f ms = gap %.2f + wait %.2f + own round %.2f; missed a round: %d, "
              "waited for a chunk: %d, own round rows mean %.2f" % (
                  len(tail), m(0), m(1), m(2), m(3), sum(t[4] > 0 for t in tail), sum(t[5] > 0 for t in tail),
                  sum(t[6] for t in tail) / len(tail)))
    ev = sorted([(r["st"], r["en"]) for r in rounds] + [(c["st"], c["en"]) for c in chunks])
    busy = sum(e - s for s, e in ev)
    span = ev[-1][1] - ev[0][0]
    print("forwards: %.1f ms of rounds, %.1f ms of chunks; %.1f ms with no forward running (incl. between requests)" % (
        sum(r["en"] - r["st"] for r in rounds) / 1e3, sum(c["en"] - c["st"] for c in chunks) / 1e3, (span - busy) / 1e3))


if __name__ == "__main__":
    main()
