"""What `fsprof agent`'s programs cost, as the kernel accounts it
(kernel.bpf_stats_enabled: each program's run time and runs), for the
workloads of bench/agent_overhead.py: the time spent in the agent's
programs during each workload, per program run and as a share of the
workload's wall time. This bounds the agent's in-kernel overhead without
the run-to-run noise of wall times on a shared machine (tracepoint
dispatch, ~10-20 ns an event, is not in it). With `--syscalls` too.

usage: sudo python3 bench/agent_program_cost.py [REPEATS]
       (FSPROF=path/to/fsprof to use another build)
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bpf_stats import programs  # noqa: E402
from loop_ext4 import LoopExt4, stop  # noqa: E402

REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
FSPROF = os.path.abspath(os.environ.get("FSPROF", "target/release/fsprof"))
if os.geteuid() != 0:
    sys.exit("needs root")

tmp = tempfile.mkdtemp(prefix="fsprof-agentcost-")
fs = LoopExt4(tmp, 512)
big = fs.big
WORK = {
    "grep (warm)": "grep -r -q fsprof-no-such-string /usr/include",
    "cold read 512 MiB": f"sync; echo 3 > /proc/sys/vm/drop_caches; cat {big} > /dev/null",
    "1,000 processes": "i=0; while [ $i -lt 1000 ]; do /bin/true; i=$((i+1)); done",
}
STATS = "/proc/sys/kernel/bpf_stats_enabled"
was = open(STATS).read()
open(STATS, "w").write("1\n")
agents = []
try:
    for extra in [[], ["--syscalls"]]:
        log = open(os.path.join(tmp, "log"), "w+")
        p = subprocess.Popen([FSPROF, "agent", *extra], stdout=subprocess.DEVNULL, stderr=log)
        agents.append(p)
        for _ in range(600):
            log.seek(0)
            if "capturing" in log.read():
                break
            time.sleep(0.05)
        prefix = f"f{p.pid:x}_"
        print(f"\n# fsprof agent {' '.join(extra)} (load {open('/proc/loadavg').read().split()[0]})")
        print(f"{'workload':<20} {'wall s':>7} {'in programs ms':>15} {'share':>7}  per program: ns/run (runs)")
        for name, cmd in WORK.items():
            shares = []
            for _ in range(REPEATS):
                subprocess.run(["sh", "-c", WORK[name]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                before = programs(prefix)
                t = time.perf_counter()
                subprocess.run(["sh", "-c", cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                wall = time.perf_counter() - t
                after = programs(prefix)
                per = {k: (after[k][0] - before.get(k, (0, 0))[0], after[k][1] - before.get(k, (0, 0))[1])
                       for k in after}
                ns = sum(v[0] for v in per.values())
                shares.append((ns / 1e9 / wall, wall, ns, per))
            shares.sort(key=lambda s: s[0])
            share, wall, ns, per = shares[len(shares) // 2]
            rows = ", ".join(f"{k} {v[0] / v[1]:.0f} ({v[1]})" for k, v in sorted(per.items()) if v[1])
            print(f"{name:<20} {wall:7.3f} {ns / 1e6:15.2f} {100 * share:6.2f}%  {rows}")
        stop(p)
finally:
    for p in agents:
        stop(p)
    open(STATS, "w").write(was)
    fs.remove()
    shutil.rmtree(tmp)
