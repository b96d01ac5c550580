#!/usr/bin/env bash
# Overhead of `fsprof kernel` (eBPF syscall layer) on
# `grep -r <absent pattern> /usr/include` with a warm page cache, against
# the bare command and a bpftrace script doing the same enter/exit latency
# histogram, measured in the same run. Two views:
#   1. end to end, interleaved rounds: the whole tool invocation, start-up
#      (program generation, load, attach) included; start-up is also
#      measured alone (`-- true`) and subtracted in a second ratio;
#   2. grep's own wall time inside each tracer, timed by a small wrapper,
#      so tool start-up and teardown are excluded.
# Medians over ROUNDS (default 11). Needs root and `cargo build --release`.
# usage: bench/kernel_overhead.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-11}
FSPROF=${FSPROF:-target/release/fsprof}
[[ -x $FSPROF ]] || { echo "$FSPROF not found: run cargo build --release" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "needs root (eBPF)" >&2; exit 2; }
command -v bpftrace >/dev/null || { echo "bpftrace not installed (apt-get install bpftrace)" >&2; exit 2; }
exec python3 - "$FSPROF" "$ROUNDS" <<'PY'
import os, shutil, signal, statistics, subprocess, sys, tempfile, time
sys.path.insert(0, "bench")  # run from the repository root
from interleave import interleaved, ratio_table

fsprof, rounds = os.path.abspath(sys.argv[1]), int(sys.argv[2])
PATTERN = "fsprof_bench_pattern_that_is_not_there"
grep = [shutil.which("grep"), "-r", PATTERN, "/usr/include"]
tmp = tempfile.mkdtemp(prefix="fsprof-kbench-")
prof = os.path.join(tmp, "p.json")
HIST = ("tracepoint:raw_syscalls:sys_enter /%s/ { @s[tid] = nsecs; } "
        "tracepoint:raw_syscalls:sys_exit /@s[tid]/ { @h[args->id] = hist(nsecs - @s[tid]); delete(@s[tid]); }")

def fs(*extra, cmd=grep):
    return [fsprof, "kernel", "-q", "-f", "-o", prof, "--layers", "syscall", *extra, "--"] + cmd

variants = {
    "bare": grep,
    "fsprof kernel": fs(),
    "fsprof kernel --all-syscalls": fs("--all-syscalls"),
    "bpftrace hist": ["bpftrace", "-q", "-e", HIST % "pid == cpid", "-c", " ".join(grep)],
}
startup = {
    "fsprof kernel": fs(cmd=["/bin/true"]),
    "fsprof kernel --all-syscalls": fs("--all-syscalls", cmd=["/bin/true"]),
    "bpftrace hist": ["bpftrace", "-q", "-e", HIST % "pid == cpid", "-c", "/bin/true"],
}
# Each round: every variant, then every start-up alone.
both = interleaved({**variants, **{"start-up " + k: c for k, c in startup.items()}}, rounds, warm=2)
times = {k: both[k] for k in variants}
st = {k: both["start-up " + k] for k in startup}
bare = statistics.median(times["bare"])
print(f"# 1. end to end: {' '.join(grep)}, warm cache, {rounds} interleaved rounds, medians")
print(f"{'variant':<30} {'median s':>9} {'ratio':>7} {'start-up s':>11} {'ratio w/o start-up':>19}")
for k, ts in times.items():
    m = statistics.median(ts)
    s = statistics.median(st[k]) if k in st else 0.0
    r2 = f"{(m - s) / bare:19.3f}" if k in st else ""
    print(f"{k:<30} {m:9.4f} {m / bare:7.3f} {s:11.4f} {r2}")

# 2. The command's own wall time inside each tracer, tool start-up and
# teardown excluded: a tiny wrapper (not named grep) forks grep and times it
# with CLOCK_MONOTONIC; the tracers record grep's syscalls (fsprof follows
# the wrapper's tree, bpftrace filters comm == "grep").
src = os.path.join(tmp, "timeit.c")
with open(src, "w") as f:
    f.write(r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
int main(int argc, char **argv) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pid_t p = fork();
    if (p == 0) { execv(argv[2], argv + 2); _exit(127); }
    int st; waitpid(p, &st, 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    FILE *o = fopen(argv[1], "w");
    fprintf(o, "%ld\n", (b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec));
    fclose(o);
    return 0;
}
""")
timeit = os.path.join(tmp, "timeit")
subprocess.run(["cc", "-O2", "-o", timeit, src], check=True)
res = os.path.join(tmp, "ns")
wrapped = [timeit, res] + grep

def inner(cmd):
    if os.path.exists(res):
        os.unlink(res)
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not os.path.exists(res):
        sys.exit(f"no timing from {cmd[:3]}...: the tool failed")
    return int(open(res).read()) / 1e9

inside = {
    "bare": wrapped,
    "fsprof kernel": fs(cmd=wrapped),
    "fsprof kernel --all-syscalls": fs("--all-syscalls", cmd=wrapped),
    "bpftrace hist": ["bpftrace", "-q", "-e", HIST % 'comm == "grep"', "-c", " ".join(wrapped)],
    # What enabling the syscall tracepoints costs before any work: empty
    # programs (bpftrace 0.17 has no raw tracepoints, so perf ones).
    "bpftrace empty programs": ["bpftrace", "-q", "-e",
                                "tracepoint:raw_syscalls:sys_enter { } tracepoint:raw_syscalls:sys_exit { }",
                                "-c", " ".join(wrapped)],
}
t2 = interleaved(inside, rounds, inner)
print(f"\n# 2. grep's own wall time inside each tracer (start-up excluded), {rounds} interleaved rounds, medians")
ratio_table(t2, 30)
shutil.rmtree(tmp)
PY
