#!/usr/bin/env bash
# Cost of the layered attribution's scheduler programs (`sched_switch`,
# `sched_waking`, attached only when the syscall and block layers are both
# on) on context switches, measured in the same run against the same
# profiler without them.
#
# Workload: two processes bouncing a byte over two pipes (ROUNDTRIPS round
# trips: every one is two sleeps, two wake-ups and four context switches),
# timed from inside by the workload itself, so tool start-up is excluded.
# Variants, interleaved, ROUNDS rounds, medians:
#   bare                        no tracer
#   syscall (traced)            fsprof kernel --layers syscall, the workload traced
#   syscall,block (traced)      the same with attribution: every switch and
#                               wake-up of the traced pair runs the programs
#   syscall (other)             fsprof kernel --layers syscall --pid <a sleeping
#                               process>: the workload is not traced
#   syscall,block (other)       the same with attribution: the programs still
#                               run on every switch system-wide, and stop early
# Prints ns per round trip and the extra ns per context switch against the
# variant without attribution. Needs root and `cargo build --release`.
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

def traced(layers):
    return [fsprof, "kernel", "-q", "-f", "-o", prof, "--layers", layers, "--"] + work

def other(layers):
    # The tracer watches a sleeping process; the workload runs beside it.
    def run():
        k = subprocess.Popen([fsprof, "kernel", "-q", "-f", "-o", prof, "--layers", layers,
                              "--pid", str(sleeper.pid)],
                             stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        while "tracing" not in k.stderr.readline():
            if k.poll() is not None:
                sys.exit(f"fsprof kernel --layers {layers} failed")
        out = subprocess.run(work, check=True, capture_output=True, text=True).stdout
        k.send_signal(2)
        k.wait()
        return out
    return run

variants = {
    "bare": work,
    "syscall (traced)": traced("syscall"),
    "syscall,block (traced)": traced("syscall,block"),
    "syscall (other)": other("syscall"),
    "syscall,block (other)": other("syscall,block"),
}

def once(v):
    """ns per round trip, as the workload timed itself (printed last)."""
    if callable(v):
        out = v()
    else:
        out = subprocess.run(v, check=True, capture_output=True, text=True).stdout
    return int(out.split()[-1]) / trips

for v in variants.values():
    once(v)
t = {k: [] for k in variants}
for _ in range(rounds):
    for k, v in variants.items():
        t[k].append(once(v))
sleeper.kill()
load = open("/proc/loadavg").read().split()[:3]
print(f"# {trips} round trips (4 context switches each), {rounds} interleaved rounds, medians; load {' '.join(load)}")
print(f"{'variant':<26} {'ns/round trip':>14} {'vs bare':>8} {'extra ns/switch vs same w/o block':>34}")
bare = statistics.median(t["bare"])
for k, ts in t.items():
    m = statistics.median(ts)
    extra = ""
    if "block" in k:
        base = statistics.median(t[k.replace("syscall,block", "syscall")])
        extra = f"{(m - base) / 4:34.1f}"
    print(f"{k:<26} {m:14.0f} {m / bare:8.3f} {extra}")
shutil.rmtree(tmp)
PY
