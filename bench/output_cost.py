#!/usr/bin/env python3
"""What `fsprof run`'s shim adds per call of printf, and per call of fstat
(a program that never prints), for this build and another one, in the same
rounds.

Each round runs bench/selfcost_ab.c under each build, in turn: blocks of
calls through the program's symbols (the shim's wrappers) alternate with
blocks through libc's own functions, in one process, so that each figure
is the wrapper's cost free of what differs between processes. `printf` is
fprintf of a number and a newline to a buffered stream on /dev/null.
Prints per workload and build the median over rounds of each run's median
added ns per call (selfcost_bound.ab_added), and new minus old.

usage: bench/output_cost.py [--fsprof NEW] --other OLD [--rounds N]
                            [--blocks B] [--calls C]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from selfcost_bound import ab_added  # noqa: E402

WORKLOADS = ["fstat", "printf"]


def added(fsprof, ab, workload, blocks, calls):
    out = subprocess.run(
        [fsprof, "run", "-q", "-o", os.devnull, "--", ab, workload, str(blocks), str(calls)],
        check=True, capture_output=True, text=True).stdout
    return ab_added(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsprof", default=os.path.join(ROOT, "target/release/fsprof"))
    ap.add_argument("--other", required=True, help="the build to compare with (old)")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--blocks", type=int, default=41)
    ap.add_argument("--calls", type=int, default=20000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ab = os.path.join(tmp, "selfcost_ab")
        subprocess.run(["cc", "-O2", "-o", ab, os.path.join(ROOT, "bench/selfcost_ab.c"), "-ldl"],
                       check=True)
        got = {(w, b): [] for w in WORKLOADS for b in ("new", "old")}
        for r in range(a.rounds):
            # Alternate which build goes first, so that a drift cancels.
            order = [("new", a.fsprof), ("old", a.other)]
            for name, exe in order if r % 2 == 0 else order[::-1]:
                for w in WORKLOADS:
                    got[(w, name)].append(added(exe, ab, w, a.blocks, a.calls))
    print(f"added ns per call, median of {a.rounds} rounds (new {a.fsprof}, old {a.other})")
    for w in WORKLOADS:
        new, old = (statistics.median(got[(w, b)]) for b in ("new", "old"))
        print(f"  {w:7} new {new:7.2f}  old {old:7.2f}  new-old {new - old:+7.2f}")


if __name__ == "__main__":
    main()
