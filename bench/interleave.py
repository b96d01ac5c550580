"""What the overhead scripts share: variants measured in interleaved rounds
(every variant once per round, in turn, so that a drift in machine load
falls on all of them alike), and the table of their medians as ratios to a
baseline measured in the same run.

Used by user_overhead.py, trace_replay.py, kernel_overhead.sh and
attribution_overhead.sh (the shell scripts run from the repository root and
put bench/ on sys.path)."""
import statistics
import subprocess
import time


def wall(cmd):
    """Seconds `cmd` takes, its output discarded."""
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def interleaved(variants, rounds, measure=wall, warm=1):
    """{name: [measure(v), one per round]} for each variant v of the dict
    `variants`, after `warm` unrecorded passes that warm caches and binaries."""
    for _ in range(warm):
        for v in variants.values():
            measure(v)
    times = {k: [] for k in variants}
    for _ in range(rounds):
        for k, v in variants.items():
            times[k].append(measure(v))
    return times


def ratio_table(times, width, base="bare"):
    """Prints per variant its median (s), the ratio to `base`'s median, and
    the range of its ratios."""
    b = statistics.median(times[base])
    print(f"{'variant':<{width}} {'median s':>9} {'ratio':>7}   (min..max ratio)")
    for k, ts in times.items():
        m = statistics.median(ts)
        print(f"{k:<{width}} {m:9.4f} {m / b:7.3f}   ({min(ts) / b:.3f}..{max(ts) / b:.3f})")
