#!/usr/bin/env python3
"""What `fsprof trace` costs a program that reads through mmap (issue 28),
against the bare program in the same run (interleaved rounds, medians,
ratios; target <= 1.3x, the budget `trace` meets on grep):

1. a sequential scan of a 256 MiB file through a shared read-only
   mapping, one load per 4 KiB page (bench/mmap_scan.c), warm cache;
2. SQLite reading a 30 MiB database through its mapping (PRAGMA
   mmap_size = 256 MiB): a full scan, an index scan and 2,000 lookups.

Variants: bare, `fsprof trace --data digest` and `--data full`. As root the
trace follows the page faults (the mapped reads it records are counted
from one trace of each); without root it records the calls only, which
the output says. As root a fourth variant, `--data digest` with every
capability dropped (setpriv), records the calls only: the difference
between it and `--data digest` is what following the faults costs, and
the difference between it and the bare program under the same setpriv
(`bare, no caps`: setpriv's own exec, ~0.8 ms, is in both) is what
tracing the calls costs (fsprof's own start and end included). `run`
(`fsprof run`, the calls' latency profile without a trace) gives what
any fsprof command costs the same program.

usage: bench/trace_mmap.py [--fsprof PATH] [--other PATH] [--floor PATH] [--eager] [--knob VAR=VALUE]... [--only scan|sqlite] [--lean] [--rounds N] [--dir DIR] [--fifo] [--gap S]
  --other PATH  another build's `trace --data digest` in the same rounds, and
           its difference to this build's, paired by round
  --floor PATH  crates/fsprof-kernel/examples/fault_floor (release), the
           floor of following faults: the same programs and maps, the
           command started once they are attached, and nothing of fsprof
           (root); and its --overlap, the floor of fsprof trace's order
           (the fault programs attached beside the command's start)
  --eager  also this build's trace with the fault programs attached as soon
           as they are loaded (the variant of the attach on request)
  --knob VAR=VALUE  also this build's trace with VAR=VALUE in its environment
           (a test knob, e.g. FSPROF_TEST_RAW_ON_REQUEST=1, or
           FSPROF_NO_KEEPER=1), and its difference to this build's trace,
           paired by round; repeatable
  --only W  one workload: scan or sqlite
  --lean   only bare, this build's --data digest trace, --other's and the
           --knob variants: paired comparisons over many rounds
  --gap S  wait S seconds (default 0.1) before each timed run, so that a
           trace does not wait for the grace period of the one before it
  --fifo   every command under SCHED_FIFO (chrt -f 50; root): on a busy
           machine other processes are kept off the CPU it runs on
"""
import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from interleave import interleaved, ratio_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCAN_MIB = 256
QUERIES = """PRAGMA mmap_size=268435456;
SELECT count(*), sum(length(v)) FROM t;
SELECT count(*) FROM t WHERE v > x'80';
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<2000)
SELECT sum(length(v)) FROM t JOIN n ON t.k = (n.i * 7919) % 100000 + 1;
"""


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def make_inputs(d):
    exe = os.path.join(d, "mmap_scan")
    run(["cc", "-O2", "-o", exe, os.path.join(ROOT, "bench", "mmap_scan.c")])
    data = os.path.join(d, "scan.bin")
    with open(data, "wb") as f:
        chunk = os.urandom(1 << 20)
        for _ in range(SCAN_MIB):
            f.write(chunk)
    db = os.path.join(d, "bench.db")
    run(["sqlite3", db, "CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB);"
         "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<100000)"
         " INSERT INTO t SELECT i, randomblob(250) FROM n; CREATE INDEX tv ON t(v);"])
    return exe, data, db


NO_CAPS = ["setpriv", "--bounding-set", "-all", "--inh-caps=-all", "--ambient-caps=-all", "--"]
CALLS_ONLY = "trace --data digest, no caps"
BARE_NO_CAPS = "bare, no caps"
OTHER = "other: trace --data digest"
FLOOR = "floor: same programs, no fsprof"
DESIGN_FLOOR = "floor, attach overlapped"
EAGER = "trace --data digest, attach at once"
TRACE = "trace --data digest"


