#!/usr/bin/env python3
"""Where a short process's time goes under each variant of
bench/per_process.py, stage by stage, from the kernel's tracepoints
(bpftrace; root). Every process image of the workload is cut at:

  fork      a forked child until its execve (the shell's redirections;
            the shim's set-up in the child when it makes a counted call)
  execve    the execve system call until the new image runs
  ld.so     the dynamic loader: from the exec to its first munmap (of
            ld.so.cache; every variant makes it, preloading or not)
  init      from there to the program's first getrandom (glibc's first
            malloc): the preloaded library's constructor, then the
            program's own start
  main      from there to exit_group
  exit      exit_group until the process is gone (unmapping, closing)
  reap      until the parent's wait4 returns it

and beside each stage its page faults (user and kernel); per image, its
CPU time (the thread's sum_exec_runtime as it exits: the
sched_stat_runtime events summed before missed a task's last stretch,
accounted after its exit record, which was most of a short process's time
and a varying part of a piped one's). fsprof's own CPU time is reported
per process image of the workload, and its start (its exec to the command's) and its
end of run (the command's exit to its own). Variants run in interleaved rounds; figures are
medians over the images of a kind (by the comm the image execs as) and
per-round sums per image.

Tracing costs ~1 us an event and a few events a stage: read the
differences between variants, not the absolute figures.

usage: python3 bench/process_stages.py [--rounds N] [--loop N] [--only loop,xargs]
                                       [--fsprof PATH] [--other PATH] [--fifo]
"""
import argparse
import collections
import os
import shutil
import signal
import statistics as st
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import per_process  # noqa: E402

ROOT_COMM = "pps-root"

SCRIPT = r"""
tracepoint:sched:sched_process_exec /comm == "ROOTCOMM"/ { @trk[pid] = 1; printf("R %d %llu\n", pid, nsecs); }
tracepoint:sched:sched_process_fork /@trk[args->parent_pid]/ {
  @trk[args->child_pid] = 1; @st[args->child_pid] = 0;
  printf("F %d %llu %d\n", args->parent_pid, nsecs, args->child_pid);
}
tracepoint:syscalls:sys_enter_execve /@trk[tid]/ { printf("V %d %llu\n", tid, nsecs); }
tracepoint:sched:sched_process_exec /@trk[tid]/ { @st[tid] = 1; printf("X %d %llu %s\n", tid, nsecs, comm); }
tracepoint:syscalls:sys_enter_munmap /@trk[tid] && @st[tid] == 1/ { @st[tid] = 2; printf("L %d %llu\n", tid, nsecs); }
tracepoint:syscalls:sys_enter_getrandom /@trk[tid] && @st[tid] == 2/ { @st[tid] = 3; printf("M %d %llu\n", tid, nsecs); }
tracepoint:syscalls:sys_enter_exit_group /@trk[tid]/ { @st[tid] = 4; printf("G %d %llu\n", tid, nsecs); }
tracepoint:exceptions:page_fault_user /@trk[tid]/ { @pf[tid, @st[tid]] = @pf[tid, @st[tid]] + 1; }
tracepoint:exceptions:page_fault_kernel /@trk[tid]/ { @pf[tid, @st[tid]] = @pf[tid, @st[tid]] + 1; }
tracepoint:syscalls:sys_exit_wait4 /@trk[tid] && args->ret > 0/ { printf("W %d %llu %d\n", tid, nsecs, args->ret); }
tracepoint:sched:sched_process_exit /@trk[args->pid]/ {
  $p = args->pid;
  printf("Q %d %llu %s %llu %d %d %d %d %d %d\n", $p, nsecs, comm, curtask->se.sum_exec_runtime, pid,
         @pf[$p, 0], @pf[$p, 1], @pf[$p, 2], @pf[$p, 3], @pf[$p, 4]);
  delete(@trk[$p]); delete(@st[$p]);
  delete(@pf[$p, 0]); delete(@pf[$p, 1]); delete(@pf[$p, 2]); delete(@pf[$p, 3]); delete(@pf[$p, 4]);
}
"""

STAGES = [("fork", "F", "V"), ("execve", "V", "X"), ("ld.so", "X", "L"), ("init", "L", "M"),
          ("main", "M", "G"), ("exit", "G", "Q"), ("reap", "Q", "W")]


