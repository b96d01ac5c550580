#!/usr/bin/env python3
"""Overhead of `fsprof run` (the user layer), measured against baselines in
the same run, interleaved, repeated, reported as medians and ratios.

1. Wall time of `grep -r <absent pattern> /usr/include` with a warm page
   cache: bare, `fsprof run`, `strace -f -c`, and a bpftrace enter/exit
   syscall histogram (bpftrace's own start-up is measured separately and
   reported, since it is paid once per run).
2. Nanoseconds the shim adds per intercepted call: a tight loop of cached
   pread(1 byte) and fstat, timed from inside, bare vs under `fsprof run`.

usage: bench/user_overhead.py [--rounds N] [--fsprof PATH] [--target DIR] [--no-peers] [--no-percall]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from interleave import interleaved, ratio_table, wall

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATTERN = "fsprof_bench_pattern_that_is_not_there"
TARGET = "/usr/include"
BPFTRACE = (
    "tracepoint:raw_syscalls:sys_enter /pid == cpid/ { @s[tid] = nsecs; } "
    "tracepoint:raw_syscalls:sys_exit /@s[tid]/ { @h[args->id] = hist(nsecs - @s[tid]); delete(@s[tid]); }"
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--fsprof", default=os.path.join(ROOT, "target/release/fsprof"))
    ap.add_argument("--target", default=TARGET, help="directory grep -r searches")
    ap.add_argument("--no-peers", action="store_true", help="skip strace and bpftrace")
    ap.add_argument("--no-percall", action="store_true", help="skip the per-call loop")
    args = ap.parse_args()
    if not os.path.exists(args.fsprof):
        sys.exit(f"{args.fsprof} not found: run `cargo build --release` first")
    tmp = tempfile.mkdtemp(prefix="fsprof-bench-")
    prof = os.path.join(tmp, "p.json")
    # bpftrace -c wants an unambiguous path
    grep = [shutil.which("grep"), "-r", PATTERN, args.target]
    variants = {
        "bare": grep,
        "fsprof run": [args.fsprof, "run", "-q", "-f", "-o", prof, "--"] + grep,
    }
    if shutil.which("strace") and not args.no_peers:
        variants["strace -f -c"] = ["strace", "-f", "-c", "-o", os.path.join(tmp, "s.txt")] + grep
    have_bpftrace = shutil.which("bpftrace") and os.geteuid() == 0 and not args.no_peers
    if have_bpftrace:
        variants["bpftrace hist"] = ["bpftrace", "-q", "-e", BPFTRACE, "-c", " ".join(grep)]
    # Two warm-up passes: the page cache and every binary.
    times = interleaved(variants, args.rounds, warm=2)
    bare = statistics.median(times["bare"])
    print(f"# grep -r {PATTERN} {args.target}, warm cache, {args.rounds} interleaved rounds, medians")
    ratio_table(times, 16)
    if have_bpftrace:
        idle = [wall(["bpftrace", "-q", "-e", BPFTRACE, "-c", "true"]) for _ in range(3)]
        m = statistics.median(idle)
        bt = statistics.median(times["bpftrace hist"])
        print(f"bpftrace start-up alone (-c true): {m:.4f} s; bpftrace minus start-up: ratio {(bt - m) / bare:.3f}")

    if args.no_percall:
        shutil.rmtree(tmp)
        return
    exe = os.path.join(tmp, "percall")
    subprocess.run(["cc", "-O2", "-o", exe, os.path.join(ROOT, "bench/percall.c")], check=True)
    n = "2000000"
    print(f"\n# ns per call, tight loop of {n} cached calls, {args.rounds} interleaved rounds, medians")
    print(f"{'call':<6} {'bare ns':>8} {'fsprof ns':>10} {'added ns':>9}")
    for call in ["pread", "fstat"]:
        bare_ns, prof_ns = [], []
        for _ in range(args.rounds):
            out = subprocess.run([exe, call, n], capture_output=True, text=True, check=True)
            bare_ns.append(float(out.stdout))
            out = subprocess.run([args.fsprof, "run", "-q", "-f", "-o", prof, "--", exe, call, n],
                                 capture_output=True, text=True, check=True)
            prof_ns.append(float(out.stdout))
        b, p = statistics.median(bare_ns), statistics.median(prof_ns)
        diffs = sorted(pp - bb for pp, bb in zip(prof_ns, bare_ns))
        print(f"{call:<6} {b:8.1f} {p:10.1f} {p - b:9.1f}   (paired diffs {diffs[0]:.1f}..{diffs[-1]:.1f})")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