def variants(d, cmd, name):
    out = {"bare": cmd}
    if ARGS.lean:
        trace = os.path.join(d, f"{name.split()[0]}-digest.trace")
        out[TRACE] = [ARGS.fsprof, "trace", "-f", "--data", "digest", "-o", trace, "--"] + cmd
        if ARGS.other:
            trace = os.path.join(d, f"{name.split()[0]}-other.trace")
            out[OTHER] = [ARGS.other, "trace", "-f", "--data", "digest", "-o", trace, "--"] + cmd
        knobs(out, d, cmd, name)
        return out
    out["run"] = [ARGS.fsprof, "run", "-f", "-o", os.path.join(d, f"{name.split()[0]}-run.json"), "--"] + cmd
    for data in ("digest", "full"):
        trace = os.path.join(d, f"{name.split()[0]}-{data}.trace")
        out[f"trace --data {data}"] = [ARGS.fsprof, "trace", "-f", "--data", data, "-o", trace, "--"] + cmd
    if ARGS.other:
        trace = os.path.join(d, f"{name.split()[0]}-other.trace")
        out[OTHER] = [ARGS.other, "trace", "-f", "--data", "digest", "-o", trace, "--"] + cmd
    if ARGS.floor:
        out[FLOOR] = [ARGS.floor] + cmd
        # fsprof trace's own order: the fault programs attached beside the
        # command's start, not before it (fault_floor.rs's --overlap).
        out[DESIGN_FLOOR] = [ARGS.floor, "--overlap"] + cmd
    if ARGS.eager:
        trace = os.path.join(d, f"{name.split()[0]}-eager.trace")
        # The variant the attach on request was chosen against: attached
        # as soon as loaded (test knob), in the environment, not through
        # env(1), whose exec would be in the time.
        out[EAGER] = [{"FSPROF_TEST_FAULTS_EAGER": "1"}, ARGS.fsprof, "trace", "-f", "--data",
                      "digest", "-o", trace, "--"] + cmd
    knobs(out, d, cmd, name)
    if os.geteuid() == 0 and shutil.which("setpriv"):
        trace = os.path.join(d, f"{name.split()[0]}-nocaps.trace")
        out[CALLS_ONLY] = NO_CAPS + [ARGS.fsprof, "trace", "-f", "-o", trace, "--"] + cmd
        out[BARE_NO_CAPS] = NO_CAPS + cmd
    return out


def knobs(out, d, cmd, name):
    """The --knob variants into `out`."""
    for knob in ARGS.knob:
        var, _, val = knob.partition("=")
        trace = os.path.join(d, f"{name.split()[0]}-{var}.trace")
        out[f"{TRACE}, {knob}"] = [{var: val}, ARGS.fsprof, "trace", "-f", "--data", "digest",
                                   "-o", trace, "--"] + cmd


def wall(cmd):
    """Seconds `cmd` takes (under SCHED_FIFO with --fifo), output discarded."""
    pre = ["chrt", "-f", "50"] if ARGS.fifo else []
    # A trace's eBPF programs detach from their tracepoints when it ends,
    # and the next trace attaching to the same tracepoint within an RCU
    # grace period waits for that period to end (the kernel's tracepoint
    # transition sync): 5-10 ms on this VM, which back-to-back rounds
    # would charge to every traced run and no user running one trace
    # pays. Every variant, bare included, waits the same --gap first.
    time.sleep(ARGS.gap)
    env = None
    if isinstance(cmd[0], dict):
        env, cmd = {**os.environ, **cmd[0]}, cmd[1:]
    t = time.perf_counter()
    subprocess.run(pre + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   env=env)
    return time.perf_counter() - t


def mapped_reads(trace):
    """The mapped reads a trace recorded."""
    show = run([ARGS.fsprof, "trace", "show", "--format", "jsonl", trace]).stdout
    return sum(1 for line in show.splitlines() if '"mapped_read"' in line)


