#!/usr/bin/env python3
"""Classification rates of `fsprof compare` on a labelled set of real profile
pairs (OSprof §5.3): each pair is two sides of `fsprof run` profiles of the
same workload (bench/classify/workload.c), B with one controlled change
whose effect on the ops is known:

  null     nothing changed                         -> no op
  cold     data file evicted from the page cache   -> pread
  delay    1 ms injected before every 16th read    -> read
  compete  a second process: pwrite + fdatasync     -> fdatasync

Counts false positives (an unchanged op flagged) and false negatives (the
changed op not flagged) over the workload's ops, over ROUNDS rounds of all
pairs, with compare's defaults. With --runs K each side is K runs, A and B
interleaved, compared as `compare A1..AK --vs B1..BK` (the spread between
runs measured); with --merge they are merged first and compared as one
profile per side (the spread assumed), as before repeated runs existed.

The workload runs as the test runs it (crates/fsprof-cli/tests/report/classify.rs):
20,000 calls of each kind, and at SCHED_FIFO when root (--fifo), so that a
call preempted by another process does not make a new peak in a pair that
changed nothing. --iterations 2000 --no-fifo gives the earlier set-up.

usage: bench/classify.py [--rounds N] [--runs K] [--merge] [--resolution R]
                         [--iterations N] [--no-fifo] [--fsprof PATH]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=10)
ap.add_argument("--runs", type=int, default=1)
ap.add_argument("--merge", action="store_true", help="merge each side's runs into one profile")
ap.add_argument("--resolution", default="1")
ap.add_argument("--iterations", type=int, default=20000, help="calls of each kind per run")
ap.add_argument("--no-fifo", action="store_true", help="do not run the workload at SCHED_FIFO")
ap.add_argument("--fsprof", default="target/release/fsprof")
ARGS = ap.parse_args()
ROUNDS, FSPROF = ARGS.rounds, ARGS.fsprof
ITER = str(ARGS.iterations)
FIFO = [] if ARGS.no_fifo or os.geteuid() != 0 else ["--fifo"]
# "pipe_read": the workload's reads are from a pipe, which fsprof files
# apart from file-system reads (layer user-nonfile).
OPS = ["stat", "open", "close", "pread", "pipe_read", "pwrite", "fdatasync"]
PAIRS = {
    # name: (flags of both runs, flags of B only, competitor?, changed ops)
    "null": ([], [], False, set()),
    "cold": ([], ["--cold"], False, {"pread"}),
    "delay": (["--no-sync"], ["--delay"], False, {"pipe_read"}),
    "compete": ([], [], True, {"fdatasync"}),
}
HERE = os.path.dirname(os.path.abspath(__file__))


def run(out, d, wl, flags):
    subprocess.run([FSPROF, "run", "-q", "-f", "--resolution", ARGS.resolution, "-o", out,
                    "--", wl, d, ITER] + FIFO + flags, check=True, stderr=subprocess.DEVNULL)


def merge(out, parts):
    subprocess.run([FSPROF, "merge", "-f", "-o", out] + parts, check=True, stderr=subprocess.DEVNULL)


def compete(d):
    # The workload's own competitor: 4 KiB pwrite + fdatasync in a loop.
    return subprocess.Popen([os.path.join(d, "workload"), d, "0", "--compete"], start_new_session=True)


def flagged(pa, pb):
    if len(pa) == 1:
        sides = pa + pb
    else:
        sides = pa + ["--vs"] + pb
    r = subprocess.run([FSPROF, "compare", "--format", "json", "--no-labels"] + sides,
                       capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"compare failed: {r.stderr}")
    doc = json.loads(r.stdout)
    return {o["op"] for o in doc["comparison"]["ops"] if o["interesting"] and o["op"] in OPS}


def main():
    d = tempfile.mkdtemp(prefix="fsprof-classify-", dir=os.environ.get("TMPDIR", "/tmp"))
    wl = os.path.join(d, "workload")
    subprocess.run(["cc", "-O2", "-o", wl, os.path.join(HERE, "classify", "workload.c"), "-lpthread"], check=True)
    with open(os.path.join(d, "data"), "wb") as f:
        f.write(os.urandom(16 << 20))
    fp = neg = fn = pos = 0
    misses = {}
    for r in range(ROUNDS):
        for name, (both, bonly, comp, changed) in PAIRS.items():
            pa, pb = [], []
            for k in range(ARGS.runs):
                pa.append(os.path.join(d, f"{name}-a{k}.json"))
                pb.append(os.path.join(d, f"{name}-b{k}.json"))
                run(pa[-1], d, wl, both)
                c = compete(d) if comp else None
                try:
                    run(pb[-1], d, wl, both + bonly)
                finally:
                    if c:
                        os.killpg(c.pid, signal.SIGKILL)
                        c.wait()
            if ARGS.merge and ARGS.runs > 1:
                a, b = os.path.join(d, f"{name}-a.json"), os.path.join(d, f"{name}-b.json")
                merge(a, pa)
                merge(b, pb)
                pa, pb = [a], [b]
            got = flagged(pa, pb)
            ops = [o for o in OPS if not (o == "fdatasync" and "--no-sync" in both)]
            for o in ops:
                if o in changed:
                    pos += 1
                    fn += o not in got
                else:
                    neg += 1
                    fp += o in got
                if (o in changed) != (o in got):
                    misses[f"{name}:{o}"] = misses.get(f"{name}:{o}", 0) + 1
        print(f"round {r + 1}/{ROUNDS} done", file=sys.stderr)
    how = "merged" if ARGS.merge and ARGS.runs > 1 else "--vs" if ARGS.runs > 1 else "single"
    print(f"{ROUNDS} rounds x {len(PAIRS)} pairs, {ARGS.runs} run(s) per side ({how}), resolution "
          f"{ARGS.resolution}, {ITER} iterations per run, "
          f"{'SCHED_FIFO' if FIFO else 'normal priority'}\n")
    print("| false positives | false negatives | errors |")
    print("|---|---|---|")
    print(f"| {fp}/{neg} = {100 * fp / neg:.1f}% | {fn}/{pos} = {100 * fn / pos:.1f}% "
          f"| {100 * (fp + fn) / (neg + pos):.1f}% |")
    print("\nmisclassified (pair:op): " + ", ".join(f"{k}×{v}" for k, v in sorted(misses.items())))
    subprocess.run(["rm", "-rf", d])


if __name__ == "__main__":
    main()
