#!/usr/bin/env python3
"""False alarms and detections of `fsprof compare` at its defaults, on real
profiles of three workloads (issue 24 §1):

  meta    ls -lR /usr/include/linux          (statx, getxattr, readdir)
  read    cat of the headers in /usr/include and /usr/include/linux
  procs   head -c 64 of each header in /usr/include/linux/[a-f]*.h
          (about 150), one process each

Every run is warm (the command runs once unprofiled just before) and is
`fsprof run` with bench/compare/delay.so preloaded (after the
shim, so the shim times the call with the delay inside it). Baseline runs
delay nothing; a slowed run makes every call of one op take twice as long
(the call, then a spin for as long again). Runs are interleaved: baseline,
slowed op 1, baseline, slowed op 2, ... so that the machine's load falls on
all kinds alike.

From the pool of runs of each workload, every comparison takes its two
sides from the same stretch of time, interleaved: the machine drifts (on
this VM whole runs of `ls -lR` went 1.6-3.4x faster or slower for four to
six runs in a row), and sides taken one after the other (A's three runs,
then B's) put that drift on one side, where it is a real difference
between the sides that no statistic can tell from a change. Set `i` is the
stretch of baseline runs 6i..6i+5, made alternately with slowed runs
3i..3i+2 of each op:

- false positives: baseline runs 2i and 2i+1 (one run a side), and the
  even against the odd baseline runs of set i (`compare A1 A2 A3 --vs B1
  B2 B3`, A B A B A B in time); a pair is a false positive when compare
  exits 1.
- detections: baseline run 2i against slowed run i, and the same three
  even baseline runs of set i against slowed runs 3i..3i+2 of one op (made
  between them); detected when compare exits 1 and flags the slowed op
  (exit 1 for another op only is counted apart, as "other").

The slowed ops are chosen per workload as ops that hold at least 5% of the
layer's latency in a baseline run (the smallest such share is the hardest
case; their shares are printed).

With --watch-machine, bench/compare/machine_speed.c watches the CPUs'
speed while a new pool is made (its samples are kept in the pool, and read
again whenever the pool is), and the identical single pairs' row says how
many runs started with the machine slowed (the fastest of three ~1 us chains
2.5x its usual or more, over the first 3 ms of the run's first process, where
procs' shell reads the directory) and, for each alarm, both sides' slowdown
there: on the benchmarks' VM the whole machine runs 4-8x slower for 20-90 ms
at a time, and one run a side cannot tell that from a change. The rates
count every pair as before. The watch wakes each CPU every 0.5 ms, so it is
off by default.

usage: bench/compare_rates.py [--pairs N] [--pool DIR] [--fsprof PATH]
                              [--workloads meta,read,procs]
                              [--sides interleaved|blocks] [--compare-args ARGS]
                              [--run-args ARGS] [--watch-machine]
"""
import argparse
import bisect
import json
import os
import statistics
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--pairs", type=int, default=20, help="pairs of each kind per workload")
ap.add_argument("--pool", default=None, help="keep the runs here (reused when present)")
ap.add_argument("--fsprof", default="target/release/fsprof")
ap.add_argument("--workloads", default="meta,read,procs")
ap.add_argument("--compare-args", default="", help="extra arguments for every compare")
ap.add_argument(
    "--run-args", default="",
    help="extra arguments for every `fsprof run` of a new pool (--run-args=--no-aslr: with =)",
)
ap.add_argument(
    "--sides", choices=["interleaved", "blocks"], default="interleaved",
    help="3-against-3 sides from alternate runs (default), or each side three runs in a row "
    "(the protocol before; puts the machine's drift between the sides)",
)
ap.add_argument(
    "--watch-machine", action="store_true",
    help="watch the CPUs' speed while a new pool is made; say which alarms started slowed",
)
ARGS = ap.parse_args()
FSPROF = os.path.abspath(ARGS.fsprof)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A run "started slowed" when the machine's chain took this many times its
# usual time there (the machine's slow periods run 4-8x; under load, CPUs
# shared with builds read up to ~2x in short stretches).
SLOWED = 2.5

