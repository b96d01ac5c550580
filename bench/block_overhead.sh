#!/usr/bin/env bash
# Cost of the block layer's programs per block request, as the kernel
# accounts it (kernel.bpf_stats_enabled: each program's run time and runs),
# for two fsprof builds in interleaved rounds: FSPROF_BASE (e.g. a build of
# an earlier commit) and FSPROF. Each round runs `fsprof kernel
# --system-wide --layers block` around REQUESTS direct 4 KiB reads of a
# loop device and divides the run time of the `block_rq_*` programs
# (issue, completion and, where present, requeue: their names are cut to
# one `block_rq_` row) by half their runs (one issue and one completion per
# request). Tracepoint dispatch (~10-20 ns) is not in it. Prints per build
# the median ns per request and the ratio to FSPROF_BASE.
# Needs root.
# usage: FSPROF_BASE=old/fsprof FSPROF=new/fsprof bench/block_overhead.sh [ROUNDS] [REQUESTS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-11}
REQUESTS=${2:-20000}
FSPROF=${FSPROF:-target/release/fsprof}
FSPROF_BASE=${FSPROF_BASE:?set FSPROF_BASE to the fsprof build to compare with}
for f in "$FSPROF" "$FSPROF_BASE"; do
    [[ -x $f ]] || { echo "$f not found" >&2; exit 2; }
done
[[ $(id -u) == 0 ]] || { echo "needs root (eBPF, a loop device)" >&2; exit 2; }
exec python3 - "$FSPROF_BASE" "$FSPROF" "$ROUNDS" "$REQUESTS" <<'PY'
import os, statistics, subprocess, sys, tempfile

base, new = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
rounds, requests = int(sys.argv[3]), int(sys.argv[4])
tmp = tempfile.mkdtemp(prefix="fsprof-blockbench-")
img = os.path.join(tmp, "img")
with open(img, "wb") as f:
    f.truncate(256 << 20)
dev = subprocess.run(["losetup", "--find", "--show", img], check=True,
                     capture_output=True, text=True).stdout.strip()
prof = os.path.join(tmp, "p.json")

sys.path.insert(0, "bench")
from bpf_stats import programs

def block_programs(prefix):
    """(run_time_ns, run_cnt) summed over the programs named prefix+block_rq_*."""
    rows = programs(prefix + "block_rq_").values()
    return sum(t for t, _ in rows), sum(c for _, c in rows)

def ns_per_request(fsprof):
    if os.path.exists(prof):
        os.unlink(prof)
    k = subprocess.Popen([fsprof, "kernel", "-q", "-f", "-o", prof, "--system-wide",
                          "--layers", "block"], stdin=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    while "tracing" not in k.stderr.readline():
        if k.poll() is not None:
            sys.exit(f"{fsprof} kernel --layers block failed")
    prefix = f"f{k.pid:x}_"
    t0, c0 = block_programs(prefix)
    subprocess.run(["dd", f"if={dev}", "of=/dev/null", "bs=4k", f"count={requests}",
                    "iflag=direct"], check=True, capture_output=True)
    t1, c1 = block_programs(prefix)
    k.send_signal(2)
    k.wait()
    return (t1 - t0) / max((c1 - c0) / 2, 1)

with open("/proc/sys/kernel/bpf_stats_enabled") as f:
    was = f.read().strip()
with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
    f.write("1")
try:
    ns_per_request(base)  # warm caches and binaries
    ns_per_request(new)
    got = {"base": [], "new": []}
    for _ in range(rounds):
        got["base"].append(ns_per_request(base))
        got["new"].append(ns_per_request(new))
finally:
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write(was)
    subprocess.run(["losetup", "-d", dev])
    os.unlink(img)
    if os.path.exists(prof):
        os.unlink(prof)
    os.rmdir(tmp)

b = statistics.median(got["base"])
print(f"load: {open('/proc/loadavg').read().split()[:3]}")
print(f"{'build':<6} {'median ns/request':>18} {'ratio':>7}   (min..max ns)")
for k in ("base", "new"):
    m = statistics.median(got[k])
    print(f"{k:<6} {m:>18.1f} {m / b:>7.3f}   ({min(got[k]):.1f}..{max(got[k]):.1f})")
PY
