#!/usr/bin/env python3
"""test-summary.py — the end of `make test`: what ran, passed, failed and was skipped, and why.

Contract: `test-summary.py NAME=BUILD_DIR [NAME=BUILD_DIR ...]` reads each
build's BUILD_DIR/junit.xml (ctest --output-junit, written by `make
test-release` / `make test-asan`) and prints, per build, the counts; then one
line per skipped test with the reason its output gave (the last line that
mentions a skip); then, per failed test, the last 25 lines of its output;
and last the closing line "N passed, N failed, N skipped" over all builds.
A build whose junit.xml is missing counts as one failure (its suite did not
run). Under CI=true a skip counts as a failure unless its reason says the
test "needs hardware this machine lacks" (el_test_skip_hw in tests/testutil.c):
everything else a test needs, `make test` installs or generates, and a missing
fixture fails its own test there already (tests/fixtures/fixtures.py,
tests/testutil.c). Exit 0 when nothing failed, 1 otherwise.
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
import fixtures  # noqa: E402  (tests/fixtures/fixtures.py: under_ci)


def reason(out):
    lines = [l.strip() for l in (out or "").splitlines() if l.strip()]
    hits = [l for l in lines if re.search(r"skip", l, re.I)]
    return (hits[-1] if hits else (lines[-1] if lines else "(no output)"))[:300]


def main(argv):
    total = {"passed": 0, "failed": 0, "skipped": 0}
    skips, fails = [], []
    for arg in argv:
        name, _, d = arg.partition("=")
        path = os.path.join(d, "junit.xml")
        if not os.path.isfile(path):
            print(f"{name}: no {path}: the suite did not run")
            total["failed"] += 1
            fails.append((name, "(the whole suite)", ""))
            continue
        root = ET.parse(path).getroot()
        n = {"passed": 0, "failed": 0, "skipped": 0}
        for tc in root.iter("testcase"):
            out = tc.findtext("system-out") or ""
            status = tc.get("status")
            if status == "run":
                n["passed"] += 1
            elif status in ("notrun", "disabled") or tc.find("skipped") is not None:
                n["skipped"] += 1
                skips.append((name, tc.get("name"), reason(out)))
            else:
                n["failed"] += 1
                fails.append((name, tc.get("name"), out))
        ran = n["passed"] + n["failed"]
        print(f"{name}: {ran + n['skipped']} tests, {ran} ran: {n['passed']} passed, {n['failed']} failed; "
              f"{n['skipped']} skipped")
        for k in total:
            total[k] += n[k]
    ci = fixtures.under_ci()
    if skips:
        print("skipped:")
        for b, t, why in skips:
            hw = "needs hardware" in why
            print(f"  {b} {t}: {why}" + ("" if hw or not ci else "  <- a failure under CI=true"))
            if ci and not hw:
                total["failed"] += 1
                total["skipped"] -= 1
    for b, t, out in fails:
        print(f"FAILED {b} {t}; the end of its output:")
        for line in out.splitlines()[-25:]:
            print("  | " + line)
    print(f"{total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped")
    return 1 if total["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
