#!/usr/bin/env python3
"""Where `fsprof run -q -- true`'s wall time goes, stage by stage, beside
the floor of bench/startup.sh --floor (a static C launcher that preloads
the shim, vfork+execve's `true` and waits), from the kernel's own
scheduler tracepoints (bpftrace; root): exec of the tool, its start-up
until it clones the command, the command's execve, the command itself,
the wake-up at its exit, the tool's work after it, and the tool's exit.
The runs of the two alternate; medians over the runs.

A process's exit is timed where its parent learns of it: the SIGCHLD it
sends (signal_generate), after its memory and files are released. On
this kernel (6.18) sched_process_exit fires before `exit_mm` and
`exit_files`: ending there, work a tool leaves to its own exit (an
unmapping, a last close) was not counted at all.

With --syscalls, also fsprof's system calls one by one (start, gap since
the previous one, duration; medians over the runs with the most common
sequence): where inside a stage the time goes. Tracing every system call
costs ~1 us each, so read those as shares of a slightly slower run.

With --trace, the tool runs `trace -q -f -o FILE -- CMD` rather than
`run -q -- CMD` (as root: the page-fault programs attached too), and
--cmd "PROGRAM ARGS" picks CMD (default `true`; the floor runs it too).
The clone is then the one of the child that execs the command (fsprof
starts threads before it).

With --output NAME, `run` writes its profile with `-f -o NAME` (in the
loop's directory: each run replaces the last one's file, as trace's
`-f -o` does) rather than under a new default name: the end of a run
with `-o FILE`.

With --other PATH, another build (main before a change, say) runs in the
same loop (the two take turns at running first), and gets a column of its own and
its difference to this build. --other may be given several times (build
options side by side, say): each round runs them all, each round's order
rotated by one, and each gets its own table against this build. With
--design-floor instead, the "other" is bench/run_floor.c (static C making
`fsprof run -q`'s system calls, shim inactive): stage by stage, what
fsprof adds over the system calls its design makes.

usage: sudo python3 bench/startup_stages.py [--runs N] [--fsprof PATH] [--other PATH ... | --design-floor] [--syscalls] [--fifo]
                                           [--trace] [--cmd "PROGRAM ARGS"] [--output NAME]
Needs bpftrace, cc and a release build.
"""
import argparse
import os
import re
import shutil
import signal
import statistics as st
import subprocess
import sys
import tempfile
import time

# The floor's launcher, as bench/startup.sh --floor builds it.
LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vlaunch.c")
# The floor of run's design (--design-floor), as bench/startup.sh --floor builds it.
RUN_FLOOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_floor.c")

# The tools are copied under these names (a comm is 15 bytes at most),
# so the tracepoints can tell them apart from everything else; the k-th
# --other is OTHER + k after the first.
TOOL, OTHER, FLOOR = "fsp-stages", "fsp-stages-o", "floor-stages"

STAGES = [
    ("t0", "exec", "exec of the tool"),
    ("exec", "fork", "tool start-up until it clones"),
    ("fork", "cexecve", "clone until the command's execve"),
    ("cexecve", "cexec", "the command's execve"),
    ("cexec", "cexitg", "the command (ld.so, shim, true)"),
    ("cexitg", "cexit", "the command's exit"),
    ("cexit", "exitg", "tool after the command exited"),
    ("exitg", "exit", "tool's exit"),
    ("t0", "exit", "total"),
]


def script(syscalls):
    s = """
tracepoint:syscalls:sys_enter_execve { printf("execve %d %llu\\n", pid, nsecs); }
tracepoint:sched:sched_process_exec { printf("exec %d %llu %s\\n", pid, nsecs, comm); }
tracepoint:sched:sched_process_fork { printf("fork %d %llu %d\\n", args->parent_pid, nsecs, args->child_pid); }
tracepoint:syscalls:sys_enter_exit_group { printf("exitg %d %llu\\n", pid, nsecs); }
tracepoint:signal:signal_generate /args->sig == 17/ { printf("exit %d %llu\\n", pid, nsecs); }
"""
    if syscalls:
        s += f"""
tracepoint:raw_syscalls:sys_enter /comm == "{TOOL}"/ {{ printf("E %d %llu %d\\n", tid, nsecs, args->id); }}
tracepoint:raw_syscalls:sys_exit /comm == "{TOOL}"/ {{ printf("X %d %llu %d\\n", tid, nsecs, args->ret); }}
"""
    return s


def other_name(k):
    return OTHER if k == 0 else f"{OTHER}{k}"


