#!/usr/bin/env python3
"""Classification rates of `fsprof compare` on a labelled set of real profile
pairs (OSprof §5.3): each pair is two `fsprof run` profiles of the same
workload (bench/classify/workload.c), B with one controlled change whose
effect on the ops is known:

  null     nothing changed                         -> no op
  cold     data file evicted from the page cache   -> pread
  delay    1 ms injected before every 16th read    -> read
  compete  a second process: pwrite + fdatasync     -> fdatasync

For every method, with and without phase 2 (peak changes), counts false
positives (an unchanged op flagged) and false negatives (the changed op not
flagged) over the workload's ops, over ROUNDS rounds of all pairs. With
--runs K each side is the merge of K runs, A and B interleaved.

The tables use compare's fixed default thresholds, chosen on earlier
sessions' runs, never on this run's. The threshold sweep is split: the
best threshold is chosen on the first --tune-rounds rounds (the tuning
set) and its false-positive and false-negative rates are measured on the
remaining rounds (the held-out set), so no rate is measured on the data
its threshold was chosen on.

The workload runs as the test runs it (crates/fsprof-cli/tests/report/classify.rs):
20,000 calls of each kind, and at SCHED_FIFO when root (--fifo), so that a
call preempted by another process does not make a new peak in a pair that
changed nothing. --iterations 2000 --no-fifo gives the earlier set-up.

usage: bench/classify.py [--rounds N] [--tune-rounds T] [--runs K] [--resolution R]
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
ap.add_argument("--tune-rounds", type=int, default=None,
                help="rounds the threshold sweep tunes on (default: half); the rest measure it")
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
METHODS = ["emd", "chi2", "jeffrey", "count", "latency"]
HERE = os.path.dirname(os.path.abspath(__file__))


def run(out, d, wl, flags):
    subprocess.run([FSPROF, "run", "-q", "-f", "--resolution", ARGS.resolution, "-o", out,
                    "--", wl, d, ITER] + FIFO + flags, check=True, stderr=subprocess.DEVNULL)


def merge(out, parts):
    if len(parts) == 1:
        os.replace(parts[0], out)
        return
    subprocess.run([FSPROF, "merge", "-f", "-o", out] + parts, check=True, stderr=subprocess.DEVNULL)


def compete(d):
    # The workload's own competitor: 4 KiB pwrite + fdatasync in a loop.
    return subprocess.Popen([os.path.join(d, "workload"), d, "0", "--compete"], start_new_session=True)


SCORES = {}  # method -> [(score, changed, flagged by phase 2, round)]
ROUND = [0]


def flagged(a, b, method, peaks, changed=frozenset()):
    args = [FSPROF, "compare", "--format", "json", "--method", method, "--no-labels"]
    if not peaks:
        args.append("--no-peak-changes")
    r = subprocess.run(args + [a, b], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"compare failed: {r.stderr}")
    doc = json.loads(r.stdout)
    if peaks:
        for o in doc["comparison"]["ops"]:
            if o["op"] in OPS and o["status"] == "compared":
                phase2 = any(c["significant"] for c in o["peak_changes"])
                SCORES.setdefault(method, []).append(
                    (o["score"], o["op"] in changed, phase2, ROUND[0]))
    return {o["op"] for o in doc["comparison"]["ops"] if o["interesting"] and o["op"] in OPS}


def main():
    d = tempfile.mkdtemp(prefix="fsprof-classify-", dir=os.environ.get("TMPDIR", "/tmp"))
    wl = os.path.join(d, "workload")
    subprocess.run(["cc", "-O2", "-o", wl, os.path.join(HERE, "classify", "workload.c"), "-lpthread"], check=True)
    with open(os.path.join(d, "data"), "wb") as f:
        f.write(os.urandom(16 << 20))
    # errors[(method, peaks)] = [fp, negatives, fn, positives]
    errors = {(m, p): [0, 0, 0, 0] for m in METHODS for p in (True, False)}
    misses = {}
    for r in range(ROUNDS):
        ROUND[0] = r
        for name, (both, bonly, comp, changed) in PAIRS.items():
            a, b = os.path.join(d, f"{name}-a.json"), os.path.join(d, f"{name}-b.json")
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
            merge(a, pa)
            merge(b, pb)
            ops = [o for o in OPS if not (o == "fdatasync" and "--no-sync" in both)]
            for key, e in errors.items():
                got = flagged(a, b, *key, changed=frozenset(changed))
                for o in ops:
                    if o in changed:
                        e[3] += 1
                        e[2] += o not in got
                    else:
                        e[1] += 1
                        e[0] += o in got
                    if (o in changed) != (o in got):
                        misses.setdefault(key, []).append(f"{name}:{o}")
        print(f"round {r + 1}/{ROUNDS} done", file=sys.stderr)
    print(f"{ROUNDS} rounds x {len(PAIRS)} pairs, {ARGS.runs} run(s) per side, resolution "
          f"{ARGS.resolution}, {ITER} iterations per run, "
          f"{'SCHED_FIFO' if FIFO else 'normal priority'}\n")
    print("| method | phase 2 | false positives | false negatives | errors |")
    print("|---|---|---|---|---|")
    for (m, p), (fp, neg, fn, pos) in errors.items():
        print(f"| {m} | {'on' if p else 'off'} | {fp}/{neg} = {100 * fp / neg:.1f}% "
              f"| {fn}/{pos} = {100 * fn / pos:.1f}% | {100 * (fp + fn) / (neg + pos):.1f}% |")
    print("\nmisclassified (pair:op) per method:")
    for (m, p), l in misses.items():
        counts = {}
        for x in l:
            counts[x] = counts.get(x, 0) + 1
        print(f"  {m} phase2={'on' if p else 'off'}: " + ", ".join(f"{k}×{v}" for k, v in sorted(counts.items())))
    tune = ARGS.tune_rounds if ARGS.tune_rounds is not None else ROUNDS // 2
    print(f"\nthreshold sweep (phase 2 on): tuned on rounds 1-{tune}, measured on rounds "
          f"{tune + 1}-{ROUNDS}")
    print("| method | tuned threshold | tuning errors | held-out false positives | held-out false negatives |")
    print("|---|---|---|---|---|")

    def rates(rows, t):
        fp = sum(1 for s_, c, p, _ in rows if not c and (s_ >= t or p))
        fn = sum(1 for s_, c, p, _ in rows if c and not (s_ >= t or p))
        neg = sum(1 for r in rows if not r[1])
        return fp, neg, fn, len(rows) - neg

    for m, rows in SCORES.items():
        tuning = [r for r in rows if r[3] < tune]
        held = [r for r in rows if r[3] >= tune]
        if not tuning or not held:
            continue
        best = None
        for t in sorted({r[0] for r in tuning}) + [float("inf")]:
            fp, neg, fn, pos = rates(tuning, t)
            if best is None or fp + fn < best[1]:
                best = (t, fp + fn, neg + pos)
        fp, neg, fn, pos = rates(held, best[0])
        print(f"| {m} | {best[0]:.3f} | {best[1]}/{best[2]} | {fp}/{neg} = {100 * fp / max(neg, 1):.1f}% "
              f"| {fn}/{pos} = {100 * fn / max(pos, 1):.1f}% |")
    subprocess.run(["rm", "-rf", d])


if __name__ == "__main__":
    main()
