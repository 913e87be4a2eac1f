#!/usr/bin/env python3
"""What the ctest runs in a log came to: scripts/test.sh's summary line of a stage.

    ctest-tally.py LOG
    ctest-tally.py --suites LOG    where the time went: seconds per test suite, longest first
    ctest-tally.py --self-test     checks itself on a made-up log (a ctest test of the suite)

LOG is the console output of one or more ctest runs (a stage's, the v2 guest's with its rerun of what
failed and a second boot's). Each test's result is its last one; a test that failed (or timed out, or did
not run) before it passed "passed only on a rerun". Prints one line of counts, then a line each naming
the tests that were skipped, passed only on a rerun or failed; prints nothing when the log has no test.
Exits 0 (the stage's own exit status says whether it failed).
"""
import re
import sys

# "  5/651 Test   #5: Name.Of.Test ......   Passed    0.01 sec", "***Skipped", "***Failed", "***Timeout",
# "***Exception: SegFault", "***Not Run ...": colours and carriage returns stripped first.
# (A parameterized test's name is followed by "  # GetParam() = ..."; the result is the last word of
# those after the dots.)
TEST = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) (.*)$")
STATUS = re.compile(r"(?:\s|\*{3})(Passed|Skipped|Failed|Timeout|Exception|Not Run)\b")
SECONDS = re.compile(r"([0-9.]+) sec\s*$")
COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def tally(lines):
    results = {}  # name -> results in order
    for line in lines:
        m = TEST.match(COLOUR.sub("", line).replace("\r", ""))
        status = STATUS.findall(m.group(2)) if m else None
        if status:
            results.setdefault(m.group(1), []).append(status[-1])
    return results


def suites(lines):
    """Seconds and tests per suite (the name up to its first '.', parameterized ones' prefix kept)."""
    took = {}
    for line in lines:
        line = COLOUR.sub("", line).replace("\r", "")
        m = TEST.match(line)
        t = SECONDS.search(line) if m else None
        if t:
            suite = m.group(1).split(".")[0]
            seconds, n = took.get(suite, (0.0, 0))
            took[suite] = (seconds + float(t.group(1)), n + 1)
    return took


SAMPLE = """\
      Start  1: A.passes
  1/5 Test  #1: A.passes .....................   Passed    0.01 sec
  2/5 Test  #2: A.skips ......................***Skipped   0.01 sec
  3/5 Test  #3: B.flaky ......................***Failed    1.50 sec
  4/5 Test  #4: P/C.param/x  # GetParam() = "/t/Failed.toml" ...   Passed    0.20 sec
  5/5 Test  #5: B.fails ......................***Timeout 600.00 sec
keel-vm: failed on the first try, run once more: B.flaky B.fails
\x1b[0;32m1/2 Test #3: B.flaky ..........   Passed    2.00 sec\x1b[0m
2/2 Test #5: B.fails ..........***Exception: SegFault  0.10 sec
"""


def self_test():
    lines = SAMPLE.splitlines()
    results = tally(lines)
    want = {"A.passes": ["Passed"], "A.skips": ["Skipped"], "B.flaky": ["Failed", "Passed"],
            "P/C.param/x": ["Passed"], "B.fails": ["Timeout", "Exception"]}
    assert results == want, results
    took = suites(lines)
    assert took["B"] == (1.5 + 600.0 + 2.0 + 0.1, 4), took
    print("ctest-tally: self-test ok")
    return 0


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        return self_test()
    by_suite = args[:1] == ["--suites"]
    if by_suite:
        args = args[1:]
    if len(args) != 1:
        print("usage: ctest-tally.py [--suites] LOG", file=sys.stderr)
        return 2
    with open(args[0], errors="replace") as f:
        lines = f.readlines()
    if by_suite:
        took = suites(lines)
        total = sum(s for s, _ in took.values())
        for suite, (seconds, n) in sorted(took.items(), key=lambda kv: -kv[1][0]):
            print(f"{seconds:8.1f} s  {100 * seconds / total if total else 0:5.1f} %  {n:4d} tests  {suite}")
        return 0
    results = tally(lines)
    if not results:
        return 0
    passed = sorted(n for n, r in results.items() if r[-1] == "Passed" and len(r) == 1)
    rerun = sorted(n for n, r in results.items() if r[-1] == "Passed" and len(r) > 1)
    skipped = sorted(n for n, r in results.items() if r[-1] == "Skipped")
    failed = sorted(n for n, r in results.items() if r[-1] not in ("Passed", "Skipped"))
    print(f"{len(results)} run: {len(passed)} passed, {len(skipped)} skipped, "
          f"{len(rerun)} passed only on a rerun, {len(failed)} failed")
    for label, names in (("skipped", skipped), ("passed only on a rerun", rerun), ("failed", failed)):
        if names:
            print(f"  {label}: {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
