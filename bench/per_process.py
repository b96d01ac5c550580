#!/usr/bin/env python3
"""What fsprof adds per short process, side by side in one run (issue 27).

Workloads that start many short processes, each timed bare, with an empty
library preloaded (the floor of any preload profiler: the dynamic linker
loading one more object), with fsprof's shim loaded without a run (what
the library costs before it sets anything up), under `fsprof run` and
under `fsprof trace`, in interleaved rounds (every variant once per round,
in an order shuffled anew each round, so that no variant always follows
the same one), as medians:

  loop   bash -c 'for i in $(seq N); do cat /etc/hostname >/dev/null; done'
  xargs  bash -c "find /usr/include/linux -name '*.h' | xargs -n4 wc -c"

For each variant: the median wall and CPU time (user + system of the whole
tree: fsprof, the shell and every process it starts), the ratio to bare,
and the time added per process. The targets: `fsprof run` adds at most 2x
what the empty library adds (the line "run / empty.so added"), and
`fsprof trace` is at most 1.20x bare on the loop.

Each variant's time added per process is paired by round (the variant
minus bare in the same round) and given with a 95% bootstrap interval of
its median over the rounds; "run / empty.so added" is the quotient of the
two medians, with its interval from resampling whole rounds. The target is
judged on wall time (what a user waits for, as hyperfine measures it); CPU
time (user + system of every process of the tree, fsprof's own included,
from wait4; the script is its children's subreaper, so a process that
outlives its parent, as `fsprof run`'s keeper does, is reaped and counted
here too) is printed beside it. A quotient whose empty.so interval
includes zero is printed as "not resolved": add rounds (or --target, which
spends them on the three variants the quotient needs). With 10 rounds or
more, the same is printed for each variant's fastest tenth of runs (its
10% quantile of wall time, against bare's): interference under load only
adds time, so the fastest runs are the least disturbed, and their
difference resolves where the medians' does not.

Options:
  --rounds N      interleaved rounds (default 11)
  --loop N        processes of the loop (default 1000)
  --fsprof PATH   the build to measure (default target/release/fsprof)
  --other PATH    another build's run and trace too (before/after)
  --swap-shim     with --other: also `fsprof run` (and trace) of this build
                  with the other build's shim swapped in, and with its own,
                  both through `env LD_PRELOAD=...` (the command's first
                  process, env, keeps the run's shim): the shims' difference
                  alone, pairwise in each round. Only for builds whose shims
                  share the counter files' ABI (abi.h's version).
  --only LIST     workloads, comma separated (loop,xargs)
  --target        only the variants of the per-process target: bare, the
                  empty library and `fsprof run` (and the other build's run)
  --no-trace      leave out fsprof trace
  --calls-only    as root, add `fsprof trace` with every capability dropped
                  (setpriv): the calls only, no page faults followed
  --strace        add strace -f -c (a peer)
  --fifo          every command under SCHED_FIFO (chrt -f 50; root): on a
                  busy machine other processes are kept off the CPU it runs on
  --overwrite     write each profile over the last run's (-f onto an existing
                  file): what replacing a file costs too. By default each run
                  writes a new file, as `fsprof run` does with its default name
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NO_CAPS = ["setpriv", "--bounding-set", "-all", "--inh-caps=-all", "--ambient-caps=-all", "--"]


def workloads(loop_n):
    return {
        "loop": f"for i in $(seq {loop_n}); do cat /etc/hostname >/dev/null; done",
        "xargs": "find /usr/include/linux -name '*.h' | xargs -n4 wc -c >/dev/null",
    }


def variants(args, tmp, shell):
    empty = os.path.join(tmp, "empty.so")
    cmd = ["bash", "-c", shell]
    out = {
        "bare": (cmd, {}),
        "empty.so": (cmd, {"LD_PRELOAD": empty}),
    }
    target = getattr(args, "target", False)
    shim = installed_shim(args.fsprof, tmp)
    if shim and not target:
        # Loading fsprof's shim without a run: what the library costs
        # before it sets anything up (its size, relocations, constructor).
        out["shim, no run"] = (cmd, {"LD_PRELOAD": shim})
    builds = [("", args.fsprof)] + ([(" (other)", args.other)] if args.other else [])
    for tag, fs in builds:
        out["fsprof run" + tag] = (
            [fs, "run", "-q", "-f", "-o", os.path.join(tmp, "p.json"), "--"] + cmd,
            {},
        )
        if not (args.no_trace or target):
            out["fsprof trace" + tag] = (
                [fs, "trace", "-f", "-o", os.path.join(tmp, "t.trace"), "--"] + cmd,
                {},
            )
            if args.calls_only:
                # Every capability dropped: the calls only, no page faults
                # followed. Its difference to `fsprof trace` is what
                # following the faults costs.
                out["trace, calls only" + tag] = (
                    NO_CAPS + [fs, "trace", "-f", "-o", os.path.join(tmp, "c.trace"), "--"] + cmd,
                    {},
                )
    if target:
        return out
    if args.other and args.swap_shim:
        shims = [("this shim", shim), ("other shim", installed_shim(args.other, tmp))]
        for tag, so in shims:
            swapped = ["env", f"LD_PRELOAD={so}"] + cmd
            out[f"run, {tag}"] = (
                [args.fsprof, "run", "-q", "-f", "-o", os.path.join(tmp, "p.json"), "--"] + swapped,
                {},
            )
            if not args.no_trace:
                out[f"trace, {tag}"] = (
                    [args.fsprof, "trace", "-f", "-o", os.path.join(tmp, "t.trace"), "--"] + swapped,
                    {},
                )
    if args.strace:
        out["strace -f -c"] = (["strace", "-f", "-c", "-o", os.path.join(tmp, "s.txt")] + cmd, {})
    return out


def installed_shim(fsprof, tmp):
    """The preload library `fsprof run` installs and uses (None if not found):
    what the profiled command finds in LD_PRELOAD."""
    out = subprocess.run([fsprof, "run", "-q", "-f", "-o", os.path.join(tmp, "s.json"), "--",
                          "printenv", "LD_PRELOAD"],
                         capture_output=True, text=True, check=True).stdout
    libs = [p for p in out.replace(":", " ").split() if "libfsprof_shim-" in p]
    return libs[0] if libs else None


# What the variants write, removed before each run.
OUTPUTS = ("p.json", "t.trace", "c.trace", "s.txt")


def fresh(tmp):
    """Removes the last run's outputs, so that each run writes a new file
    as `fsprof run` does by default (a new name each time). Writing over
    an existing file is a cost of its own, not a process's: ext4 starts
    writing back a file renamed over another (its replace-via-rename
    safeguard, auto_da_alloc), ~8 ms for the loop's 7 MB profile here."""
    for name in OUTPUTS:
        try:
            os.unlink(os.path.join(tmp, name))
        except FileNotFoundError:
            pass


