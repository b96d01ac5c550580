#!/usr/bin/env bash
# Cost of the layered attribution's programs (`sched_switch`, `sched_waking`,
# attached only when the syscall and block layers are both on), measured two
# ways in one run:
#   1. per event, by the kernel: with kernel.bpf_stats_enabled the kernel
#      sums each program's run time and runs; printed per program (ns per
#      run, runs per second), next to the syscall programs of the same
#      profiler as the baseline. Tracepoint dispatch (~10-20 ns) is not in it.
#   2. end to end: two processes bouncing a byte over two pipes
#      (ROUNDTRIPS round trips, each two sleeps, two wake-ups and about four
#      context switches), timed from inside, ROUNDS interleaved rounds,
#      medians: bare; `fsprof kernel --layers syscall` and `syscall,block`
#      tracing the workload; the same two tracing a sleeping process, so
#      that the workload's switches only pass through the early exits.
# Needs root and `cargo build --release`.
# usage: bench/attribution_overhead.sh [ROUNDS] [ROUNDTRIPS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-11}
TRIPS=${2:-200000}
FSPROF=${FSPROF:-target/release/fsprof}
[[ -x $FSPROF ]] || { echo "$FSPROF not found: run cargo build --release" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "needs root (eBPF)" >&2; exit 2; }
exec python3 - "$FSPROF" "$ROUNDS" "$TRIPS" <<'PY'
import os, shutil, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, "bench")  # run from the repository root
from interleave import interleaved

fsprof, rounds, trips = os.path.abspath(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
tmp = tempfile.mkdtemp(prefix="fsprof-attrbench-")
src = os.path.join(tmp, "pingpong.c")
with open(src, "w") as f:
    f.write(r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    int a[2], b[2];
    char c = 0;
    if (pipe(a) || pipe(b)) return 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t p = fork();
    if (p == 0) {
        for (long i = 0; i < n; i++) {
            if (read(a[0], &c, 1) != 1 || write(b[1], &c, 1) != 1) _exit(1);
        }
        _exit(0);
    }
    for (long i = 0; i < n; i++) {
        if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1) return 1;
    }
    waitpid(p, NULL, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%ld\n", (t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec));
    return 0;
}
""")
exe = os.path.join(tmp, "pingpong")
subprocess.run(["cc", "-O2", "-o", exe, src], check=True)
prof = os.path.join(tmp, "p.json")
work = [exe, str(trips)]
sleeper = subprocess.Popen(["sleep", "100000"])

sys.path.insert(0, "bench")
from bpf_stats import programs

def start_tracer(layers, target):
    k = subprocess.Popen([fsprof, "kernel", "-q", "-f", "-o", prof, "--layers", layers] + target,
                         stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, text=True)
    while "tracing" not in k.stderr.readline():
        if k.poll() is not None:
            sys.exit(f"fsprof kernel --layers {layers} failed")
    return k

def stop(k):
    k.send_signal(2)
    k.wait()

def run_work():
    out = subprocess.run(work, check=True, capture_output=True, text=True).stdout
    return int(out.split()[-1]) / trips

# 1. Per event, by the kernel's own accounting.
with open("/proc/sys/kernel/bpf_stats_enabled") as f:
    was = f.read().strip()
with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
    f.write("1")
try:
    for what, target in [("the workload traced", "traced"), ("a sleeping process traced", "other")]:
        if target == "traced":
            k = subprocess.Popen([fsprof, "kernel", "-q", "-f", "-o", prof, "--layers",
                                  "syscall,block", "--"] + work,
                                 stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            # The programs go when fsprof exits: read their counters while
            # the workload runs, the last reading kept.
            # the last reading of each (they detach one by one at the end).
            before, after = None, {}
            while k.poll() is None:
                now = programs(f"f{k.pid:x}_")
                if now:
                    before = before or now
                    after.update(now)
            k.wait()
        else:
            k = start_tracer("syscall,block", ["--pid", str(sleeper.pid)])
            before = programs(f"f{k.pid:x}_")
            t0 = time.monotonic()
            run_work()
            wall = time.monotonic() - t0
            after = programs(f"f{k.pid:x}_")
            stop(k)
            sched = sum(after[n][0] - before[n][0] for n in after if n.startswith("sched_"))
        print(f"# 1. per run of each program, {what}, {trips} round trips (kernel.bpf_stats_enabled)")
        print(f"{'program':<18} {'runs':>10} {'ns/run':>8}")
        for n in sorted(after):
            t = after[n][0] - (before or {}).get(n, (0, 0))[0]
            c = after[n][1] - (before or {}).get(n, (0, 0))[1]
            print(f"{n:<18} {c:>10} {t / c if c else 0:>8.1f}")
        if target == "other":
            print(f"the scheduler programs (sched_switch, sched_waking) ran {sched / 1e6:.1f} ms in "
                  f"{wall:.2f} s on {os.cpu_count()} CPUs: "
                  f"{100 * sched / 1e9 / wall / os.cpu_count():.2f}% of the machine's CPU time")
        print()
finally:
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write(was)

# 2. End to end.
def traced(layers):
    return lambda: int(subprocess.run(
        [fsprof, "kernel", "-q", "-f", "-o", prof, "--layers", layers, "--"] + work,
        check=True, capture_output=True, text=True).stdout.split()[-1]) / trips

def other(layers):
    def run():
        k = start_tracer(layers, ["--pid", str(sleeper.pid)])
        ns = run_work()
        stop(k)
        return ns
    return run

variants = {
    "bare": run_work,
    "syscall (traced)": traced("syscall"),
    "syscall,block (traced)": traced("syscall,block"),
    "syscall (other)": other("syscall"),
    "syscall,block (other)": other("syscall,block"),
}
t = interleaved(variants, rounds, lambda v: v())
sleeper.kill()
load = open("/proc/loadavg").read().split()[:3]
print(f"# 2. end to end: {trips} round trips, {rounds} interleaved rounds, medians; load {' '.join(load)}")
print(f"{'variant':<26} {'ns/round trip':>14} {'vs bare':>8} {'vs same w/o block':>18}")
bare = statistics.median(t["bare"])
for k, ts in t.items():
    m = statistics.median(ts)
    extra = ""
    if "block" in k:
        extra = f"{m / statistics.median(t[k.replace('syscall,block', 'syscall')]):18.3f}"
    print(f"{k:<26} {m:14.0f} {m / bare:8.3f} {extra}")
shutil.rmtree(tmp)
PY
