#!/usr/bin/env python3
"""The phases of `fsprof trace` (or any tracer that starts a command) on
one command, from the kernel's clock (bpftrace), to split a tracer's cost
over the bare command (issue 28): medians in us from the tool's exec of

  att0/att1  the tool's first `bpf` call / last `bpf` or `perf_event_open`
             before the command's exec (any thread of the tool)
  rel        the tool's one-byte write (fsprof's release of the held command)
  cexec0     the command's execve entered; cexec: its exec done
  cmain      the command's `main` (a uprobe on PROG: the loader and the
             preload's set-up lie between cexec and cmain)
  cexitg     the command's exit_group; reaped: the tool's wait4 returned it
  exitg      the tool's exit_group; gone: the tool's SIGCHLD to its parent
  cpu        the tool's on-CPU time, all threads; cpu_run: of it while the
             command ran (between cexec and cexitg)
  kwait      the command's time preempted (runnable, off CPU)
  fwait      the command's longest futex wait (under fsprof trace: its
             first file `mmap` waiting for the page-fault programs)
  end        from the command's exit_group to the tool's SIGCHLD (gone)

With --pair A,B (tool names), each column's median of B - A over runs
made in the same round, with a 95% bootstrap interval: an interval that
holds 0 is not resolved.

usage: sudo python3 bench/trace_phases.py --tool NAME=BINARY ARGS... [--tool ...] [--runs N] [--pair A,B] -- PROG ARGS
  e.g. --tool "new=target/release/fsprof trace -q -f -o TMP/t.trace --"
       --tool "floor=target/release/examples/fault_floor"
  TMP in a tool's arguments is a scratch directory; X_VAR=VALUE words set
  the tool's environment. Each binary runs as a copy named tl-NAME, under
  SCHED_FIFO, --gap s apart, the tools taking turns. PROG needs a `main`
  symbol (bench/mmap_scan.c built by cc has one). Needs bpftrace.
"""
import argparse
import os
import random
import shutil
import signal
import statistics as st
import subprocess
import tempfile
import time

import bt_session