def become_subreaper():
    """Orphans of the commands measured (fsprof run's keeper, which tears
    down fsprof's memory after fsprof has exited) become this script's
    children, so their CPU is counted by `reap_orphans`."""
    import ctypes
    PR_SET_CHILD_SUBREAPER = 36
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit(f"prctl(PR_SET_CHILD_SUBREAPER): errno {ctypes.get_errno()}")
    global SUBREAPER
    SUBREAPER = True


# Whether this script reaps orphans: only its own `main` makes it so. A
# script that imports it (per_process_cpu.py) keeps long-lived children,
# which `reap_orphans` would wait for forever.
SUBREAPER = False


def reap_orphans():
    """CPU s of every child left (orphans reparented here), once each has
    ended; nothing unless this script is a subreaper."""
    cpu = 0.0
    while SUBREAPER:
        try:
            _, _, ru = os.wait4(-1, 0)
        except ChildProcessError:
            return cpu
        cpu += ru.ru_utime + ru.ru_stime
    return cpu


def measure(argv, env, fifo, tmp=None):
    """(wall s, cpu s) of the command and everything it started."""
    if tmp is not None:
        fresh(tmp)
    e = dict(os.environ)
    e.update(env)
    pre = ["chrt", "-f", "50"] if fifo else []
    t = time.perf_counter()
    p = subprocess.Popen(pre + argv, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        sys.exit(f"failed ({status}): {' '.join(argv)}")
    return wall, ru.ru_utime + ru.ru_stime + reap_orphans()


def processes(fsprof, tmp, shell):
    """How many processes the workload starts, as `fsprof run` counts them."""
    prof = os.path.join(tmp, "count.json")
    subprocess.run([fsprof, "run", "-q", "-f", "-o", prof, "--", "bash", "-c", shell],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    reap_orphans()
    return len(json.load(open(prof))["processes"])


# Bootstrap resamples for the intervals; a fixed seed makes a report
# reproducible from its rounds.
BOOT = 4000


def boot_median(xs, rng):
    """95% percentile-bootstrap interval of the median of xs."""
    n = len(xs)
    meds = sorted(statistics.median(rng.choices(xs, k=n)) for _ in range(BOOT))
    return meds[int(0.025 * BOOT)], meds[int(0.975 * BOOT) - 1]


def boot_quotient(num, den, rng):
    """95% interval of median(num) / median(den), rounds resampled whole
    (num[i] and den[i] come from the same round); None when the
    denominator's interval reaches zero: no quotient is resolved then."""
    lo, _ = boot_median(den, rng)
    if lo <= 0:
        return None
    n = len(num)
    qs = []
    for _ in range(BOOT):
        idx = rng.choices(range(n), k=n)
        d = statistics.median(den[i] for i in idx)
        qs.append(statistics.median(num[i] for i in idx) / d if d > 0 else float("inf"))
    qs.sort()
    return qs[int(0.025 * BOOT)], qs[int(0.975 * BOOT) - 1]


def low(xs):
    """The 10% quantile: under load, interference only ever adds time, so
    a variant's fastest runs are its least disturbed ones."""
    return sorted(xs)[len(xs) // 10]


def boot_rounds(stat, n, rng):
    """95% interval of stat(round indices) over rounds resampled whole."""
    vals = sorted(stat(rng.choices(range(n), k=n)) for _ in range(BOOT))
    return vals[int(0.025 * BOOT)], vals[int(0.975 * BOOT) - 1]


def report_floor(nproc, times, rng):
    """Each variant's 10% quantile of wall time over the rounds, minus
    bare's, per process, and the run's over the empty library's, with
    intervals from resampling whole rounds."""
    n = len(times["bare"])
    if n < 10:
        return
    def added(k, idx):
        return (low([times[k][i][0] for i in idx]) - low([times["bare"][i][0] for i in idx])) / nproc * 1e6
    every = range(n)
    print("# the fastest tenth of each variant's runs (10% quantile of wall time), added us/proc [95% CI]:")
    for k in times:
        if k == "bare":
            continue
        lo, hi = boot_rounds(lambda idx, k=k: added(k, idx), n, rng)
        print(f"{k + ' (fastest tenth)':<40} {added(k, every):+8.1f} [{lo:+.1f}, {hi:+.1f}]")
    for k in times:
        if not k.startswith("fsprof run"):
            continue
        lo_e, _ = boot_rounds(lambda idx: added("empty.so", idx), n, rng)
        if lo_e <= 0:
            print(f"{k + ' / empty.so added (fastest tenth)':<40} not resolved (empty.so's interval reaches 0)")
            continue
        def q(idx, k=k):
            e = added("empty.so", idx)
            return added(k, idx) / e if e > 0 else float("inf")
        lo, hi = boot_rounds(q, n, rng)
        print(f"{k + ' / empty.so added (fastest tenth)':<40} {q(every):5.2f}x [{lo:.2f}, {hi:.2f}]")


def report(name, nproc, times):
    rng = random.Random(27)
    base = times["bare"]
    print(f"\n## {name}: {nproc} processes (as fsprof run counts them, the shell's forks included)")
    print(f"{'variant':<22} {'wall ms':>9} {'ratio':>7} {'cpu ms':>9} {'ratio':>7}"
          f"  {'added us/proc wall [95% CI]':>30}  {'cpu [95% CI]':>26}")
    added = {}
    for k, v in times.items():
        w = statistics.median(x[0] for x in v)
        c = statistics.median(x[1] for x in v)
        rw = statistics.median(x[0] / b[0] for x, b in zip(v, base))
        rc = statistics.median(x[1] / b[1] for x, b in zip(v, base))
        aw = [(x[0] - b[0]) / nproc * 1e6 for x, b in zip(v, base)]
        ac = [(x[1] - b[1]) / nproc * 1e6 for x, b in zip(v, base)]
        added[k] = (aw, ac)
        if k == "bare":
            print(f"{k:<22} {w * 1e3:9.1f} {rw:7.3f} {c * 1e3:9.1f} {rc:7.3f}")
            continue
        (wl, wh), (cl, ch) = boot_median(aw, rng), boot_median(ac, rng)
        print(f"{k:<22} {w * 1e3:9.1f} {rw:7.3f} {c * 1e3:9.1f} {rc:7.3f}"
              f"  {statistics.median(aw):+9.1f} [{wl:+7.1f}, {wh:+7.1f}]"
              f"  {statistics.median(ac):+7.1f} [{cl:+6.1f}, {ch:+6.1f}]")
    for k in times:
        if not k.startswith("fsprof run"):
            continue
        # What the run adds over what the empty library adds, both paired
        # with bare by round: the quotient of the medians, and its interval.
        parts = []
        for i, unit in ((0, "wall"), (1, "cpu")):
            num, den = added[k][i], added["empty.so"][i]
            q = statistics.median(num) / statistics.median(den) if statistics.median(den) > 0 else None
            ci = boot_quotient(num, den, rng)
            if ci is None:
                parts.append(f"{unit} not resolved (empty.so's interval reaches 0)")
            else:
                parts.append(f"{unit} {q:5.2f}x [{ci[0]:.2f}, {ci[1]:.2f}]")
        print(f"{k + ' / empty.so added':<40} " + "; ".join(parts) + "  (target <= 2x, wall)")
    report_floor(nproc, times, rng)
    for k in ("fsprof run", "fsprof trace", "trace, calls only"):
        a, b = times.get(k), times.get(k + " (other)")
        if not (a and b):
            continue
        # Pairwise in each round: this build against the other.
        rw = [x[0] / y[0] for x, y in zip(a, b)]
        rc = [x[1] / y[1] for x, y in zip(a, b)]
        dw = [(x[0] - y[0]) / nproc * 1e6 for x, y in zip(a, b)]
        dc = [(x[1] - y[1]) / nproc * 1e6 for x, y in zip(a, b)]
        (wl, wh), (cl, ch) = boot_median(dw, rng), boot_median(dc, rng)
        print(f"{k + ' / the other build':<40} wall {statistics.median(rw):5.3f}x  cpu "
              f"{statistics.median(rc):5.3f}x  ({statistics.median(dw):+.1f} us/proc wall "
              f"[{wl:+.1f}, {wh:+.1f}], {statistics.median(dc):+.1f} cpu [{cl:+.1f}, {ch:+.1f}]; "
              f"rounds {min(rw):.3f}..{max(rw):.3f})")
    for mode in ("run", "trace"):
        a, b = times.get(f"{mode}, this shim"), times.get(f"{mode}, other shim")
        if not (a and b):
            continue
        # Pairwise in each round: the two shims under the same fsprof.
        rw = [x[0] / y[0] for x, y in zip(a, b)]
        rc = [x[1] / y[1] for x, y in zip(a, b)]
        dw = [(x[0] - y[0]) / nproc * 1e6 for x, y in zip(a, b)]
        print(f"{mode + ', this shim / other shim':<40} wall {statistics.median(rw):5.3f}x  cpu "
              f"{statistics.median(rc):5.3f}x  ({statistics.median(dw):+.1f} us/proc wall; "
              f"rounds {min(rw):.3f}..{max(rw):.3f})")


def main():
    become_subreaper()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--loop", type=int, default=1000)
    ap.add_argument("--fsprof", default=os.path.join(ROOT, "target/release/fsprof"))
    ap.add_argument("--other")
    ap.add_argument("--swap-shim", action="store_true")
    ap.add_argument("--only", default="loop,xargs")
    ap.add_argument("--target", action="store_true")
    ap.add_argument("--no-trace", action="store_true")
    ap.add_argument("--strace", action="store_true")
    ap.add_argument("--calls-only", action="store_true")
    ap.add_argument("--fifo", action="store_true")
    ap.add_argument("--overwrite", action="store_true")
    args = ap.parse_args()
    for f in [args.fsprof] + ([args.other] if args.other else []):
        if not os.access(f, os.X_OK):
            sys.exit(f"{f} not found: cargo build --release")
    if args.calls_only and (os.geteuid() != 0 or not shutil.which("setpriv")):
        sys.exit("--calls-only needs root and setpriv")
    if not shutil.which("cc"):
        sys.exit("needs a C compiler (cc) for the empty preloaded library")
    tmp = tempfile.mkdtemp(prefix="fsprof-per-process-")
    try:
        with open(os.path.join(tmp, "empty.c"), "w") as f:
            f.write("void fsprof_bench_empty(void) {}\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", os.path.join(tmp, "empty.so"),
                        os.path.join(tmp, "empty.c")], check=True)
        load = open("/proc/loadavg").read().split()[:3]
        print(f"# fsprof {subprocess.run([args.fsprof, '--version'], capture_output=True, text=True).stdout.strip()}")
        print(f"# {args.rounds} interleaved rounds, medians; load before {' '.join(load)}"
              f"{', SCHED_FIFO' if args.fifo else ''}; {os.cpu_count()} CPUs"
              f"{'; each output written over the last' if args.overwrite else ''}")
        fresh_in = None if args.overwrite else tmp
        for name in args.only.split(","):
            shell = workloads(args.loop)[name]
            nproc = processes(args.fsprof, tmp, shell)
            vs = variants(args, tmp, shell)
            for v in vs.values():  # warm: page cache, binaries, the shim's install
                measure(*v, args.fifo, fresh_in)
            times = {k: [] for k in vs}
            order = list(vs)
            shuffle = random.Random(len(order))
            for _ in range(args.rounds):
                # A fixed order would always run one variant right after
                # another (its page cache, its CPU frequency, its writeback).
                shuffle.shuffle(order)
                for k in order:
                    times[k].append(measure(*vs[k], args.fifo, fresh_in))
            report(f"{name}: {shell}", nproc, times)
        print(f"\n# load after {' '.join(open('/proc/loadavg').read().split()[:3])}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
