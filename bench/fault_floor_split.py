#!/usr/bin/env python3
"""Splits the floor of following page faults (issue 28;
crates/fsprof-kernel/examples/fault_floor.rs) into its fixed part (the
programs' load, verification and attach, the maps and ring made, their
detach) and its part per fault (the programs' own run time, and the
kernel's dispatch to them), on the 256 MiB mmap scan of
bench/trace_mmap.py, in interleaved rounds, medians:

- `bare`: the scan alone;
- `none`: fault_floor with nothing attached (its own exec and spawn);
- `idle`: every program attached, nothing followed (the programs run on
  each fault and stop at their filter);
- `full`: the floor, as `trace_mmap.py --floor` times it;
- `stats`: the floor with the kernel's BPF run-time statistics on (each
  program's runs and summed ns), its programs detached before it exits,
  timed (`detach`); the clock reads the statistics add, and a process
  that detaches before its exit ending later, are in its wall time, so it
  is not one of the others.

`apart`: the floor with the raw tracepoint programs loaded one by one
(test knob FSPROF_TEST_RAW_APART), as before they shared one program.
With --other PATH another build of fault_floor runs `full` in the same
rounds (`other`). Every variant waits --gap s first (a trace attaching
within an RCU grace period of the last one's detach waits for it).

usage: sudo python3 bench/fault_floor_split.py --floor target/release/examples/fault_floor [--other OLD] [--rounds N] [--fifo] [--cmd "PROG ARGS"]
"""
import argparse
import os
import statistics as st
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_one(cmd, env, fifo):
    pre = ["chrt", "-f", "50"] if fifo else []
    time.sleep(ARGS.gap)
    t = time.perf_counter()
    p = subprocess.run(pre + cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({p.returncode}): {p.stderr.strip()}")
    stages = {}
    for line in p.stderr.splitlines():
        if line.startswith("split "):
            for kv in line.split()[1:]:
                k, v = kv.split("=", 1)
                if k == "prog":
                    name, runs, ns = v.rsplit(":", 2)
                    name = name.split("_", 1)[-1]
                    stages.setdefault("progs", {})[name] = (int(runs), int(ns))
                else:
                    stages[k] = float(v)
    return wall * 1e6, stages


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--floor", default=os.path.join(ROOT, "target/release/examples/fault_floor"))
    ap.add_argument("--other", help="another build of fault_floor, its `full` in the same rounds")
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--gap", type=float, default=0.1)
    ap.add_argument("--fifo", action="store_true")
    ap.add_argument("--cmd", help="the program to run (default: the 256 MiB mmap scan)")
    ARGS = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        if ARGS.cmd:
            cmd = ARGS.cmd.split()
        else:
            exe = os.path.join(d, "mmap_scan")
            subprocess.run(["cc", "-O2", "-o", exe, os.path.join(ROOT, "bench", "mmap_scan.c")], check=True)
            data = os.path.join(d, "scan.bin")
            with open(data, "wb") as f:
                chunk = os.urandom(1 << 20)
                for _ in range(256):
                    f.write(chunk)
            cmd = [exe, data]
        env = dict(os.environ)
        variants = {"bare": (cmd, env)}
        for mode in ("none", "idle", "full", "stats"):
            variants[mode] = ([ARGS.floor] + cmd, dict(env, FSPROF_FLOOR_SPLIT=mode))
        variants["apart"] = ([ARGS.floor] + cmd, dict(env, FSPROF_FLOOR_SPLIT="full", FSPROF_TEST_RAW_APART="1"))
        if ARGS.other:
            variants["other"] = ([ARGS.other] + cmd, env)
        print(f"# load before: {' '.join(open('/proc/loadavg').read().split()[:3])}; "
              f"{ARGS.rounds} rounds{', SCHED_FIFO' if ARGS.fifo else ''}; medians, us")
        for v in variants.values():
            run_one(v[0], v[1], ARGS.fifo)
        res = {k: [] for k in variants}
        for _ in range(ARGS.rounds):
            for k, (c, e) in variants.items():
                res[k].append(run_one(c, e, ARGS.fifo))
        bare = st.median(w for w, _ in res["bare"])
        print(f"{'variant':<8}{'wall':>9}{'x bare':>8}{'attach':>9}{'command':>9}{'drain':>8}{'detach':>8}{'faults':>8}")
        for k, rs in res.items():
            w = st.median(r[0] for r in rs)
            cells = []
            for key in ("attach", "command", "drain", "detach", "faults"):
                xs = [r[1][key] for r in rs if key in r[1]]
                cells.append(f"{st.median(xs):>9.0f}" if xs else f"{'-':>9}")
            print(f"{k:<8}{w:9.0f}{w / bare:8.3f}" + "".join(cells))
        med = {k: st.median(r[0] for r in rs) for k, rs in res.items()}
        cmdm = {k: st.median(r[1]["command"] for r in rs if "command" in r[1]) for k, rs in res.items() if k in ("none", "idle", "full", "stats", "apart")}
        print(f"the launcher (none - bare): {med['none'] - bare:+.0f}")
        print(f"fixed: idle - none: {med['idle'] - med['none']:+.0f} (wall); of which the command's own time "
              f"{cmdm['idle'] - cmdm['none']:+.0f} (programs stopping at their filter)")
        print(f"per fault: full - idle: {med['full'] - med['idle']:+.0f} (wall); the command's own time "
              f"{cmdm['full'] - cmdm['idle']:+.0f}")
        runs = {}
        for _, s in res["stats"]:
            for name, (n, ns) in s.get("progs", {}).items():
                runs.setdefault(name, []).append((n, ns))
        faults = st.median(s["faults"] for _, s in res["stats"] if "faults" in s)
        total = 0.0
        for name, xs in runs.items():
            n = st.median(x[0] for x in xs)
            ns = st.median(x[1] for x in xs)
            total += ns
            print(f"  program {name:<24} runs {n:8.0f}  {ns / 1e3:8.1f} us  ({ns / max(n, 1):6.0f} ns a run)")
        print(f"  programs' run time in all {total / 1e3:.1f} us, {total / max(faults, 1):.0f} ns per fault reported ({faults:.0f})")
        att = {k: st.median(r[1]["attach"] for r in rs) for k, rs in res.items() if k in ("full", "apart")}
        print(f"the attach, one program per raw tracepoint group (full) vs one per tracepoint (apart): "
              f"{att['full']:.0f} vs {att['apart']:.0f} us")
        if "other" in med:
            diff = [o[0] - f[0] for o, f in zip(res["other"], res["full"])]
            print(f"other minus this build's full, paired by round: {st.median(diff):+.0f} us")


if __name__ == "__main__":
    main()
