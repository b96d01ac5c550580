#!/usr/bin/env python3
"""What an `fsprof trace` whose command maps no file costs the page faults
of every other process of the machine (root): its end programs' software
events are opened with the programs' load, disabled, and enabled only when
a traced process first maps a file (crates/fsprof-kernel faults.rs), and
while they wait the kernel looks up the (empty) list of enabled events at
every page fault of the machine. bench/anon_faults.c, a process fsprof does
not trace, touches fresh anonymous pages alone and beside `fsprof trace --
sleep` of this build and of --other, in interleaved rounds; medians of its
best-of-5 ns per fault, and the paired differences.

The faulting process runs under SCHED_FIFO (chrt -f 50).

usage: sudo python3 bench/faults_beside.py [--fsprof PATH] [--other PATH] [--rounds N] [--mib M]
"""
import argparse
import os
import statistics as st
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def faults(exe, mib):
    # Under SCHED_FIFO: on a busy machine a round is otherwise mostly the
    # other engineers' time slices.
    out = subprocess.run(["chrt", "-f", "50", exe, str(mib), "5"], check=True,
                         capture_output=True, text=True)
    return float(out.stdout)


def beside(fsprof, exe, mib, d):
    """ns per fault while `fsprof trace -- sleep` waits with its programs loaded."""
    trace = os.path.join(d, "beside.trace")
    p = subprocess.Popen([fsprof, "trace", "-f", "-q", "-o", trace, "--", "sleep", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The programs are loaded (and the events opened) within a few ms.
    time.sleep(0.3)
    ns = faults(exe, mib)
    if p.wait() != 0:
        sys.exit(f"{fsprof} trace failed")
    return ns


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--fsprof", default=os.path.join(ROOT, "target", "release", "fsprof"))
    p.add_argument("--other")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--mib", type=int, default=16)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "anon_faults")
        subprocess.run(["cc", "-O2", "-o", exe, os.path.join(ROOT, "bench", "anon_faults.c")],
                       check=True)
        print(f"# load before: {' '.join(open('/proc/loadavg').read().split()[:3])}; "
              f"{a.rounds} rounds, {a.mib} MiB touched 5 times a sample")
        names = ["alone", "beside this"] + (["beside other"] if a.other else [])
        res = {n: [] for n in names}
        for _ in range(a.rounds):
            res["alone"].append(faults(exe, a.mib))
            res["beside this"].append(beside(a.fsprof, exe, a.mib, d))
            if a.other:
                res["beside other"].append(beside(a.other, exe, a.mib, d))
        print(f"{'variant':<14} {'ns/fault':>9}  (min..max)")
        for n in names:
            v = res[n]
            print(f"{n:<14} {st.median(v):9.1f}  ({min(v):.1f}..{max(v):.1f})")
        for n in names[1:]:
            diff = [b - x for b, x in zip(res[n], res["alone"])]
            print(f"{n} - alone, paired by round: median {st.median(diff):+.1f} ns a fault "
                  f"(rounds {min(diff):+.1f}..{max(diff):+.1f})")
        if a.other:
            diff = [b - x for b, x in zip(res["beside this"], res["beside other"])]
            print(f"this - other, paired by round: median {st.median(diff):+.1f} ns a fault "
                  f"(rounds {min(diff):+.1f}..{max(diff):+.1f})")
        print(f"# load after: {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
