#!/usr/bin/env python3
"""Checks the report's self-overhead figure against what the shim really
adds to the traced program, measured without fsprof's help.

The figure (`self-overhead X per call at most, ...; × the calls ≤ Y`) is,
for `fsprof run`, the shim's own cost timed inside about one call in 64 of
the run itself (the clock read at the wrapper's entry and exit too, each
read waiting for earlier work; the call's own interval subtracted), plus
the wrapper's part outside that window, timed once at start
(`overhead.sampled` in the profile). It is meant as an upper bound: the
window holds the wrapper's work with nothing of the program's overlapping
it. Before sampling the figure was a hot loop at start-up
(`sampled.hot_loop_ns`, printed for comparison).

Ground truth, measured in interleaved rounds, medians:

1. In one process (bench/selfcost_ab.c): blocks of calls through the
   program's symbols (the shim's wrappers) alternate with blocks of the same
   calls through libc found with dlsym (never the shim); the median over
   pairs of blocks (two adjacent pairs averaged, so that the order within a
   pair cancels) of the difference per call is what the shim adds.
   Workloads: cached `pread` of 1 byte, `fstat`, `files` (open, fstat, read
   to the end, close of 300 files under --target: grep's call mix) and
   `scan` (files, each buffer searched for a string as grep does: the
   program's own work between the calls). The same program run bare must
   measure 0 (printed as a check of the method).
2. Between processes (noisier): a 2M-call pread loop timed from inside
   (bench/percall.c), traced minus bare, wall time, with fsprof's own
   threads on the machine too: printed, not judged; and a warm `grep -r`:
   the CPU time (user + system) of the grep process alone, from wait4 in a
   small launcher (bench/cputime.c, run under `fsprof run` so that fsprof's
   own CPU is not in it), traced minus bare in --grep-pairs adjacent pairs
   per round, median of all pairs, minus the same median for `true` (the
   shim's set-up in a process, which does not grow with the calls).

Prints per workload the measured added time, the figure and their ratio,
and whether the figure is at least the measured time (the bound holds) for
pread, fstat, files, scan and grep; exits 1 if it does not for any. Each
in-process ratio is also judged against --tolerance as an estimate.
`--stress N` runs N memory-streaming processes during the measurement (a
loaded machine on demand, for a re-run at idle); `--only` picks workloads.

`--before OLD_FSPROF` measures another build's added time per call in the
same rounds (the per-call cost before and after a change).

usage: bench/selfcost_bound.py [--rounds N] [--fsprof PATH] [--target DIR]
                               [--calls N] [--tolerance F] [--stress N]
                               [--before PATH] [--grep-pairs K] [--only W,...]
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
# (workload, blocks, calls per block or "list")
AB = [("pread", 400, "2000"), ("fstat", 400, "2000"), ("files", 200, "list"),
      ("scan", 200, "list")]
WORKLOADS = [w for w, _, _ in AB] + ["loop", "grep"]
STRESS = r"""
import sys
b = bytearray(64 << 20)
while True:
    for i in range(0, len(b), 4096):
        b[i] = (b[i] + 1) & 255