def boot_median(xs, n=2000):
    """95% percentile-bootstrap interval of the median of xs (a fixed seed:
    the same rounds give the same interval)."""
    rng = random.Random(1)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def paired(what, other, this):
    """The median of other - this, paired by round, with its interval and
    the rounds `this` won."""
    diff = [o - t for o, t in zip(other, this)]
    lo, hi = boot_median(diff)
    wins = sum(x > 0 for x in diff)
    print(f"{what} (--data digest, paired by round): median {statistics.median(diff) * 1e3:+.2f} ms "
          f"[95% {lo * 1e3:+.2f}, {hi * 1e3:+.2f}] (rounds {min(diff) * 1e3:+.2f}..{max(diff) * 1e3:+.2f}; "
          f"this build faster in {wins} of {len(diff)})")


def measure(d, name, cmd):
    v = variants(d, cmd, name)
    times = interleaved(v, ARGS.rounds, measure=wall, warm=1)
    print(f"\n# {name}: {ARGS.rounds} interleaved rounds, medians")
    ratio_table(times, 28)
    med = {k: statistics.median(t) * 1e3 for k, t in times.items()}
    if CALLS_ONLY in med:
        calls = med[CALLS_ONLY] - med[BARE_NO_CAPS]
        faults = med["trace --data digest"] - med[CALLS_ONLY]
        print(f"medians: run +{med['run'] - med['bare']:.2f} ms over bare; tracing the calls "
              f"+{calls:.2f} ms over bare (both under setpriv: {calls / med['bare'] + 1:.3f}x), "
              f"following the faults +{faults:.2f} ms more")
    if FLOOR in med:
        print(f"medians: the floor +{med[FLOOR] - med['bare']:.2f} ms over bare; fsprof trace "
              f"+{med['trace --data digest'] - med[FLOOR]:.2f} ms over the floor")
    if DESIGN_FLOOR in med:
        print(f"medians: the overlapped floor +{med[DESIGN_FLOOR] - med['bare']:.2f} ms over bare; "
              f"fsprof trace +{med['trace --data digest'] - med[DESIGN_FLOOR]:.2f} ms over it")
    if OTHER in times:
        paired("other build minus this one", times[OTHER], times[TRACE])
    for knob in ARGS.knob:
        paired(f"this build with {knob} minus without", times[f"{TRACE}, {knob}"], times[TRACE])
    n = mapped_reads(os.path.join(d, f"{name.split()[0]}-digest.trace"))
    print(f"mapped reads in the last --data digest trace: {n}")


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--fsprof", default=os.path.join(ROOT, "target", "release", "fsprof"))
    p.add_argument("--gap", type=float, default=0.1,
                   help="seconds to wait before each timed run (0: back to back)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--dir", default=None, help="where the 256 MiB file and the database go")
    p.add_argument("--fifo", action="store_true")
    p.add_argument("--other", help="another build (main before a change), traced in the same rounds")
    p.add_argument("--floor", help="examples/fault_floor: the same programs without fsprof (root)")
    p.add_argument("--knob", action="append", default=[],
                   help="VAR=VALUE: also this build's trace with it in its environment")
    p.add_argument("--only", choices=("scan", "sqlite"))
    p.add_argument("--lean", action="store_true")
    p.add_argument("--eager", action="store_true",
                   help="also this build's trace with the fault programs attached at once "
                        "(FSPROF_TEST_FAULTS_EAGER), not on a process's request")
    ARGS = p.parse_args()
    if not shutil.which("sqlite3"):
        sys.exit("trace_mmap.py: sqlite3 is not installed (apt-get install sqlite3)")
    if os.geteuid() != 0:
        print("not root: the traces hold the calls only, not the mapped accesses")
    print(f"# load before: {' '.join(open('/proc/loadavg').read().split()[:3])}; "
          f"{os.cpu_count()} CPUs{', SCHED_FIFO' if ARGS.fifo else ''}")
    with tempfile.TemporaryDirectory(dir=ARGS.dir) as d:
        exe, data, db = make_inputs(d)
        if ARGS.only != "sqlite":
            measure(d, "mmap scan 256 MiB", [exe, data])
        if ARGS.only != "scan":
            measure(d, "sqlite mmap_size", ["sqlite3", db, QUERIES])


if __name__ == "__main__":
    main()