WORKLOADS = {
    "meta": (["ls", "-lR", "/usr/include/linux"], ["readdir", "getxattr"]),
    "read": (["sh", "-c", "cat /usr/include/*.h /usr/include/linux/*.h"], ["open", "read"]),
    "procs": (
        ["sh", "-c", 'for f in /usr/include/linux/[a-f]*.h; do head -c 64 "$f"; done'],
        ["close", "read"],
    ),
}


def build_helper(dir, name, src, flags, libs=()):
    out = os.path.join(dir, name)
    if not os.path.exists(out):
        subprocess.run(
            ["cc", "-O2", *flags, "-o", out, os.path.join(ROOT, src), *libs], check=True
        )
    return out


def watch_machine(dir, w):
    """Starts machine_speed for workload w's pool, when its runs are still to
    be made (a watch of a pool made before would see none of them)."""
    out = os.path.join(dir, f"{w}-machine-speed.txt")
    if os.path.exists(out) or os.path.exists(os.path.join(dir, f"{w}-base-0.json")):
        return None
    exe = build_helper(dir, "machine_speed", "bench/compare/machine_speed.c", ["-pthread"])
    return subprocess.Popen([exe, out])


def stop_watching(proc):
    if proc is not None:
        proc.terminate()
        if proc.wait() != 0:
            sys.exit("machine_speed failed")


class MachineSpeed:
    """machine_speed's samples of one pool: per CPU, (unix ns, chain ns)."""

    def __init__(self, path):
        per_cpu = {}
        for line in open(path):
            cpu, t, c = line.split()
            per_cpu.setdefault(cpu, []).append((int(t), int(c)))
        self.cpus = []
        for samples in per_cpu.values():
            samples.sort()
            usual = statistics.median(c for _, c in samples)
            self.cpus.append(([t for t, _ in samples], [c / usual for _, c in samples]))

    def slowed(self, a, b):
        """How much slower than usual the machine ran over [a, b): the worst
        CPU's median chain time there over its usual (None: no sample)."""
        worst = None
        for times, ratios in self.cpus:
            there = ratios[bisect.bisect_left(times, a):bisect.bisect_left(times, b)]
            if there:
                m = statistics.median(there)
                worst = m if worst is None else max(worst, m)
        return worst


def machine_at_start(speed, profile):
    """The machine's slowdown over the first 3 ms of the run's first
    process (where procs' shell reads the directory: its 573 buffered
    readdir calls take ~30 us, all at the speed of that moment)."""
    p = json.load(open(profile))
    first = p["meta"]["start_unix_ns"] + min(
        (q["start_ns"] for q in p.get("processes", [])), default=0
    )
    return speed.slowed(first - 500_000, first + 3_000_000)


def build_delay(dir):
    return build_helper(dir, "delay.so", "bench/compare/delay.c", ["-shared", "-fPIC"], ["-ldl"])