def parse(path, others=1):
    ev = []
    for line in open(path):
        p = line.split()
        if len(p) >= 3 and p[0] in ("execve", "exec", "fork", "exitg", "exit", "E", "X"):
            ev.append((int(p[2]), p))
    ev.sort(key=lambda e: e[0])
    runs = {TOOL: [], FLOOR: [], **{other_name(k): [] for k in range(others)}}
    last_execve = {}
    cur = {}  # pid of a tool -> its run
    forked = {}  # pid of a task a tool forked -> (its run, when)
    child = {}  # pid of a command (a forked task that exec'd) -> its tool's run
    rounds = {}
    for t, p in ev:
        kind, pid = p[0], int(p[1])
        if kind == "execve":
            last_execve[pid] = t
            if pid in forked:
                forked[pid][0].setdefault("cexecve", t)
        elif kind == "exec" and p[3] in runs:
            # The round: how many runs of this tool started before it.
            rounds[p[3]] = rounds.get(p[3], -1) + 1
            cur[pid] = {"name": p[3], "t0": last_execve.get(pid, t), "exec": t, "sys": [],
                        "round": rounds[p[3]]}
        elif kind == "exec" and pid in forked:
            r, at = forked.pop(pid)
            r["fork"], r["cexec"] = at, t
            child[pid] = r
        elif kind == "fork" and pid in cur:
            # Threads are forks too: the command's is the one that execs.
            forked[int(p[3])] = (cur[pid], t)
        elif kind == "exitg" and pid in child:
            child[pid]["cexitg"] = t
        elif kind == "exit" and pid in child:
            child.pop(pid)["cexit"] = t
        elif kind == "exitg" and pid in cur:
            cur[pid]["exitg"] = t
        elif kind == "exit" and pid in cur:
            r = cur.pop(pid)
            r["exit"] = t
            runs[r["name"]].append(r)
        elif kind == "E" and pid in cur:
            cur[pid]["open"] = (int(p[3]), t)
        elif kind == "X" and pid in cur and cur[pid].get("open"):
            nr, t1 = cur[pid].pop("open")
            cur[pid]["sys"].append((nr, t1, t))
    return {k: [r for r in v if all(a in r and b in r for a, b, _ in STAGES)] for k, v in runs.items()}


