#!/usr/bin/env python3
"""bench/server-batch/trace.py — summarise an EL_BATCH_TRACE file (sched/batch.c).

usage: trace.py TRACE [--from-round N]

The trace has one line per decode round
  R <n> <start_us> <end_us> <rows> <timed 0/1> <bound_us> <decoding> [<session> <submit_us>]...
and one per prefill chunk
  P <n> <start_us> <end_us> <tokens> <session>
Prints where a stream's inter-token time goes, at the batcher (no HTTP):
  - rounds by row count: how many, duration p50/p95 (the forward);
  - rounds started by the wait bound (a set not complete), and with fewer
    rows than sessions decoding;
  - per step of a session: gap = its submission - the end of its previous
    round (its sampling and callback), wait = its round's start - its
    submission, and the step time = its round's end - its previous round's
    end (what the client sees as inter-token time, minus HTTP);
  - missed rounds: a round ran between a session's two consecutive rounds
    without it (the stream submitted too late for it, or was not yet there);
  - idle: time between rounds with no forward (neither a round nor a chunk).
"""
import sys


def pct(v, q):
    v = sorted(v)
    if not v:
        return float("nan")
    return v[min(len(v) - 1, max(0, int(round(q * (len(v) - 1)))))]


def stats(v):
    return "n %d mean %.2f p50 %.2f p95 %.2f max %.2f ms" % (
        len(v), sum(v) / len(v) / 1e3 if v else float("nan"), pct(v, .5) / 1e3, pct(v, .95) / 1e3,
        max(v) / 1e3 if v else float("nan"))


def main():
    path = sys.argv[1]
    first = int(sys.argv[sys.argv.index("--from-round") + 1]) if "--from-round" in sys.argv else 0
    rounds, chunks = [], []
    for line in open(path):
        f = line.split()
        if not f or f[0].startswith("#"):
            continue
        if f[0] == "R":
            n, st, en, k, timed, bound, dec = (int(x) for x in f[1:8])
            rows = [(int(f[8 + 2 * i]), int(f[9 + 2 * i])) for i in range(k)]
            rounds.append(dict(n=n, st=st, en=en, k=k, timed=timed, bound=bound, dec=dec, rows=rows))
        elif f[0] == "P":
            chunks.append(dict(st=int(f[2]), en=int(f[3]), n=int(f[4]), s=int(f[5])))
    rounds = [r for r in rounds if r["n"] >= first]
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
        print("prefill chunks: %d, %s" % (len(chunks), stats([c["en"] - c["st"] for c in chunks])))
    # per session: its rounds in order
    per = {}
    for i, r in enumerate(rounds):
        for s, sub in r["rows"]:
            per.setdefault(s, []).append((i, sub))
    gaps, waits, steps, missed_steps, waits_busy = [], [], [], 0, []
    step_parts = []
    for s, lst in per.items():
        for (ia, _), (ib, sub) in zip(lst, lst[1:]):
            ra, rb = rounds[ia], rounds[ib]
            gap, wait, step = sub - ra["en"], rb["st"] - sub, rb["en"] - ra["en"]
            gaps.append(gap)
            waits.append(wait)
            steps.append(step)
            step_parts.append((step, gap, wait, rb["en"] - rb["st"], ib - ia - 1, rb["k"]))
            if ib - ia > 1:
                missed_steps += 1
            # submitted while another round ran
            if any(r["st"] < sub < r["en"] for r in rounds[ia + 1:ib + 1]):
                waits_busy.append(wait)
    print("steps (a session's round end to its next round end): %s" % stats(steps))
    print("  gap (round end -> its next submission): %s" % stats(gaps))
    print("  wait (submission -> its round's start): %s" % stats(waits))
    print("  steps that missed a round: %d of %d; submissions made while a round ran: %d" % (
        missed_steps, len(steps), len(waits_busy)))
    # the slowest 5 %: what they are made of
    step_parts.sort(reverse=True)
    tail = step_parts[:max(1, len(step_parts) // 20)]
    if tail:
        print("  slowest 5%% of steps (%d): mean step %.2f = gap %.2f + wait %.2f + own round %.2f ms (+ rest); "
              "missed a round: %d; own round rows mean %.2f" % (
                  len(tail), sum(t[0] for t in tail) / len(tail) / 1e3, sum(t[1] for t in tail) / len(tail) / 1e3,
                  sum(t[2] for t in tail) / len(tail) / 1e3, sum(t[3] for t in tail) / len(tail) / 1e3,
                  sum(1 for t in tail if t[4] > 0), sum(t[5] for t in tail) / len(tail)))
    # idle between forwards
    ev = sorted([(r["st"], r["en"]) for r in rounds] + [(c["st"], c["en"]) for c in chunks if c["st"] >= rounds[0]["st"]])
    busy = sum(e - s for s, e in ev)
    span = ev[-1][1] - ev[0][0]
    print("forwards busy %.1f%% of %.1f ms (rounds %.1f ms, chunks %.1f ms); idle between forwards %.1f ms" % (
        100.0 * busy / span if span else 0, span / 1e3, sum(r["en"] - r["st"] for r in rounds) / 1e3,
        sum(c["en"] - c["st"] for c in chunks if c["st"] >= rounds[0]["st"]) / 1e3, (span - busy) / 1e3))


if __name__ == "__main__":
    main()
