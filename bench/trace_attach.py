#!/usr/bin/env python3
"""When `fsprof trace` (as root) has its page-fault programs attached, and
when the command starts and ends, from the kernel's clock (bpftrace): the
attach threads' first `bpf` call and last `bpf`/`perf_event_open` call
(`fsprof-faults`, and `fsprof-ring`, which makes the ring and loads and
attaches the end program), the command's
`exec` and `exit_group`, fsprof's `exit_group`; medians in µs from
fsprof's `exec`. With --other, another build takes turns with this one.

usage: sudo python3 bench/trace_attach.py [--fsprof PATH] [--other PATH] [--runs N] -- PROGRAM ARGS
Runs every trace under SCHED_FIFO, 0.15 s apart (a trace attaching within
an RCU grace period of the last one's detach waits for it). Needs bpftrace.
"""
import argparse
import os
import shutil
import signal
import statistics as st
import subprocess
import sys
import tempfile
import time

import bt_session

NAMES = ("fsprof-this", "fsprof-other")

SCRIPT = """
tracepoint:sched:sched_process_exec { printf("exec %s %d %llu\\n", comm, pid, nsecs); }
tracepoint:sched:sched_process_fork /strncmp(comm, "fsprof", 6) == 0/ { printf("fork %d %d %llu\\n", pid, args->child_pid, nsecs); }
tracepoint:syscalls:sys_enter_bpf /strncmp(comm, "fsprof-faults", 13) == 0/ { printf("att0 %d %llu\\n", pid, nsecs); }
tracepoint:syscalls:sys_exit_bpf /strncmp(comm, "fsprof-faults", 13) == 0 || strncmp(comm, "fsprof-ring", 11) == 0/ { printf("att1 %d %llu\\n", pid, nsecs); }
tracepoint:syscalls:sys_exit_perf_event_open /strncmp(comm, "fsprof-faults", 13) == 0 || strncmp(comm, "fsprof-ring", 11) == 0/ { printf("att1 %d %llu\\n", pid, nsecs); }
tracepoint:syscalls:sys_enter_exit_group { printf("exitg %d %llu\\n", pid, nsecs); }
"""

KEYS = ["att0", "att1", "cexec", "cexitg", "exitg"]


def parse(path):
    runs = {n: [] for n in NAMES}
    tool, kid = {}, {}
    for line in open(path):
        p = line.split()
        if len(p) < 3 or p[0] not in ("exec", "fork", "att0", "att1", "exitg"):
            continue
        t = int(p[-1])
        if p[0] == "exec" and p[1] in runs:
            r = {"t0": t}
            runs[p[1]].append(r)
            tool[int(p[2])] = r
        elif p[0] == "fork":
            if int(p[1]) in tool:
                kid[int(p[2])] = tool[int(p[1])]
        elif p[0] == "exec":
            r = kid.get(int(p[2]))
            if r is not None:
                r.setdefault("cexec", t - r["t0"])
        elif p[0] == "exitg" and int(p[1]) in kid and "cexec" in kid[int(p[1])]:
            r = kid[int(p[1])]
            r["cexitg"] = t - r["t0"]
        else:
            r = tool.get(int(p[1]))
            if r is None:
                continue
            if p[0] == "att0":
                r.setdefault("att0", t - r["t0"])
            else:
                r[p[0]] = t - r["t0"]
    return runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsprof", default="target/release/fsprof")
    ap.add_argument("--other")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("cmd", nargs="+")
    a = ap.parse_args()
    if not shutil.which("bpftrace"):
        sys.exit("needs bpftrace")
    tmp = tempfile.mkdtemp()
    try:
        tools = [os.path.join(tmp, NAMES[0])]
        shutil.copy(a.fsprof, tools[0])
        if a.other:
            tools.append(os.path.join(tmp, NAMES[1]))
            shutil.copy(a.other, tools[1])
        out = os.path.join(tmp, "bt.out")
        bt = bt_session.start(SCRIPT, out)
        trace = os.path.join(tmp, "t.trace")
        for _ in range(a.runs):
            for t in tools:
                time.sleep(0.15)
                subprocess.run(["chrt", "-f", "50", t, "trace", "-q", "-f", "-o", trace, "--"] + a.cmd,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        bt.send_signal(signal.SIGINT)
        bt.wait(timeout=240)  # bpftrace took >30 s to detach at idle (tenth session)
        runs = parse(out)
        load = open("/proc/loadavg").read().split()[:3]
        print(f"# load {' '.join(load)}, SCHED_FIFO; medians in us from fsprof's exec")
        print(f"{'build':<14}" + "".join(f"{k:>9}" for k in KEYS) + "   runs")
        for name, path in zip(NAMES, [a.fsprof, a.other]):
            rs = runs[name]
            if not rs:
                continue
            cells = [st.median([r[k] for r in rs if k in r]) / 1e3 if any(k in r for r in rs) else float("nan")
                     for k in KEYS]
            print(f"{os.path.basename(path):<14}" + "".join(f"{c:9.0f}" for c in cells) + f"   {len(rs)}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