def run(dir, name, cmd, so, op):
    out = os.path.join(dir, name + ".json")
    if os.path.exists(out):
        return out
    env = dict(os.environ, LD_PRELOAD=so)
    env.pop("FSPROF_DELAY_OP", None)
    if op:
        env["FSPROF_DELAY_OP"] = op
    # Warm: the same command once, unprofiled, just before (the machine's
    # other work and DAMON evict idle page cache; pairs of warm runs are
    # what the benchmark is about).
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(
        [FSPROF, "run", "-q", "-f", "-o", out] + ARGS.run_args.split() + ["--"] + cmd,
        env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    return out


def pool(dir, w, n_base, n_slow):
    """Baseline and slowed runs of workload `w`, interleaved."""
    cmd, ops = WORKLOADS[w]
    so = build_delay(dir)
    base, slow = [], {op: [] for op in ops}
    for i in range(max(n_base, n_slow * len(ops))):
        for op in ops:
            if len(base) < n_base:
                base.append(run(dir, f"{w}-base-{len(base)}", cmd, so, None))
            if len(slow[op]) < n_slow:
                slow[op].append(run(dir, f"{w}-{op}-{len(slow[op])}", cmd, so, op))
    return base, slow


def compare(a, b):
    """(exit status, flagged ops) of `compare A... --vs B...`."""
    extra = ARGS.compare_args.split()
    p = subprocess.run(
        [FSPROF, "compare", "--format", "json"] + extra + a + ["--vs"] + b,
        capture_output=True, text=True,
    )
    if p.returncode not in (0, 1):
        sys.exit(f"compare failed: {p.stderr}")
    v = json.loads(p.stdout)
    flagged = {o["op"] for o in v["comparison"]["ops"] if o["interesting"]}
    return p.returncode, flagged


def share(profile, op):
    p = json.load(open(profile))
    for l in p["layers"]:
        if l["name"] == "user":
            total = sum(o["total_ns"] for o in l["ops"])
            for o in l["ops"]:
                if o["name"] == op:
                    return o["total_ns"] / total
    return 0.0


def machine_note(speed, base, slow, single):
    """How many runs started with the machine slowed, and each single alarm's
    two sides' slowdown at their start."""
    runs = base + [r for rs in slow.values() for r in rs]
    at = {r: machine_at_start(speed, r) for r in runs}
    known = [x for x in at.values() if x is not None]
    slowed = sum(x >= SLOWED for x in known)
    alarms = []
    for i, (code, flagged) in enumerate(single):
        if code == 1:
            sides = "/".join(
                "?" if at[r] is None else f"{at[r]:.1f}x" for r in (base[2 * i], base[2 * i + 1])
            )
            alarms.append(f"{','.join(sorted(flagged)) or 'layer'} (machine {sides})")
    note = f"{slowed}/{len(known)} runs started with the machine {SLOWED}x slower or more"
    return note + ("; alarms: " + ", ".join(alarms) if alarms else "")


def rate(k, n):
    return f"{k}/{n} = {100.0 * k / n:.1f}%"


def main():
    n = ARGS.pairs
    dir = ARGS.pool or tempfile.mkdtemp(prefix="fsprof-compare-rates-")
    os.makedirs(dir, exist_ok=True)
    print(f"# pool {dir}; {n} pairs of each kind; sides {ARGS.sides}; {FSPROF}")
    print(f"# load before: {open('/proc/loadavg').read().split()[0]}")
    rows = []
    for w in ARGS.workloads.split(","):
        # Single pairs take 2n baselines, 3-against-3 sets 6n; the slowed
        # runs are paired with baselines of the same sets.
        watcher = watch_machine(dir, w) if ARGS.watch_machine else None
        base, slow = pool(dir, w, 6 * n, 3 * n)
        stop_watching(watcher)
        speed_file = os.path.join(dir, f"{w}-machine-speed.txt")
        speed = MachineSpeed(speed_file) if os.path.exists(speed_file) else None
        # Set i: baseline runs 6i..6i+5, A the even ones, B the odd ones
        # (or, --sides blocks, A the first three and B the last three).
        if ARGS.sides == "interleaved":
            side_a = [base[6 * i:6 * i + 6:2] for i in range(n)]
            side_b = [base[6 * i + 1:6 * i + 6:2] for i in range(n)]
        else:
            side_a = [base[6 * i:6 * i + 3] for i in range(n)]
            side_b = [base[6 * i + 3:6 * i + 6] for i in range(n)]
        single = [compare([base[2 * i]], [base[2 * i + 1]]) for i in range(n)]
        single_fp = sum(code for code, _ in single)
        triple_fp = sum(compare(side_a[i], side_b[i])[0] for i in range(n))
        note = ""
        if speed is not None:
            note = machine_note(speed, base, slow, single)
        rows.append((w, "identical", "single", rate(single_fp, n), note))
        rows.append((w, "identical", "3 vs 3", rate(triple_fp, n), ""))
        for op, runs in slow.items():
            shares = [share(b, op) for b in base[: 2 * n]]
            found = {"single": [0, 0], "3 vs 3": [0, 0]}
            for i in range(n):
                code, flagged = compare([base[2 * i]], [runs[i]])
                found["single"][0] += op in flagged
                found["single"][1] += code == 1 and op not in flagged
                code, flagged = compare(side_a[i], runs[3 * i:3 * i + 3])
                found["3 vs 3"][0] += op in flagged
                found["3 vs 3"][1] += code == 1 and op not in flagged
            for mode, (hit, other) in found.items():
                note = f"{op} holds {100 * statistics.median(shares):.1f}% (median)"
                if other:
                    note += f"; {other} flagged another op only"
                rows.append((w, f"{op} 2x slower", mode, rate(hit, n), note))
    print(f"# load after: {open('/proc/loadavg').read().split()[0]}")
    print("| workload | pair | runs per side | flagged | note |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
