#!/usr/bin/env python3
"""Checks the report's self-overhead figure against what the shim really
adds to the traced program, measured without fsprof's help.

The figure (`self-overhead X per call ...; at most Y in all`) is the
shim's own measurement at the start of the run: the time its bookkeeping
adds around one call, timed back to back in a hot loop, times the calls
profiled. It leaves out fsprof's fixed start-up (its own process, the run
directory, the shim's set-up in each process), which does not grow with
the calls. This script measures the added time two ways, interleaved,
in rounds, medians:

1. A loop of N cached preads timed from inside the program (bench/percall.c):
   per call, the loop's time under `fsprof run` minus its time bare. The
   estimate is the profile's `overhead.per_call_ns`.
2. A warm `grep -r` (wall and CPU time of the whole process tree, from
   wait4): under `fsprof run` minus bare, minus the same difference for
   `true` (the fixed part). The estimate is the profile's
   `overhead.estimated_total_ns`.

Prints, per workload, the measured added time, the estimate, and their
ratio; a ratio >= 1 means the printed figure bounds what was measured.

usage: bench/selfcost_bound.py [--rounds N] [--fsprof PATH] [--target DIR] [--calls N]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATTERN = "fsprof_bench_pattern_that_is_not_there"


def run_rusage(cmd):
    """(wall s, user+sys CPU s of the process tree, stdout) of `cmd`."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode not in (0, 1):  # grep finds nothing: 1
        sys.exit(f"{cmd} exited {p.returncode}")
    return wall, ru.ru_utime + ru.ru_stime, out.decode()


def overhead(profile):
    with open(profile) as f:
        o = json.load(f)["meta"]["overhead"]
    return o["per_call_ns"], o["estimated_total_ns"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--fsprof", default=os.path.join(ROOT, "target/release/fsprof"))
    ap.add_argument("--target", default="/usr/include")
    ap.add_argument("--calls", type=int, default=2000000)
    args = ap.parse_args()
    if not os.path.exists(args.fsprof):
        sys.exit(f"{args.fsprof} not found: run `cargo build --release` first")
    tmp = tempfile.mkdtemp(prefix="fsprof-selfcost-")
    prof = os.path.join(tmp, "p.json")
    exe = os.path.join(tmp, "percall")
    subprocess.run(["cc", "-O2", "-o", exe, os.path.join(ROOT, "bench/percall.c")], check=True)
    fs = [args.fsprof, "run", "-q", "-f", "-o", prof, "--"]
    grep = [shutil.which("grep"), "-r", PATTERN, args.target]
    true = [shutil.which("true")]
    loop = [exe, "pread", str(args.calls)]
    load = os.getloadavg()
    rows = {k: [] for k in ["loop added ns", "loop estimate ns", "grep added wall ms",
                            "grep added cpu ms", "grep estimate ms"]}
    for v in [grep, fs + grep, true, fs + true]:
        run_rusage(v)
    for _ in range(args.rounds):
        bare = float(run_rusage(loop)[2])
        traced = float(run_rusage(fs + loop)[2])
        rows["loop added ns"].append(traced - bare)
        rows["loop estimate ns"].append(overhead(prof)[0])
        g = run_rusage(grep)
        gf = run_rusage(fs + grep)
        est = overhead(prof)[1] / 1e6
        t = run_rusage(true)
        tf = run_rusage(fs + true)
        rows["grep added wall ms"].append(((gf[0] - g[0]) - (tf[0] - t[0])) * 1e3)
        rows["grep added cpu ms"].append(((gf[1] - g[1]) - (tf[1] - t[1])) * 1e3)
        rows["grep estimate ms"].append(est)
    load_after = os.getloadavg()
    print(f"# self-overhead estimate against measured added time, {args.rounds} interleaved rounds, "
          f"medians; load {load[0]:.1f} -> {load_after[0]:.1f}")
    print(f"# loop: {args.calls} cached preads timed from inside; grep: grep -r {PATTERN} {args.target}, "
          "warm, minus the same difference for `true`")
    for k, v in rows.items():
        print(f"{k:<22} {statistics.median(v):10.2f}   ({min(v):.2f}..{max(v):.2f})")
    loop_ratio = statistics.median(rows["loop estimate ns"]) / statistics.median(rows["loop added ns"])
    print(f"loop: estimate / measured = {loop_ratio:.2f}")
    for what in ["wall", "cpu"]:
        m = statistics.median(rows[f"grep added {what} ms"])
        e = statistics.median(rows["grep estimate ms"])
        print(f"grep: estimate / measured ({what}) = {e / m:.2f}" if m > 0 else
              f"grep: measured ({what}) {m:.2f} ms is not above zero")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