SCRIPT = r"""
tracepoint:sched:sched_process_exec { if (@tool[pid] == 0 && strncmp(comm, "tl-", 3) == 0) { @tool[pid] = 1; printf("t0 %%d %%s %%llu\n", pid, comm, nsecs); } else if (@kid[pid]) { printf("cexec %%d %%llu\n", pid, nsecs); } }
tracepoint:sched:sched_process_fork /@tool[pid] && args->child_pid != 0/ { @kid[args->child_pid] = pid; printf("fork %%d %%d %%llu\n", pid, args->child_pid, nsecs); }
tracepoint:syscalls:sys_enter_bpf /@tool[pid]/ { printf("bpf0 %%d %%llu\n", pid, nsecs); }
tracepoint:syscalls:sys_exit_bpf /@tool[pid]/ { printf("bpf1 %%d %%llu\n", pid, nsecs); }
tracepoint:syscalls:sys_exit_perf_event_open /@tool[pid]/ { printf("bpf1 %%d %%llu\n", pid, nsecs); }
uprobe:%(prog)s:main { printf("cmain %%d %%llu\n", pid, nsecs); }
tracepoint:syscalls:sys_enter_write /@tool[pid] && args->count == 1/ { printf("rel %%d %%llu\n", pid, nsecs); }
tracepoint:syscalls:sys_enter_execve /@kid[pid]/ { printf("cexec0 %%d %%llu\n", pid, nsecs); }
tracepoint:syscalls:sys_enter_exit_group /@tool[pid]/ { printf("exitg %%d %%llu\n", pid, nsecs); }
tracepoint:syscalls:sys_enter_exit_group /@kid[pid]/ { printf("cexitg %%d %%llu\n", pid, nsecs); }
tracepoint:syscalls:sys_exit_wait4 /@tool[pid] && args->ret > 0/ { printf("reaped %%d %%llu\n", pid, nsecs); }
tracepoint:signal:signal_generate /args->sig == 17 && @tool[pid]/ { printf("gone %%d %%llu\n", pid, nsecs); }
tracepoint:syscalls:sys_enter_futex /@kid[pid]/ { @fb[tid] = nsecs; }
tracepoint:syscalls:sys_exit_futex /@kid[pid] && @fb[tid]/ { printf("cfutex %%d %%llu %%llu\n", pid, @fb[tid], nsecs); delete(@fb[tid]); }
tracepoint:sched:sched_switch { @on[args->next_pid] = nsecs; if (@tool[pid]) { printf("cpu %%d %%d %%llu %%llu\n", pid, tid, @on[tid], nsecs); } if (@kid[pid] && args->prev_state == 0) { printf("preempt %%d %%llu\n", pid, nsecs); } if (@kid[args->next_pid]) { printf("kon %%d %%llu\n", args->next_pid, nsecs); } }
"""

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", action="append", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--gap", type=float, default=0.15)
    ap.add_argument("--keep", help="keep bpftrace's raw output here")
    ap.add_argument("--pair", help="A,B: B - A paired by round, for two tools' names")
    ap.add_argument("cmd", nargs="+")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    tools = []
    for spec in a.tool:
        name, pre = spec.split("=", 1)
        pre = pre.split()
        envs = [w for w in pre if w.startswith("X_")]
        pre = [w for w in pre if not w.startswith("X_")]
        dst = os.path.join(tmp, "tl-" + name)
        shutil.copy(pre[0], dst)
        tools.append(("tl-" + name, ["env"] + [e[2:] for e in envs] + [dst] + [w.replace("TMP", tmp) for w in pre[1:]]))
    out = os.path.join(tmp, "bt.out")
    script = SCRIPT % {"prog": os.path.realpath(a.cmd[0])}
    bt = bt_session.start(script, out)
    for _ in range(a.runs):
        for _, cmd in tools:
            time.sleep(a.gap)
            subprocess.run(["chrt", "-f", "50"] + cmd + a.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    bt.send_signal(signal.SIGINT)
    bt.wait(timeout=30)
    if a.keep:
        shutil.copy(out, a.keep)
    runs = {n: [] for n, _ in tools}
    tool, kid = {}, {}
    for line in open(out):
        p = line.split()
        if not p or p[0] not in ("t0","fork","cexec","cexec0","rel","bpf0","bpf1","cmain","exitg","cexitg","reaped","gone","cpu","preempt","kon","cfutex"):
            continue
        if p[0] == "t0":
            r = {"t0": int(p[3]), "cpu": 0, "cpu_during": 0, "preempted": 0}
            if p[2] in runs:
                runs[p[2]].append(r)
            tool[int(p[1])] = r
            continue
        if p[0] == "fork":
            if int(p[1]) in tool:
                kid[int(p[2])] = tool[int(p[1])]
            continue
        pid = int(p[1])
        if p[0] == "cfutex":
            r = kid.get(pid)
            if r is not None:
                r["fwait"] = max(r.get("fwait", 0), int(p[3]) - int(p[2]))
            continue
        if p[0] in ("cexec", "cexec0", "cmain", "cexitg", "preempt", "kon"):
            r = kid.get(pid)
            if r is None: continue
            t = int(p[-1]) - r["t0"]
            if p[0] == "preempt": r["_pre"] = t
            elif p[0] == "kon":
                if "_pre" in r: r["preempted"] += t - r.pop("_pre")
            else: r.setdefault(p[0], t)
            continue
        r = tool.get(pid)
        if r is None: continue
        if p[0] == "cpu":
            on, off = int(p[3]) - r["t0"], int(p[4]) - r["t0"]
            on = max(on, 0)
            r["cpu"] += off - on
            r.setdefault("_cpu", []).append((on, off))
            continue
        t = int(p[-1]) - r["t0"]
        if p[0] == "bpf0": r.setdefault("att0", t)
        elif p[0] == "bpf1":
            if "cexec" not in r: r["att1"] = t
        else: r.setdefault(p[0], t)
    keys = ["att0", "att1", "rel", "cexec0", "cexec", "cmain", "cexitg", "reaped", "exitg", "gone", "cpu", "cpu_run", "kwait", "fwait", "end"]
    for rs in runs.values():
        for r in rs:
            if "cexec" in r and "cexitg" in r:
                r["cpu_run"] = sum(max(0, min(off, r["cexitg"]) - max(on, r["cexec"])) for on, off in r.get("_cpu", []))
            r["kwait"] = r["preempted"]
            r.setdefault("fwait", 0)
            if "gone" in r and "cexitg" in r:
                r["end"] = r["gone"] - r["cexitg"]
    print(f"# load {' '.join(open('/proc/loadavg').read().split()[:3])}, SCHED_FIFO; medians in us from the tool's exec; "
          "cpu: the tool's on-CPU time (all threads), cpu_run: of it while the command ran, kwait: the command preempted (runnable, off CPU)")
    print(f"{'tool':<14}" + "".join(f"{k:>8}" for k in keys) + "  runs")
    for n, rs in runs.items():
        cells = []
        for k in keys:
            xs = [r[k] for r in rs if k in r]
            cells.append(f"{st.median(xs)/1e3:8.0f}" if xs else f"{'-':>8}")
        print(f"{n:<14}" + "".join(cells) + f"  {len(rs)}")
    if a.pair:
        first, second = ("tl-" + n for n in a.pair.split(",", 1))
        print(f"# paired by round, {second} - {first}: median us [95% bootstrap interval], rounds {first} was lower")
        for k in keys:
            d = [y[k] - x[k] for x, y in zip(runs[first], runs[second]) if k in x and k in y]
            if not d:
                continue
            rng = random.Random(1)
            meds = sorted(st.median(rng.choices(d, k=len(d))) for _ in range(2000))
            print(f"{k:<8}{st.median(d)/1e3:+9.0f}  [{meds[50]/1e3:+.0f}, {meds[1949]/1e3:+.0f}]  {sum(x > 0 for x in d)} of {len(d)}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