def parse(path, roots):
    """{root pid: [image records]}, fsprof's CPU ns by root."""
    procs = {}
    root_of = {}
    images = collections.defaultdict(list)
    tool_cpu = collections.Counter()
    roots_seen = set()
    for line in open(path):
        p = line.split()
        if len(p) < 3 or p[0] not in "RFVXLMGWQ" or len(p[0]) != 1:
            continue
        kind, pid, t = p[0], int(p[1]), int(p[2])
        if kind == "R":
            root_of[pid] = pid
            procs[pid] = {"F": t}
            roots_seen.add(pid)
        elif kind == "F":
            child = int(p[3])
            root_of[child] = root_of.get(pid)
            procs[child] = {"F": t, "parent": pid}
            if pid in roots_seen and "cmd" not in procs[pid]:
                procs[pid]["cmd"] = child
        elif kind == "X":
            r = procs.get(pid)
            if r is None:
                continue
            if "X" in r:  # a second exec of the same pid: a new image
                images[root_of.get(pid)].append(r)
                r = procs[pid] = {"parent": r.get("parent")}
            r["X"], r["comm"] = t, p[3]
        elif kind == "W":
            child = int(p[3])
            r = procs.get(child)
            if r is not None and "Q" in r:
                r["W"] = t
        elif kind == "Q":
            r = procs.get(pid)
            if r is None:
                continue
            r["Q"] = t
            r["cpu"] = int(p[4])
            r["tgid"] = int(p[5])
            r["pf"] = [int(x) for x in p[6:11]]
            r.setdefault("comm", p[3])
            if r["comm"].startswith("fsprof") or p[3].startswith("fsprof"):
                tool_cpu[root_of.get(pid)] += int(p[4])
        else:
            r = procs.get(pid)
            if r is not None:
                r.setdefault(kind, t)
    for pid, r in procs.items():
        if "Q" in r and r.get("tgid", pid) == pid:
            images[root_of.get(pid)].append(r)
    # Per root: (the command's exec - the tool's exec, the root's exit -
    # the command's exit): the tool's start-up and its end of run.
    ends = {}
    for pid in roots_seen:
        r = procs.get(pid, {})
        c = procs.get(r.get("cmd"), {})
        if "X" in r and "X" in c and "Q" in c and "Q" in r:
            ends[pid] = ((c["X"] - r["X"]) / 1e3, (r["Q"] - c["Q"]) / 1e3)
    return images, tool_cpu, ends


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--loop", type=int, default=300)
    ap.add_argument("--only", default="loop,xargs")
    ap.add_argument("--fsprof", default=os.path.join(per_process.ROOT, "target/release/fsprof"))
    ap.add_argument("--other")
    ap.add_argument("--fifo", action="store_true")
    a = ap.parse_args()
    if not shutil.which("bpftrace"):
        sys.exit("needs bpftrace (and root)")
    tmp = tempfile.mkdtemp(prefix="fsprof-stages-")
    bt = None
    try:
        root = os.path.join(tmp, ROOT_COMM)
        shutil.copy(shutil.which("env"), root)
        with open(os.path.join(tmp, "empty.c"), "w") as f:
            f.write("void fsprof_bench_empty(void) {}\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", os.path.join(tmp, "empty.so"),
                        os.path.join(tmp, "empty.c")], check=True)
        va = argparse.Namespace(fsprof=a.fsprof, other=a.other, no_trace=True, calls_only=False,
                                swap_shim=False, strace=False)
        out = os.path.join(tmp, "bt.out")
        bt = subprocess.Popen(["bpftrace", "-B", "full", "-e", SCRIPT.replace("ROOTCOMM", ROOT_COMM)],
                              stdout=open(out, "w"), stderr=subprocess.STDOUT)
        for _ in range(300):
            time.sleep(0.1)
            if "Attaching" in open(out).read(4096):
                break
        time.sleep(1)
        names = {}
        order = []
        for name in a.only.split(","):
            shell = per_process.workloads(a.loop)[name]
            vs = per_process.variants(va, tmp, shell)
            for _ in range(a.rounds):
                for k, (argv, env) in vs.items():
                    e = dict(os.environ)
                    e.update(env)
                    pre = ["chrt", "-f", "50"] if a.fifo else []
                    p = subprocess.Popen(pre + [root] + argv, env=e, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
                    p.wait()
                    names[p.pid] = (name, k)
                    order.append(p.pid)
        time.sleep(1)
        bt.send_signal(signal.SIGINT)
        bt.wait(timeout=60)
        bt = None
        lost = [line.strip() for line in open(out) if "Lost" in line]
        if lost:
            print(f"# bpftrace: {len(lost)} lines of lost events, e.g. {lost[0]}")
        images, tool_cpu, ends = parse(out, names)
        report(a, names, images, tool_cpu, ends)
    finally:
        if bt is not None:
            bt.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def dur(r, a, b):
    return (r[b] - r[a]) / 1e3 if a in r and b in r else None


def report(a, names, images, tool_cpu, ends):
    load = open("/proc/loadavg").read().split()[:3]
    print(f"# {a.rounds} interleaved rounds; load after {' '.join(load)}{', SCHED_FIFO' if a.fifo else ''}")
    by = collections.defaultdict(list)  # (workload, variant) -> [(images, tool cpu)]
    for pid, key in names.items():
        by[key].append((images.get(pid, []), tool_cpu.get(pid, 0)))
    for wl in dict.fromkeys(k[0] for k in by):
        variants = [k[1] for k in by if k[0] == wl]
        print(f"\n## {wl}")
        # Per round: the sum of each stage over the round's images, per image.
        print("# sum of each stage over the images, per image (us; median over rounds), "
              "page faults per image")
        print(f"{'variant':<22} {'images':>6} " + " ".join(f"{s:>12}" for s, _, _ in STAGES)
              + f" {'fsprof cpu':>10}")
        for v in variants:
            rows = []
            for imgs, cpu in by[(wl, v)]:
                n = max(1, len(imgs))
                sums = []
                for i, (s, b0, b1) in enumerate(STAGES):
                    ds = [dur(r, b0, b1) for r in imgs]
                    tot = sum(d for d in ds if d is not None)
                    pf = sum(r.get("pf", [0] * 5)[max(0, min(4, i - 1))] for r in imgs if dur(r, b0, b1) is not None) \
                        if s in ("fork", "ld.so", "init", "main", "exit") else 0
                    sums.append((tot / n, pf / n))
                rows.append((len(imgs), sums, cpu / 1e3 / n))
            nimg = st.median(r[0] for r in rows)
            cells = []
            for i in range(len(STAGES)):
                t = st.median(r[1][i][0] for r in rows)
                f = st.median(r[1][i][1] for r in rows)
                cells.append(f"{t:7.1f}/{f:4.1f}" if f else f"{t:7.1f}     ")
            print(f"{v:<22} {nimg:6.0f} " + " ".join(cells) + f" {st.median(r[2] for r in rows):10.1f}")
        print("# fsprof's start (its exec to the command's exec) and end (the command's "
              "exit to its own), us, medians")
        for v in variants:
            es = [ends[pid] for pid, key in names.items() if key == (wl, v) and pid in ends]
            if es and v.startswith("fsprof"):
                print(f"{v:<22} start {st.median(e[0] for e in es):9.1f}  end {st.median(e[1] for e in es):9.1f}")
        comms = collections.Counter(r.get("comm") for imgs, _ in by[(wl, variants[0])] for r in imgs)
        for comm, _ in comms.most_common(6):
            print(f"# images that exec'd as {comm}: medians per image (us)")
            print(f"{'variant':<22} " + " ".join(f"{s:>8}" for s, _, _ in STAGES) + f" {'cpu':>8}")
            for v in variants:
                imgs = [r for ims, _ in by[(wl, v)] for r in ims if r.get("comm") == comm]
                cells = []
                for s, b0, b1 in STAGES:
                    ds = [d for d in (dur(r, b0, b1) for r in imgs) if d is not None]
                    cells.append(f"{st.median(ds):8.1f}" if ds else f"{'-':>8}")
                cpu = [r["cpu"] / 1e3 for r in imgs if "cpu" in r]
                print(f"{v:<22} " + " ".join(cells) + f" {st.median(cpu) if cpu else 0:8.1f}")


if __name__ == "__main__":
    main()
