#!/usr/bin/env bash
# Overhead of `fsprof kernel` (eBPF syscall layer) on
# `grep -r <absent pattern> /usr/include` with a warm page cache, against
# the bare command and a bpftrace script doing the same enter/exit latency
# histogram, measured in the same run. Two views:
#   1. end to end, interleaved rounds: the whole tool invocation, start-up
#      (program generation, load, attach) included; start-up is also
#      measured alone (`-- true`) and subtracted in a second ratio;
#   2. steady state: each tracer is attached once (filtering comm == grep)
#      and only grep's own wall time is measured.
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

fsprof, rounds = os.path.abspath(sys.argv[1]), int(sys.argv[2])
PATTERN = "fsprof_bench_pattern_that_is_not_there"
grep = [shutil.which("grep"), "-r", PATTERN, "/usr/include"]
tmp = tempfile.mkdtemp(prefix="fsprof-kbench-")
prof = os.path.join(tmp, "p.json")
HIST = ("tracepoint:raw_syscalls:sys_enter /%s/ { @s[tid] = nsecs; } "
        "tracepoint:raw_syscalls:sys_exit /@s[tid]/ { @h[args->id] = hist(nsecs - @s[tid]); delete(@s[tid]); }")

def wall(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t

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
for _ in range(2):
    for c in list(variants.values()) + list(startup.values()):
        wall(c)
times = {k: [] for k in variants}
st = {k: [] for k in startup}
for _ in range(rounds):
    for k, c in variants.items():
        times[k].append(wall(c))
    for k, c in startup.items():
        st[k].append(wall(c))
bare = statistics.median(times["bare"])
print(f"# 1. end to end: {' '.join(grep)}, warm cache, {rounds} interleaved rounds, medians")
print(f"{'variant':<30} {'median s':>9} {'ratio':>7} {'start-up s':>11} {'ratio w/o start-up':>19}")
for k, ts in times.items():
    m = statistics.median(ts)
    s = statistics.median(st[k]) if k in st else 0.0
    r2 = f"{(m - s) / bare:19.3f}" if k in st else ""
    print(f"{k:<30} {m:9.4f} {m / bare:7.3f} {s:11.4f} {r2}")

def attached(cmd, ready):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        if ready in line:
            return p
    sys.exit(f"{cmd[0]} did not attach")

def steady(name, cmd, ready):
    out = []
    if cmd:
        p = attached(cmd, ready)
    for _ in range(rounds):
        out.append(wall(grep))
    if cmd:
        p.send_signal(signal.SIGINT)
        p.communicate()
    return name, statistics.median(out)

print(f"\n# 2. steady state: tracer attached once (comm == grep), grep timed alone, {rounds} runs, medians")
rows = [steady("bare", None, None),
        steady("fsprof kernel --comm grep", [fsprof, "kernel", "-f", "-o", prof, "--layers", "syscall", "--comm", "grep"], "fsprof: tracing"),
        steady("fsprof kernel --comm grep --all-syscalls", [fsprof, "kernel", "-f", "-o", prof, "--layers", "syscall", "--all-syscalls", "--comm", "grep"], "fsprof: tracing"),
        steady("bpftrace hist comm == grep", ["bpftrace", "-e", HIST % 'comm == "grep"'], "Attaching"),
        steady("bare (again)", None, None)]
b = rows[0][1]
for name, m in rows:
    print(f"{name:<42} {m:9.4f} {m / b:7.3f}")
shutil.rmtree(tmp)
PY