"""


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
    s = o.get("sampled") or {}
    return {"figure": o["per_call_ns"], "total": o["estimated_total_ns"],
            "hot": s.get("hot_loop_ns", o["per_call_ns"]), "samples": s.get("samples", 0),
            "ci95": s.get("ci95_ns", float("nan"))}


def ab_added(out):
    """Median added ns per call over the pairs that selfcost_ab printed,
    each two adjacent pairs (wrapped first, then libc first) averaged: a
    block that runs slower for being first or second in its pair (the
    program's own work leaves the cache in another state) cancels within
    the two, where a median of single pairs would pick one side of it."""
    v = [float(x) for x in out.split()[1:]]
    return statistics.median((a + b) / 2 for a, b in zip(v[0::2], v[1::2]))


def med(v):
    return statistics.median(v) if v else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--fsprof", default=os.path.join(ROOT, "target/release/fsprof"))
    ap.add_argument("--target", default="/usr/include")
    ap.add_argument("--calls", type=int, default=2000000)
    ap.add_argument("--tolerance", type=float, default=0.35)
    ap.add_argument("--stress", type=int, default=0)
    ap.add_argument("--grep-pairs", type=int, default=5)
    ap.add_argument("--only", default=",".join(WORKLOADS),
                    help="comma-separated workloads to measure, of " + ",".join(WORKLOADS))
    ap.add_argument("--before", help="another fsprof whose added time per call is measured "
                    "in the same rounds (the per-call cost before a change)")
    args = ap.parse_args()
    only = args.only.split(",")
    if not only or any(w not in WORKLOADS for w in only):
        sys.exit(f"--only takes a comma-separated list of {','.join(WORKLOADS)}")
    ab_list = [a for a in AB if a[0] in only]
    if not os.path.exists(args.fsprof):
        sys.exit(f"{args.fsprof} not found: run `cargo build --release` first")
    tmp = tempfile.mkdtemp(prefix="fsprof-selfcost-")
    prof = os.path.join(tmp, "p.json")
    exe, ab = os.path.join(tmp, "percall"), os.path.join(tmp, "selfcost_ab")
    subprocess.run(["cc", "-O2", "-o", exe, os.path.join(ROOT, "bench/percall.c")], check=True)
    subprocess.run(["cc", "-O2", "-o", ab, os.path.join(ROOT, "bench/selfcost_ab.c"), "-ldl"],
                   check=True)
    cputime = os.path.join(tmp, "cputime")
    subprocess.run(["cc", "-O2", "-o", cputime, os.path.join(ROOT, "bench/cputime.c")], check=True)
    listfile = os.path.join(tmp, "files.txt")
    names = []
    for d, _, fs in os.walk(args.target):
        names += [os.path.join(d, f) for f in sorted(fs)]
        if len(names) >= 300:
            break
    with open(listfile, "w") as f:
        f.write("\n".join(names[:300]) + "\n")
    fs = [args.fsprof, "run", "-q", "-f", "-o", prof, "--"]
    grep = [cputime, shutil.which("grep"), "-r", PATTERN, args.target]
    true = [cputime, shutil.which("true")]
    loop = [exe, "pread", str(args.calls)]
    def ordinary():
        # Not the bench's SCHED_FIFO or CPU pin: a FIFO busy loop would
        # starve the measured program instead of loading the machine.
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        os.sched_setaffinity(0, range(os.cpu_count()))

    stress = [subprocess.Popen([sys.executable, "-c", STRESS], preexec_fn=ordinary)
              for _ in range(args.stress)]
    load = os.getloadavg()
    rows = {}

    def add(k, v):
        rows.setdefault(k, []).append(v)

    try:
        for v in [grep, fs + grep, true, fs + true]:
            run_rusage(v)
        for _ in range(args.rounds):
            for w, blocks, per in ab_list:
                cmd = [ab, w, str(blocks), listfile if per == "list" else per]
                add(f"{w} bare A/B ns", ab_added(run_rusage(cmd)[2]))
                add(f"{w} added ns", ab_added(run_rusage(fs + cmd)[2]))
                o = overhead(prof)
                add(f"{w} figure ns", o["figure"])
                add(f"{w} hot-loop ns", o["hot"])
                add(f"{w} samples", o["samples"])
                if args.before:
                    before = [args.before] + fs[1:]
                    add(f"{w} added ns, --before", ab_added(run_rusage(before + cmd)[2]))
            if "loop" in only:
                bare = float(run_rusage(loop)[2])
                traced = float(run_rusage(fs + loop)[2])
                add("loop 2p added ns", traced - bare)
                add("loop 2p figure ns", overhead(prof)["figure"])
            for k in range(args.grep_pairs if "grep" in only else 0):
                for what, cmd in [("grep", grep), ("true", true)]:
                    first, second = (cmd, fs + cmd) if k % 2 == 0 else (fs + cmd, cmd)
                    a, b = int(run_rusage(first)[2]), int(run_rusage(second)[2])
                    traced, bare = (b, a) if k % 2 == 0 else (a, b)
                    add(f"{what} pairs", (traced - bare) / 1e6)
                    if what == "grep":
                        o = overhead(prof)
                        add("grep figure ms", o["total"] / 1e6)
                        add("grep hot-loop ms", o["hot"] * o["total"] / o["figure"] / 1e6)
    finally:
        for p in stress:
            p.kill()
            p.wait()
    load_after = os.getloadavg()
    print(f"# self-overhead figure against measured added time, {args.rounds} interleaved rounds, "
          f"medians (range); load {load[0]:.1f} -> {load_after[0]:.1f}; stress {args.stress}; "
          f"pinned to CPUs {sorted(os.sched_getaffinity(0))}")
    print(f"# A/B: in one process, wrapped vs libc blocks (pread/fstat: 400 pairs x 2000 calls; "
          f"files, scan: 200 pairs x 300 files of {args.target}); 2p: between processes")
    q = lambda v: statistics.quantiles(v, n=4) if len(v) > 1 else [v[0]] * 3
    if "grep" in only:
        gp, tp = rows.pop("grep pairs"), rows.pop("true pairs")
        rows["grep added cpu ms"] = [med(gp) - med(tp)]
        print(f"# grep pairs traced - bare, cpu ms: median {med(gp):.2f}, quartiles "
              f"{q(gp)[0]:.2f}..{q(gp)[2]:.2f}; true pairs: median {med(tp):.2f}, quartiles "
              f"{q(tp)[0]:.2f}..{q(tp)[2]:.2f}")
    for k, v in rows.items():
        print(f"{k:<22} {med(v):10.2f}   ({min(v):.2f}..{max(v):.2f})")
    bound = True
    for w, _, _ in ab_list:
        m, f = med(rows[f"{w} added ns"]), med(rows[f"{w} figure ns"])
        h = med(rows[f"{w} hot-loop ns"])
        ratios = [a / b for a, b in zip(rows[f"{w} figure ns"], rows[f"{w} added ns"]) if b > 0]
        within = abs(f / m - 1) <= args.tolerance if m > 0 else False
        holds = f >= m
        bound &= holds
        print(f"{w}: figure / measured = {f / m:.2f} (rounds {min(ratios):.2f}..{max(ratios):.2f}); "
              f"hot loop / measured = {h / m:.2f}; bound holds: {'yes' if holds else 'NO'}; "
              f"within ±{args.tolerance:.0%}: {'yes' if within else 'no'}")
    if "loop" in only:
        m, f = med(rows["loop 2p added ns"]), med(rows["loop 2p figure ns"])
        print(f"loop 2p (not judged): figure / measured = {f / m:.2f}" if m > 0 else
              f"loop 2p (not judged): measured {m:.2f} ns is not above zero")
    if "grep" in only:
        m, e = med(rows["grep added cpu ms"]), med(rows["grep figure ms"])
        holds = e >= m
        bound &= holds
        print(f"grep: figure / measured (cpu, {args.rounds * args.grep_pairs} pairs) = {e / m:.2f}; "
              f"bound holds: {'yes' if holds else 'NO'}" if m > 0 else
              f"grep: measured (cpu) {m:.2f} ms is not above zero; bound holds: yes")
    print("the figure is an upper bound on every workload: " + ("yes" if bound else "NO"))
    shutil.rmtree(tmp)
    sys.exit(0 if bound else 1)


if __name__ == "__main__":
    main()