def syscall_names():
    names = {}
    for h in ("/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "/usr/include/asm/unistd_64.h"):
        if os.path.exists(h):
            for line in open(h):
                m = re.match(r"#define __NR_(\w+)\s+(\d+)", line)
                if m:
                    names[int(m.group(2))] = m.group(1)
    return names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--fsprof", default="target/release/fsprof")
    ap.add_argument("--other", action="append", default=[],
                    help="another build, timed in the same loop (may be repeated)")
    ap.add_argument("--design-floor", action="store_true",
                    help="as the other: bench/run_floor.c, static C making run's system calls")
    ap.add_argument("--syscalls", action="store_true")
    ap.add_argument("--fifo", action="store_true", help="run the loop under chrt -f 50")
    ap.add_argument("--trace", action="store_true", help="time `trace` rather than `run`")
    ap.add_argument("--cmd", default="true", help="the command (default true)")
    ap.add_argument("--output", metavar="NAME", help="run with `-f -o NAME` (see the module doc)")
    a = ap.parse_args()
    if a.design_floor and (a.other or a.trace):
        sys.exit("--design-floor is run's floor: not with --other or --trace")
    for prog in ("bpftrace", "cc"):
        if not shutil.which(prog):
            sys.exit(f"needs {prog}")
    tmp = tempfile.mkdtemp()
    try:
        tool = os.path.join(tmp, TOOL)
        shutil.copy(os.path.abspath(a.fsprof), tool)
        others = [os.path.join(tmp, other_name(k)) for k in range(max(1, len(a.other)))]
        for path, copy in zip(others, a.other):
            shutil.copy(os.path.abspath(copy), path)
        if a.design_floor:
            subprocess.run(["cc", "-O2", "-static", "-o", others[0], RUN_FLOOR], check=True)
            a.other = ["bench/run_floor.c"]
        floor = os.path.join(tmp, FLOOR)
        subprocess.run(["cc", "-O2", "-static", "-o", floor, LAUNCHER], check=True)
        cwd = os.path.join(tmp, "cwd")
        os.mkdir(cwd)
        cmd = a.cmd.split()
        cmd[0] = shutil.which(cmd[0]) or os.path.abspath(cmd[0])
        cmd = " ".join(cmd)
        shim = subprocess.run([tool, "run", "-q", "-o", "/dev/null", "--", "sh", "-c", 'printf %s "$LD_PRELOAD"'],
                              cwd=cwd, capture_output=True, text=True).stdout
        if not os.path.isfile(shim):
            sys.exit(f"cannot find the shim ({shim!r})")
        out = os.path.join(tmp, "bt.out")
        bt = subprocess.Popen(["bpftrace", "-e", script(a.syscalls)], stdout=open(out, "w"),
                              stderr=subprocess.STDOUT)
        # bpftrace prints "Attaching N probes..." once they are in place.
        for _ in range(300):
            time.sleep(0.1)
            if "Attaching" in open(out).read(4096):
                break
        time.sleep(1)
        sub = "trace -q -f -o t.trace" if a.trace else "run -q"
        if a.output and not a.trace:
            sub = f"run -q -f -o {a.output}"
        # A trace attaching within an RCU grace period of the last one's
        # detach waits for it: 0.15 s between traces.
        pause = "sleep 0.15; " if a.trace else ""
        this = f'{pause}{tool} {sub} -- {cmd} >/dev/null 2>&1; rm -f fsprof-*.json; '
        those = [f'{pause}{o} {sub} -- {cmd} >/dev/null 2>&1; rm -f fsprof-*.json; ' for o in others]
        if a.design_floor:
            those = [f'{others[0]} {shim} {cmd} >/dev/null 2>&1; rm -f fsprof-*.json; ']
        # The builds take turns at running first after the floor: round i
        # runs them in their order rotated by i (two: alternately).
        tools = [this] + those[:len(a.other)]
        n = len(tools)
        body = f"case $((i % {n})) in " + "".join(
            f"{r}) {''.join(tools[r:] + tools[:r])};; " for r in range(n)) + "esac; "
        loop = f'for i in $(seq {a.runs}); do {floor} --preload {shim} {cmd} >/dev/null; {body}done'
        pre = ["chrt", "-f", "50"] if a.fifo else []
        subprocess.run(pre + ["sh", "-c", loop], cwd=cwd, check=True)
        time.sleep(1)
        bt.send_signal(signal.SIGINT)
        bt.wait(timeout=30)
        runs = parse(out, len(others))
        load = open("/proc/loadavg").read().split()[:3]
        print(f"# {os.path.basename(a.fsprof)} ({subprocess.run([a.fsprof, '--version'], capture_output=True, text=True).stdout.strip()}); "
              f"load {' '.join(load)}{', SCHED_FIFO' if a.fifo else ''}")
        for k, path in enumerate(a.other or [None]):
            table(runs, other_name(k) if path else None, path)
        if a.other:
            print("# paired: the median of the differences of runs made in the same round (the two took turns "
                  "at running first), with its 95% interval (order statistics); an interval that holds 0 is not resolved")
        if a.syscalls:
            syscalls(runs[TOOL])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def table(runs, other, path):
    """This build beside the floor, stage by stage, and beside `other`
    (a key of `runs`, with `path` its build) when there is one."""
    print(f"# medians over {len(runs[FLOOR])} floor and {len(runs[TOOL])} fsprof runs"
          + (f", {len(runs[other])} of the other build ({path})" if other else "") + ", us")
    head = f"{'stage':<36} {'floor':>8} {'fsprof':>8} {'added':>8}"
    print(head + (f" {'other':>8} {'o-this':>8}  {'paired o-this [95%]':>22}" if other else ""))
    for b0, b1, name in STAGES:
        def med(rs):
            return st.median(r[b1] - r[b0] for r in rs) / 1e3
        f, t = med(runs[FLOOR]), med(runs[TOOL])
        line = f"{name:<36} {f:8.1f} {t:8.1f} {t - f:+8.1f}"
        if other:
            o = med(runs[other])
            line += f" {o:8.1f} {o - t:+8.1f}  {paired(runs[other], runs[TOOL], b0, b1)}"
        print(line)


def paired(other, this, b0, b1):
    """Median of other - this over runs paired by their round, and a
    distribution-free 95% interval of that median (the order statistics
    n/2 -+ 1.96 sqrt(n)/2 of the sorted differences)."""
    this_by_round = {r["round"]: r for r in this}
    d = sorted((o[b1] - o[b0] - (t[b1] - t[b0])) / 1e3
               for o in other if (t := this_by_round.get(o["round"])) is not None)
    if len(d) < 10:
        return ""
    n = len(d)
    k = max(0, int(n / 2 - 1.96 * n ** 0.5 / 2))
    return f"{st.median(d):+7.1f} [{d[k]:+.1f}, {d[n - 1 - k]:+.1f}]"


def syscalls(runs):
    names = syscall_names()
    seqs = {}
    for r in runs:
        seqs.setdefault(tuple(s[0] for s in r["sys"]), []).append(r)
    seq, same = max(seqs.items(), key=lambda kv: len(kv[1]))
    print(f"# fsprof's system calls: {len(same)} of {len(runs)} runs made this sequence; "
          "start (from the tool's execve), gap since the previous call, duration; medians, us")
    for i, nr in enumerate(seq):
        def prev(r):
            return r["t0"] if i == 0 else r["sys"][i - 1][2]
        at = st.median(r["sys"][i][1] - r["t0"] for r in same) / 1e3
        gap = st.median(r["sys"][i][1] - prev(r) for r in same) / 1e3
        dur = st.median(r["sys"][i][2] - r["sys"][i][1] for r in same) / 1e3
        print(f"{i:4d} {at:8.1f}  gap {gap:7.1f}  dur {dur:7.1f}  {names.get(nr, nr)}")
    end = st.median(r["exit"] - r["t0"] for r in same) / 1e3
    print(f"     {end:8.1f}  exit")


if __name__ == "__main__":
    main()
