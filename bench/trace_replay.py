#!/usr/bin/env python3
"""Trace capture and replay, measured against baselines in the same run
(repeated, medians, ratios).

1. Replay rate (Replayfs 4.4): a cached 1 KiB pread loop in 2 threads.
   Original program rate vs `fsprof replay --afap` of its trace, and fio
   replaying the equivalent iologs (one per thread, read_iolog).
2. Timing accuracy at original speed on a real bursty trace (gcc compiling
   C files with pauses between them): issue-time error median, p99, max,
   CDF, and the trace's compiled size vs its raw size.
3. Capture overhead: `grep -r` of bench/user_overhead.py, bare vs
   `fsprof trace --data digest` vs `strace -f -o /dev/null`; and how long
   `fsprof trace` runs on after grep has exited (its end of run).
5. The replayer's per-command cost (issue 27): a traced
   `tar -cf out.tar /usr/include/linux` replayed at original speed,
   rounds interleaved with `--baseline`'s replay of the same file when
   given: issue-time error (median, p90, p99), the share of the summed
   error the report blames on "behind" (the replayer's per-command cost),
   the replay threads' CPU per command (calls included), the replayer's
   own time between calls due back to back, where the CPU per command
   went (the sleeps' CPU, measured around them; the wall time per command
   of the calls, of the replayer's own work and of the pre-spin before a
   command's time), and the fidelity table's EMD
   per op (trace vs replay latencies); also `--afap` (the CPU per command
   without a paced replay's spinning). The tar runs once untraced before
   it is traced (a warm cache), and is traced again in every round: the
   EMD of those traces from the first is the fidelity table's floor (the
   program against itself), and each replay's EMD from its round's new
   trace says whether the replay differs from the program more than the
   program does from one run to the next. An op of a few dozen calls
   (fdopendir, closedir: 29) differs from a second run of itself by about
   0.3-0.4 by chance alone; the replay's own sampling-noise line says how
   much for each op, and the pooled lines compare all rounds' replays with
   all traces at once (compare's EMD of the merged sides, the table's
   measure, and its shift test against the spread between runs), with the traces split in halves and
   two random samples of one run's calls as their floors. Two more
   floors: the CPU per command of the same calls made back to back by a
   C loop through glibc (bench/replay_floor.c, on the replay's root, in
   every round), beside which the replayer's CPU per command is printed
   as a ratio; and the issue-time error of the trace "replayed" with
   each call taking what it took in the round's new trace by a replayer
   of no cost whose wake-ups are all on time (the program against
   itself): a faithful replay's calls vary from run to run as the
   program's do, and each one slower than traced delays every call queued
   behind it until the program's own time between calls has absorbed it.
   The machine's floor under the issue-time error, in the same rounds:
   the replay by the build under test with --dry-timing (no calls; each
   command spins for its traced duration: the schedule, the replayer's
   timing and this machine without the calls' variation), and a meter of
   the time the machine takes from a thread spinning as long as the trace
   lasts (bench/hiccup.c) with the traced schedule played against it (no
   replayer at all). Then the errors pooled over the rounds (the rounds'
   CDFs averaged: p99 and the shares late by more than 10 us, 100 us,
   1 ms, with intervals from resampling the rounds), and rows compared
   round by round: the median of the paired rounds' differences with its
   sign-test interval, "resolved" when it leaves out 0 (a median p99 over
   7-11 rounds does not tell one build from another on this VM: the same
   build against a copy of itself read 106 and 887 us). --slowed NS adds
   the build under test spinning NS ns after each call: checked with
   --baseline a copy of the binary (must read "not resolved") and
   --slowed 1000 (must read "resolved").
4. Per-call cost of recording: bench/percall.c's loop of cached calls,
   bare vs `fsprof run` vs `fsprof trace --data digest`: the program's own
   ns per call (wall time, from inside the loop) and the CPU time per call
   of the whole command (the program, and fsprof turning records into the
   trace), from the children's rusage.

usage: bench/trace_replay.py [--fsprof PATH] [--baseline PATH] [--rounds N] [--n N] [--parts 1,2,3,4,5] [--skip-overhead] [--no-rt] [--slowed NS] [--keep] [--self-test]

As root, part 1 also runs both sides under SCHED_FIFO (chrt -f 10) and
part 2 the replays with `--realtime` (the replay threads under
SCHED_FIFO), interleaved, to show how much of a figure the machine's load
accounts for.
"""
import argparse
import bisect
import collections
import json
import math
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

from interleave import interleaved

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATTERN = "fsprof_bench_pattern_that_is_not_there"


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def fsprof(args, tmp):
    return run([ARGS.fsprof] + args, cwd=tmp)


REPLAYS = 0


def timing(tmp, replay, root, extra, wrap=(), binary=None):
    if os.path.exists(root):
        shutil.rmtree(root)
    os.mkdir(root)
    # Each replay's own timing report and profile (kept with --keep, to
    # read its histograms beside the trace's: `fsprof compare tar.json
    # replay-N.json`).
    global REPLAYS
    REPLAYS += 1
    tfile = os.path.join(tmp, f"timing-{REPLAYS}.json")
    profile = os.path.join(tmp, f"replay-{REPLAYS}.json")
    # Exit 1 only says results differed from the trace: the mismatches are
    # in the report; anything else is an error.
    p = subprocess.run(list(wrap) + [binary or ARGS.fsprof, "replay", replay, "--root", root, "--prepare", "--timing", tfile, "-f", "-o", profile] + extra,
                       cwd=tmp, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise subprocess.CalledProcessError(p.returncode, p.args, p.stdout, p.stderr)
    with open(tfile) as f:
        t = json.load(f)
    t["profile"] = profile
    return t if binary else t["timing"]


def pread_rates(tmp):
    exe = os.path.join(tmp, "pread2")
    run(["cc", "-O2", "-pthread", "-o", exe, os.path.join(ROOT, "bench/pread2.c")])
    data = os.path.join(tmp, "data")
    with open(data, "wb") as f:
        f.write(os.urandom(1 << 20))
    n = str(ARGS.n)
    trace = os.path.join(tmp, "p.trace")
    fsprof(["trace", "--data", "none", "-f", "-o", trace, "--", exe, data, n], tmp)
    replay = os.path.join(tmp, "p.replay")
    comp = fsprof(["compile", trace, "-o", replay, "-f"], tmp).stderr
    # fio: the same reads, one iolog per thread.
    logs = []
    for t, base in enumerate([0, 512]):
        path = os.path.join(tmp, f"fio{t}.log")
        with open(path, "w") as f:
            f.write(f"fio version 2 iolog\n{data} add\n{data} open\n")
            for i in range(ARGS.n):
                f.write(f"{data} read {((base + i) % 1024) * 1024} 1024\n")
            f.write(f"{data} close\n")
        logs.append(path)
    orig, rep, fio = [], [], []
    # CPU time per call (user + system): the cost of each side whatever the
    # machine's load, next to the wall-clock rates the target is about.
    orig_cpu, rep_cpu = [], []
    # Both sides again under SCHED_FIFO (root only): what is left when the
    # other processes on the machine cannot take the CPUs away.
    rt = os.geteuid() == 0 and shutil.which("chrt") and not ARGS.no_rt
    rt_orig, rt_rep = [], []
    root = os.path.join(tmp, "root")
    for _ in range(ARGS.rounds):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        orig.append(float(run([exe, data, n]).stdout))
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        orig_cpu.append(cpu * 1e9 / (2 * ARGS.n))
        t = timing(tmp, replay, root, ["--afap", "--verify", "off"])
        rep.append(t["issued"] / (t["elapsed_ns"] / 1e9))
        if "cpu_ns" in t:
            rep_cpu.append(t["cpu_ns"] / t["issued"])
        if shutil.which("fio"):
            cmd = ["fio", "--output-format=json", "--ioengine=psync"]
            for t_, log in enumerate(logs):
                cmd += [f"--name=t{t_}", f"--read_iolog={log}", "--replay_no_stall=1"]
            out = json.loads(run(cmd, cwd=tmp).stdout)
            ios = sum(j["read"]["total_ios"] for j in out["jobs"])
            secs = max(j["job_runtime"] for j in out["jobs"]) / 1e3
            fio.append(ios / secs)
        if rt:
            rt_orig.append(float(run(["chrt", "-f", "10", exe, data, n]).stdout))
            t = timing(tmp, replay, root, ["--afap", "--verify", "off"], wrap=["chrt", "-f", "10"])
            rt_rep.append(t["issued"] / (t["elapsed_ns"] / 1e9))
    o, r = statistics.median(orig), statistics.median(rep)
    print(f"# 1. cached 1 KiB pread loop, 2 threads x {ARGS.n} calls, {ARGS.rounds} interleaved rounds, medians")
    print(f"original program      {o:12.0f} calls/s")
    print(f"fsprof replay --afap  {r:12.0f} calls/s   ratio {r / o:.3f} (min..max {min(rep) / o:.3f}..{max(rep) / o:.3f})")
    if fio:
        f_ = statistics.median(fio)
        print(f"fio read_iolog        {f_:12.0f} calls/s   ratio {f_ / o:.3f}")
    if rep_cpu:
        oc, rc = statistics.median(orig_cpu), statistics.median(rep_cpu)
        print(f"CPU per call: original {oc:.0f} ns, replay threads {rc:.0f} ns, ratio {oc / rc:.3f} (higher is a cheaper replay)")
    if rt_orig:
        ro, rr = statistics.median(rt_orig), statistics.median(rt_rep)
        ratios = [b / a for a, b in zip(rt_orig, rt_rep)]
        print(f"under SCHED_FIFO (chrt -f 10), both sides: original {ro:.0f} calls/s, replay {rr:.0f} calls/s, "
              f"ratio {rr / ro:.3f} (per round {min(ratios):.3f}..{max(ratios):.3f})")
    print(f"load average: {os.getloadavg()[0]:.1f}")
    print("compile:", " ".join(comp.split()))


def report_errors(runs):
    med = lambda k: statistics.median(t["error"][k] for t in runs)
    print(f"issue-time error: median {med('median_ns') / 1e3:.1f} us, p90 {med('p90_ns') / 1e3:.1f} us, "
          f"p99 {med('p99_ns') / 1e3:.1f} us, max {med('max_ns') / 1e3:.1f} us")
    print(f"elapsed {statistics.median(t['elapsed_ns'] for t in runs) / 1e9:.3f} s vs traced {runs[0]['traced_ns'] / 1e9:.3f} s; "
          f"mismatches {[t['mismatches'] for t in runs]}")
    if "error_without_machine" in runs[0]:
        mo = lambda k: statistics.median(t["error_without_machine"][k] for t in runs)
        print(f"issue-time error less the machine's parts (stalls, late wake-ups): median {mo('median_ns') / 1e3:.1f} us, "
              f"p99 {mo('p99_ns') / 1e3:.1f} us, max {mo('max_ns') / 1e3:.1f} us")
        parts = ["behind_ns", "stalled_ns", "constraint_ns", "wakeup_ns"]
        tot = [sum(t["error_parts"][p] for p in parts) or 1 for t in runs]
        share = {p: statistics.median(t["error_parts"][p] / s for t, s in zip(runs, tot)) for p in parts}
        print("error by cause (share of the summed error, median): " + ", ".join(f"{p[:-3]} {share[p] * 100:.1f}%" for p in parts))
        print(f"replay threads preempted (median): {statistics.median(t['preemptions'] for t in runs):.0f} times")
    for k, over in enumerate(runs[0].get("late", [])):
        mk = lambda f: statistics.median(t["late"][k].get(f, 0) for t in runs)
        print(f"late by more than {over['over_ns'] / 1e3:g} us, by main cause: {mk('behind'):.0f} behind (replayer could not keep up), "
              f"{mk('stalled'):.0f} stalled, {mk('constraint'):.0f} waiting for another thread, {mk('wakeup'):.0f} woke or ran late (scheduling)")
    cdf = runs[len(runs) // 2]["cdf"]
    print("CDF (one replay): " + ", ".join(f"<={ns / 1e3:g}us {frac * 100:.1f}%" for ns, frac in cdf))


def bursty(tmp):
    src = os.path.join(ROOT, "crates/fsprof-shim/shim")
    script = ";".join(
        f"cc -O1 -c -I{src} -o {tmp}/o{i}.o {src}/{f}; sleep 0.2"
        for i, f in enumerate(["runtime.c", "trace.c", "runtime.c", "trace.c"])
    )
    trace = os.path.join(tmp, "cc.trace")
    fsprof(["trace", "-f", "-o", trace, "--", "sh", "-c", script], tmp)
    replay = os.path.join(tmp, "cc.replay")
    comp = fsprof(["compile", trace, "-o", replay, "-f"], tmp).stderr
    root = os.path.join(tmp, "ccroot")
    # The same replay with `--realtime` (its threads under SCHED_FIFO; root
    # only), interleaved: the scheduler's share of the error on a loaded
    # machine, measured.
    rt = os.geteuid() == 0 and not ARGS.no_rt
    runs, rt_runs = [], []
    for _ in range(ARGS.rounds):
        runs.append(timing(tmp, replay, root, ["--verify", "warn"]))
        if rt:
            rt_runs.append(timing(tmp, replay, root, ["--verify", "warn", "--realtime"]))
    print(f"\n# 2. timing at original speed: a gcc trace ({runs[0]['commands']} commands), {ARGS.rounds} replays, "
          f"medians of each figure, load {os.getloadavg()[0]:.1f}")
    report_errors(runs)
    if rt_runs:
        print("## the same replays with --realtime (replay threads under SCHED_FIFO), interleaved with the above")
        report_errors(rt_runs)
    print(f"load average: {os.getloadavg()[0]:.1f}")
    print("compile:", " ".join(comp.split()))


def overhead(tmp):
    grep = [shutil.which("grep"), "-r", PATTERN, "/usr/include"]
    variants = {
        "bare": grep,
        "fsprof trace": [ARGS.fsprof, "trace", "-f", "--data", "digest", "-o", os.path.join(tmp, "g.trace"), "--"] + grep,
        "fsprof run": [ARGS.fsprof, "run", "-q", "-f", "-o", os.path.join(tmp, "g.json"), "--"] + grep,
    }
    if ARGS.baseline:
        variants["baseline trace"] = [ARGS.baseline, "trace", "-f", "--data", "digest", "-o", os.path.join(tmp, "b.trace"), "--"] + grep
    times = interleaved(variants, ARGS.rounds, warm=2)
    # strace -f runs 60x longer and leaves the next command slow (bare grep
    # measured right after it took 0.13 s against 0.07 s at idle), so it is
    # measured on its own after the interleaved rounds.
    if shutil.which("strace"):
        times.update(interleaved({"strace -f": ["strace", "-f", "-o", "/dev/null"] + grep}, ARGS.rounds))
    bare = statistics.median(times["bare"])
    print(f"\n# 3. capture overhead: grep -r {PATTERN} /usr/include, warm cache, {ARGS.rounds} interleaved rounds, medians")
    for k, ts in times.items():
        m = statistics.median(ts)
        print(f"{k:<14} {m:8.4f} s  ratio {m / bare:7.3f}  (min..max {min(ts) / bare:.3f}..{max(ts) / bare:.3f})")
    if shutil.which("strace"):
        end_of_run(grep, tmp)


def end_of_run(grep, tmp):
    """How long `fsprof trace` runs on after grep exits (harvesting the last
    records, writing the trace and the profile): grep's exit_group to
    fsprof's, timed by strace stopping at those two system calls only
    (--seccomp-bpf), so the rest runs untraced."""
    bins = {"fsprof trace": ARGS.fsprof}
    if ARGS.baseline:
        bins["baseline trace"] = ARGS.baseline
    log = os.path.join(tmp, "exit.log")
    ends = {k: [] for k in bins}
    for _ in range(ARGS.rounds):
        for k, b in bins.items():
            # grep finds nothing: exit status 1.
            subprocess.run(["strace", "-f", "--seccomp-bpf", "-ttt", "-e", "trace=exit_group", "-o", log, b, "trace",
                            "-f", "--data", "digest", "-o", os.path.join(tmp, "e.trace"), "--"] + grep,
                           capture_output=True)
            with open(log) as f:
                ts = [float(l.split()[1]) for l in f if "exit_group" in l]
            ends[k].append((ts[-1] - ts[0]) * 1e3)
    for k, v in ends.items():
        print(f"end of run, {k}: grep's exit to fsprof's {statistics.median(v):.1f} ms (min..max {min(v):.1f}..{max(v):.1f})")


def cpu_run(cmd):
    """(stdout, CPU seconds of the command and all its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = run(cmd).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out, cpu


def percall(tmp):
    exe = os.path.join(tmp, "percall")
    run(["cc", "-O2", "-o", exe, os.path.join(ROOT, "bench/percall.c")])
    n = 1_000_000
    variants = {
        "bare": [],
        "fsprof run": [ARGS.fsprof, "run", "-q", "-f", "-o", os.path.join(tmp, "pc.json"), "--"],
        "fsprof trace": [ARGS.fsprof, "trace", "-f", "--data", "digest", "-o", os.path.join(tmp, "pc.trace"), "--"],
    }
    print(f"\n# 4. per call: a loop of {n} cached calls, {ARGS.rounds} interleaved rounds, medians")
    print(f"{'call':<6} {'variant':<13} {'in-loop ns':>10} {'CPU ns/call':>12} {'CPU added':>10}")
    for call in ["pread", "fstat"]:
        wall_ns = {k: [] for k in variants}
        cpu_ns = {k: [] for k in variants}
        for _ in range(ARGS.rounds):
            for k, pre in variants.items():
                out, cpu = cpu_run(pre + [exe, call, str(n)])
                wall_ns[k].append(float(out))
                cpu_ns[k].append(cpu * 1e9 / n)
        base = statistics.median(cpu_ns["bare"])
        for k in variants:
            c = statistics.median(cpu_ns[k])
            print(f"{call:<6} {k:<13} {statistics.median(wall_ns[k]):10.1f} {c:12.1f} {c - base:10.1f}")


def tar_replay(tmp):
    trace = os.path.join(tmp, "tar.trace")
    work = os.path.join(tmp, "tarwork")
    os.makedirs(work, exist_ok=True)
    # Once untraced first, so that the trace is of a warm cache (this VM
    # pages the cache out within a minute of idling): its reads and stats
    # are then cached calls, as the replay's are, rather than the device's.
    run(["tar", "-cf", "out.tar", "/usr/include/linux"], cwd=work)
    fsprof(["trace", "-f", "--data", "digest", "-o", trace, "--", "tar", "-cf", "out.tar", "/usr/include/linux"], work)
    replay = os.path.join(tmp, "tar.replay")
    comp = fsprof(["compile", trace, "-o", replay, "-f"], tmp).stderr
    bins = {"fsprof": (ARGS.fsprof, [])}
    if ARGS.baseline:
        bins = {"baseline": (ARGS.baseline, []), "fsprof": (ARGS.fsprof, [])}
    # As root, each binary also under --realtime (its replay threads under
    # SCHED_FIFO): what is left of the error when other processes cannot
    # take the CPU away, on a machine that is not idle.
    modes = {"": []}
    if os.geteuid() == 0 and not ARGS.no_rt:
        modes[" rt"] = ["--realtime"]
    paced = dict(modes)
    # As fast as possible: the CPU per command without the spinning of a
    # paced replay (the replayer's cost and the calls', nothing else).
    modes[" afap"] = ["--afap"]
    bin_modes = {k: modes for k in bins}
    # The floor: the same replay by the build under test making no calls,
    # each command spinning for its traced duration instead (--dry-timing):
    # the schedule, the replayer's timing and this machine, without the
    # calls' variation from the trace.
    bins["dry"] = (ARGS.fsprof, ["--dry-timing"])
    bin_modes["dry"] = paced
    # A deliberately slower replayer (the check that the pooled figure
    # resolves one): the build under test spinning --slowed ns after each
    # call.
    if ARGS.slowed:
        bins["slowed"] = (ARGS.fsprof, ["--added-ns", str(ARGS.slowed)])
        bin_modes["slowed"] = paced
    runs = {k + m: [] for k in bins for m in bin_modes[k]}
    hiccup_exe = os.path.join(tmp, "hiccup")
    run(["cc", "-O2", "-o", hiccup_exe, os.path.join(ROOT, "bench/hiccup.c")])
    meters = {"hiccups" + m: [] for m in paced}
    root = os.path.join(tmp, "tarroot")
    loads = []
    # The floor of the fidelity table: the same tar traced again in each
    # round, its profile compared with the replayed trace's as the replay's
    # is (`compare`, EMD per op). No replay can be expected closer to the
    # trace than the program itself comes to it from one run to the next.
    # And each replay against that round's new trace: whether a replay
    # differs from the program more than the program from itself.
    again, vs_again = [], {k: [] for k in runs}
    first = os.path.join(tmp, "tar.json")
    traces = [first]
    # The floor of the CPU per command: the same calls from a C loop, on
    # the root the round's last replay left (its files in the cache as a
    # replay's are), in every round.
    floor_exe = os.path.join(tmp, "replay_floor")
    run(["cc", "-O2", "-o", floor_exe, os.path.join(ROOT, "bench/replay_floor.c")])
    floors, floor_calls_n, calls = [], 0, None
    selfs, first_calls = [], None
    for r in range(ARGS.rounds):
        # The binaries take turns at going first: the first replay of a
        # round meets the cache and the CPU as the retrace left them.
        order = list(bins.items())
        if r % 2:
            order.reverse()
        for k, (b, own) in order:
            for m, extra in bin_modes[k].items():
                runs[k + m].append(timing(tmp, replay, root, ["--verify", "warn"] + own + extra, binary=b))
        first_calls = first_calls or trace_calls(trace)
        span = first_calls[-1]["start_ns"] - first_calls[0]["start_ns"]
        for m in paced:
            gaps = hiccups(hiccup_exe, span + 5_000_000, ["chrt", "-f", "10"] if m else [])
            meters["hiccups" + m].append((gaps, against_hiccups(first_calls, gaps)))
        calls = calls or floor_calls(trace_calls(trace), root)
        f, floor_calls_n = floor_cpu(floor_exe, calls, root)
        floors.append(f)
        prof = retrace(tmp, work, r)
        traces.append(prof)
        e = itself(first_calls, trace_calls(prof[:-len(".json")] + ".trace"))
        if e:
            selfs.append([e[len(e) * q // 100] for q in (50, 90, 99)])
        again.append(compare_emd(first, prof))
        for k in runs:
            vs_again[k].append(compare_emd(prof, runs[k][-1]["profile"]))
        loads.append(os.getloadavg()[0])
    first = runs["fsprof"][0]["timing"]
    print(f"\n# 5. tar -cf out.tar /usr/include/linux replayed at original speed ({first['commands']} commands, "
          f"traced {first['traced_ns'] / 1e6:.0f} ms), {ARGS.rounds} interleaved rounds, medians; "
          f"load {min(loads):.1f}-{max(loads):.1f}")
    # slower_ns: calls that ran longer than traced by < 50 us each, which
    # builds before it counted as "behind".
    parts = ["behind_ns", "slower_ns", "stalled_ns", "constraint_ns", "wakeup_ns"]
    floor_us = statistics.median(floors) / 1e3
    print(f"{'floor':<12} the same calls made back to back by a C loop through glibc (bench/replay_floor.c, {floor_calls_n} calls, "
          f"no pacing, timing or recording): CPU per command median {floor_us:.2f} us (rounds {min(floors) / 1e3:.2f}..{max(floors) / 1e3:.2f})")
    for k, rs in runs.items():
        ts = [r["timing"] for r in rs]
        med = lambda f: statistics.median(f(t) for t in ts)
        share = lambda p: med(lambda t: t["error_parts"].get(p, 0) / (sum(t["error_parts"].get(q, 0) for q in parts) or 1))
        between = ""
        if "between_calls" in ts[0]:
            between = (f"; the replayer's own time between calls due back to back: median "
                       f"{med(lambda t: t['between_calls']['median_ns']) / 1e3:.2f} us, p99 {med(lambda t: t['between_calls']['p99_ns']) / 1e3:.2f} us")
        print(f"{k:<12} error median {med(lambda t: t['error']['median_ns']) / 1e3:6.1f} us, p90 {med(lambda t: t['error']['p90_ns']) / 1e3:6.1f} us, "
              f"p99 {med(lambda t: t['error']['p99_ns']) / 1e3:6.1f} us (rounds {min(t['error']['p99_ns'] for t in ts) / 1e3:.1f}..{max(t['error']['p99_ns'] for t in ts) / 1e3:.1f}); behind {share('behind_ns') * 100:4.1f}%, slower calls {share('slower_ns') * 100:4.1f}%, "
              f"stalled {share('stalled_ns') * 100:4.1f}%, woke late {share('wakeup_ns') * 100:4.1f}%; CPU per command {med(lambda t: t['cpu_ns'] / t['issued']) / 1e3:.2f} us (min {min(t['cpu_ns'] / t['issued'] for t in ts) / 1e3:.2f}); "
              f"preempted {med(lambda t: t['preemptions']):.0f}; mismatches {[t['mismatches'] for t in ts]}{between}")
        if k.startswith("dry"):
            # No calls: the rest (calls' CPU, excesses, fidelity) is the
            # trace's own by construction.
            print(f"{'':<12} the floor: the same replay by {os.path.basename(ARGS.fsprof)} with --dry-timing (no calls; each command spins for its traced duration)")
            continue
        print(f"{'':<12} CPU per command over the calls' floor (the same calls from a C loop, median {floor_us:.2f} us): "
              f"{med(lambda t: t['cpu_ns'] / t['issued']) / 1e3 / floor_us:.2f}x")
        if "time_split" in ts[0]:
            print(f"{'':<12} " + cpu_split(ts))
        if "largest_excesses" in ts[0]:
            # What makes the p99 (each delays the calls queued behind it),
            # in the round whose p99 is the median.
            mid = sorted(ts, key=lambda t: t["error"]["p99_ns"])[len(ts) // 2]
            print(f"{'':<12} the calls that ran longest beyond their traced time, in the round of the median p99: " + "; ".join(
                f"{e['op']} #{e['command']} {e['traced_ns'] / 1e3:.1f} -> {e['replayed_ns'] / 1e3:.1f} us" for e in mid["largest_excesses"]))
        ops = sorted({f["op"] for r in rs for f in r["fidelity"] if f["score"] is not None})
        emd = {op: statistics.median(f["score"] for r in rs for f in r["fidelity"] if f["op"] == op and f["score"] is not None) for op in ops}
        print(f"{'':<12} fidelity EMD (trace vs replay), median: " + ", ".join(f"{op} {v:.2f}" for op, v in emd.items()))
        noise = {op: [f["noise"] for r in rs for f in r["fidelity"] if f["op"] == op and f.get("noise") is not None] for op in ops}
        if any(noise.values()):
            print(f"{'':<12} the same comparison's sampling noise (the EMD chance alone gives these counts of calls), median: "
                  + ", ".join(f"{op} {statistics.median(v):.2f}" for op, v in noise.items() if v))
        print(f"{'':<12} the replays against the same tar traced again in their round (not the first trace against it), EMD median: " + median_emd(vs_again[k], CACHED))
    if selfs:
        q = [statistics.median(x[k] for x in selfs) / 1e3 for k in range(3)]
        print(f"{'itself':<12} the trace replayed with each call taking what it took in the round's new trace (the program against itself: "
              f"no replayer's time, every wake-up on time; its run-to-run variation, not a floor): error median {q[0]:.1f} us, p90 {q[1]:.1f} us, p99 {q[2]:.1f} us "
              f"(rounds {min(x[2] for x in selfs) / 1e3:.1f}..{max(x[2] for x in selfs) / 1e3:.1f}; {len(selfs)} of {ARGS.rounds} rounds made the same calls)")
    print(f"{'tar again':<12} fidelity EMD (trace vs the same tar traced again: the floor), median: " + median_emd(again, CACHED))
    for k, ms in meters.items():
        print(f"{k:<12} " + hiccup_line(ms, span))
    pooled_errors(runs, meters)
    pooled(traces, {k: v for k, v in runs.items() if not k.startswith("dry")})
    wakeups(tmp)
    print("compile:", " ".join(comp.split()))


def hiccups(exe, span_ns, wrap):
    """The gaps (offset ns, length ns) a thread spinning for span_ns met
    (bench/hiccup.c; gaps of 1 us and more)."""
    rows = [tuple(map(int, l.split())) for l in run(wrap + [exe, str(span_ns), "1000"]).stdout.splitlines() if l.strip()]
    return rows[:-1]


def against_hiccups(calls, gaps):
    """The issue-time errors (ns, sorted) of the traced schedule played by a
    replayer of no cost whose calls take their traced durations, on a CPU
    that loses these gaps (from the replay's start): a call is issued at
    its traced time or when the one before returns, whichever is later,
    and later still when a gap holds the CPU then; a gap during a call
    lengthens it. What this machine alone puts on a replay of the trace."""
    base = calls[0]["start_ns"]
    errs, free, j = [], 0, 0

    def advance(t, need):
        nonlocal j
        while j < len(gaps) and gaps[j][0] + gaps[j][1] <= t:
            j += 1
        if j < len(gaps) and gaps[j][0] <= t:
            t = gaps[j][0] + gaps[j][1]
            j += 1
        end = t + need
        while j < len(gaps) and gaps[j][0] < end:
            end += gaps[j][1]
            j += 1
        return t, end

    for c in calls:
        due = c["start_ns"] - base
        issue, free = advance(max(due, free), c["duration_ns"])
        errs.append(issue - due)
    return sorted(errs)


def hiccup_line(ms, span):
    """The meter's rounds: what it lost, and the schedule played against it."""
    med = lambda f: statistics.median(f(g) for g, _ in ms)
    p99 = [e[len(e) * 99 // 100] / 1e3 for _, e in ms]
    return (f"a thread spinning {span / 1e6 + 5:.0f} ms in each round (bench/hiccup.c, after the replays): gaps of 10 us or more a median "
            f"{med(lambda g: sum(x[1] >= 10_000 for x in g)):.0f} (100 us or more {med(lambda g: sum(x[1] >= 100_000 for x in g)):.0f}), "
            f"the longest {med(lambda g: max((x[1] for x in g), default=0)) / 1e3:.0f} us, time lost {med(lambda g: sum(x[1] for x in g)) / (span + 5e6) * 100:.2f}%; "
            f"the traced schedule played on a CPU losing them (no replayer, the calls as traced): error p99 median "
            f"{statistics.median(p99):.1f} us (rounds {min(p99):.1f}..{max(p99):.1f})")


# The edges of the timing report's CDF (report::cdf): 1-2-5 from 100 ns.
CDF_EDGES = [m * 10 ** e for e in range(2, 11) for m in (1, 2, 5)]


def cdf_of(errors):
    """A sorted list of errors as the report's CDF."""
    out = []
    for edge in CDF_EDGES:
        within = bisect.bisect_right(errors, edge)
        out.append((edge, within / len(errors)))
        if within == len(errors):
            break
    return out


def within(cdf, edge):
    """The share of commands issued within edge ns (1 past the CDF's end)."""
    return next((f for e, f in cdf if e == edge), 1.0 if edge > cdf[-1][0] else 0.0)


def pooled_stats(cdfs):
    """Over rounds' CDFs (their commands weighted alike): the p99 (ns,
    interpolated between the CDF's 1-2-5 edges) and the shares late by more
    than 10 us, 100 us and 1 ms."""
    f = [statistics.fmean(within(c, e) for c in cdfs) for e in CDF_EDGES]
    p99 = float(CDF_EDGES[-1])
    for i, x in enumerate(f):
        if x >= 0.99:
            if i == 0:
                p99 = float(CDF_EDGES[0])
            else:
                # The tail taken as exponential between the two edges (the
                # log of the share late, linear in the error); linear where
                # nothing is late at the upper edge.
                (x0, f0), (x1, f1) = (CDF_EDGES[i - 1], f[i - 1]), (CDF_EDGES[i], x)
                if f1 < 1:
                    w = (math.log(1 - f0) - math.log(0.01)) / (math.log(1 - f0) - math.log(1 - f1))
                else:
                    w = (0.99 - f0) / (f1 - f0)
                p99 = x0 + w * (x1 - x0)
            break
    late = lambda e: 1 - f[CDF_EDGES.index(e)]
    return {"p99": p99, "10us": late(10_000), "100us": late(100_000), "1ms": late(1_000_000)}


def boot(cdfs, n=2000):
    """95% intervals of pooled_stats over the rounds resampled."""
    rng = random.Random(16)
    idx = range(len(cdfs))
    draws = collections.defaultdict(list)
    for _ in range(n):
        for k, v in pooled_stats([cdfs[rng.choice(idx)] for _ in idx]).items():
            draws[k].append(v)
    return {k: (sorted(v)[int(n * 0.025)], sorted(v)[int(n * 0.975) - 1]) for k, v in draws.items()}


def round_stats(cdf, p99):
    """One round's figures: its p99 (ns) and the shares late by more than
    10 us and 100 us."""
    return {"p99": p99, "10us": 1 - within(cdf, 10_000), "100us": 1 - within(cdf, 100_000)}


def sign_interval(d):
    """The median of paired differences and its distribution-free 95%
    interval (order statistics of the sign test): a round in which a stall
    hit one side only is an outlier either way, and moves neither the
    median nor the interval's ends much. None with fewer than 6 rounds."""
    d, n = sorted(d), len(d)
    cdf, k = 0.0, 0
    while True:
        cdf += math.comb(n, k) / 2 ** n
        if 2 * cdf > 0.05:
            break
        k += 1
    if k == 0:
        return statistics.median(d), None
    return statistics.median(d), (d[k - 1], d[n - k])


def resolved(iv):
    if iv is None:
        return "too few rounds"
    lo, hi = iv
    return "not resolved" if lo <= 0 <= hi else ("resolved: higher" if lo > 0 else "resolved: lower")


def pooled_errors(runs, meters):
    """The issue-time errors of all rounds pooled (the rounds' CDFs averaged)
    per row, with 95% intervals from resampling the rounds; and the rows
    that tell builds apart compared round by round. The p99 of one round
    swings by an order of magnitude on this VM with the same binary (a
    stall of a few ms makes a round's); the median of the paired rounds'
    differences, with its sign-test interval, does not follow one round."""
    rows = {k: [(r["timing"]["cdf"], r["timing"]["error"]["p99_ns"]) for r in rs] for k, rs in runs.items() if not k.endswith("afap")}
    for k, ms in meters.items():
        rows[k] = [(cdf_of(e), e[len(e) * 99 // 100]) for _, e in ms]
    n = len(next(iter(rows.values())))
    print(f"pooled issue-time errors over the {n} rounds (their CDFs averaged; [95% interval] from resampling the rounds):")
    for k, rs in rows.items():
        c = [x[0] for x in rs]
        st, iv = pooled_stats(c), boot(c)
        print(f"{k:<12} p99 {st['p99'] / 1e3:7.1f} us [{iv['p99'][0] / 1e3:.1f}, {iv['p99'][1] / 1e3:.1f}]; late by more than 10 us "
              f"{st['10us'] * 100:.2f}% [{iv['10us'][0] * 100:.2f}, {iv['10us'][1] * 100:.2f}], 100 us {st['100us'] * 100:.2f}% "
              f"[{iv['100us'][0] * 100:.2f}, {iv['100us'][1] * 100:.2f}], 1 ms {st['1ms'] * 100:.2f}%")
    pairs = [("fsprof", "baseline"), ("slowed", "fsprof"), ("fsprof", "dry"), ("dry", "hiccups")]
    pairs += [(a + " rt", b + " rt") for a, b in pairs]
    print("paired by round (the median of the rounds' differences [95% interval from the sign test]; resolved when it leaves out 0):")
    for a, b in pairs:
        if a not in rows or b not in rows:
            continue
        sa, sb = [round_stats(*x) for x in rows[a]], [round_stats(*x) for x in rows[b]]
        out = []
        for key, name, scale, unit in [("p99", "p99", 1e-3, " us"), ("100us", "late by more than 100 us", 100, " points"),
                                       ("10us", "by more than 10 us", 100, " points")]:
            m, iv = sign_interval([x[key] - y[key] for x, y in zip(sa, sb)])
            span = f" [{iv[0] * scale:+.2f}, {iv[1] * scale:+.2f}]" if iv else ""
            out.append(f"{name} {m * scale:+.2f}{unit}{span} ({resolved(iv)})")
        print(f"{a + ' - ' + b:<24} " + "; ".join(out))


def trace_calls(trace):
    """The trace's calls in order (`fsprof trace show --format jsonl`)."""
    p = run([ARGS.fsprof, "trace", "show", "--format", "jsonl", trace])
    return [e for e in map(json.loads, p.stdout.splitlines()) if e.get("type") == "call"]


def itself(a, b):
    """The issue-time errors (ns, sorted) of a replay of trace `a` whose
    every call takes what the same call took in trace `b` (the same
    program run again), made by a replayer of no cost of its own whose
    every wake-up is on time: each call is issued at its traced time or
    when the one before returns, whichever is later: the program's own
    run-to-run variation, played at the first trace's times (a call slower
    than traced delays every call queued behind it, a faster one does not
    bring the next one forward). Not a floor: a replay's calls need not be
    as slow as the retraced program's, and replays come under it (fifteenth
    session: p99 106-323 us against its 925)."""
    if [x["op"] for x in a] != [x["op"] for x in b]:
        return None
    errs, free = [], 0
    for x, y in zip(a, b):
        t = max(x["start_ns"], free)
        errs.append(t - x["start_ns"])
        free = t + y["duration_ns"]
    return sorted(errs)


def floor_calls(calls, root):
    """The trace's calls as bench/replay_floor.c reads them: descriptors as
    traced, a path given relative to a traced directory descriptor as it
    was, any other under the replay's root (where the replay made them:
    root + the resolved path). Calls on what the replay does not make
    either (/proc, /sys, /dev, stdio, streams) are left out."""
    out = []
    for e in calls:
        op, fd, res = e["op"], e.get("fd", -100), e.get("resolved", "")
        if res.startswith(("/proc", "/sys", "/dev", "pipe:")):
            continue
        under = lambda: root + res
        # A name in a traced directory descriptor stays relative to it.
        name = lambda: e["path"] if fd != -100 and not e["path"].startswith("/") else under()
        if op == "openat" and e["ret"] >= 0:
            out.append(f"o {fd} {e.get('flags', 0)} {e.get('mode', 0)} {e['ret']} {name()}")
        elif op == "creat" and e["ret"] >= 0:
            out.append(f"k {e.get('mode', 0o644)} {e['ret']} {under()}")
        elif op == "fstatat":
            out.append(f"a {fd} {e.get('flags', 0)} {name()}")
        elif op in ("read", "write") and fd >= 0:
            out.append(f"{op[0]} {fd} {e.get('len', 0)}")
        elif op in ("fstat", "close", "fdopendir", "readdir", "closedir") and fd >= 0:
            out.append(f"{dict(fstat='s', close='c', fdopendir='D', readdir='d', closedir='C')[op]} {fd}")
    return "\n".join(out) + "\n"


def floor_cpu(exe, calls, root, passes=3):
    """The calls' own CPU per command (ns) from bench/replay_floor.c: the
    median of the passes after the first (which warms the replay root's
    caches as the replays before it did), and how many calls a pass
    makes."""
    out = run([exe, root, str(passes)], input=calls).stdout.split("\n")
    rows = [[int(x) for x in l.split()] for l in out if l.strip()]
    return statistics.median(r[1] / r[0] for r in rows[1:]), rows[0][0]


def spin_us():
    """The replayer's pre-spin margin, from its source (engine::SPIN_NS)."""
    import re
    with open(os.path.join(ROOT, "crates/fsprof-replay/src/engine.rs")) as f:
        m = re.search(r"pub const SPIN_NS: u64 = ([0-9_]+);", f.read())
    return int(m.group(1).replace("_", "")) / 1e3 if m else float("nan")


def wakeups(tmp):
    """How late the replay thread's sleeps end on this machine now
    (bench/wakeup.c: absolute sleeps of 200 us at 1 ns timer slack, as the
    replayer sleeps), and under SCHED_FIFO as root: what the pre-spin
    margin must cover, and what each sleep costs on the CPU."""
    exe = os.path.join(tmp, "wakeup")
    run(["cc", "-O2", "-o", exe, os.path.join(ROOT, "bench/wakeup.c")])
    modes = {"": []}
    if os.geteuid() == 0 and shutil.which("chrt") and not ARGS.no_rt:
        modes[", under SCHED_FIFO"] = ["chrt", "-f", "10"]
    for name, wrap in modes.items():
        q = [int(x) / 1e3 for x in run(wrap + [exe, "2000", "200000"]).stdout.split()]
        print(f"{'wake-ups':<12} 2000 sleeps of 200 us{name}, load {os.getloadavg()[0]:.1f}: late by median {q[0]:.1f} us, p90 {q[1]:.1f}, "
              f"p99 {q[2]:.1f}, p99.9 {q[3]:.1f}, max {q[4]:.1f}; CPU per sleep {q[5]:.1f} us (the pre-spin margin: {spin_us():.0f} us)")


def cpu_split(ts):
    """The CPU per command split (medians over the rounds, per command):
    the CPU around the sleeps (measured around each), and the wall time
    of the calls, of the replayer's own work between calls due back to
    back, and of the pre-spin (waiting on the CPU for a command's time:
    the traced program's own time between its calls, and its calls'
    excess over the replay's); the CPU less the pre-spin, the calls' and
    the replayer's, is what a paced replay costs beyond waiting."""
    med = lambda f: statistics.median(f(t) / t["issued"] for t in ts) / 1e3
    x = lambda k: (lambda t: t["time_split"].get(k, 0))
    spin = lambda t: t["time_split"]["spin_ns"] + t["time_split"].get("woken_spin_ns", 0)
    return (f"CPU per command {med(lambda t: t['cpu_ns']):.2f} us: sleeping and waking {med(x('sleep_cpu_ns')):.3f} us "
            f"({statistics.median(t['time_split']['sleeps'] for t in ts):.0f} sleeps); wall time per command: calls {med(x('calls_ns')):.2f} us, "
            f"the replayer's own work {med(x('own_ns')):.3f} us, pre-spin {med(spin):.2f} us ({med(x('woken_spin_ns')):.2f} after a sleep); "
            f"CPU less the pre-spin {med(lambda t: t['cpu_ns'] - spin(t)):.2f} us")


def pooled(traces, runs):
    """The rounds pooled, where one replay's fidelity table compares two
    single runs: an op of 29 calls (fdopendir, closedir) differs between
    two samples of the same program by about as much as the target allows.
    Per op: `compare TRACES --vs REPLAYS`'s EMD of the merged sides (the
    fidelity table's measure: refined inside the buckets by the exact
    means where an op is one peak, the plain bucket EMD otherwise; what
    is left is a difference of the replay, not the sampling noise of one
    run), the sampling noise of the merged histograms, and compare's shift
    test (is the replay slower or faster than the program by more than the
    program's own runs spread). The floors: the traces split in halves
    compared the same way, and the plain EMD two samples of an op's
    per-run count of calls drawn from the pooled traces have.

    The plain bucket EMD of the merged histograms, which these lines
    printed before, is not the table's: an op whose calls sit at a
    bucket's edge reads 0.6-0.9 there for a shift of 0.3 (fstat's ~550 ns
    against the 512 ns edge at resolution 1)."""
    print(f"pooled over the rounds ({len(traces)} traces: the first and each round's); per op: compare's EMD of the merged sides "
          "(the fidelity table's) [the merged histograms' sampling noise] and compare's shift of the second side in powers of two (p):")
    hist = merged_histograms(traces)
    for k, rs in runs.items():
        profiles = [r["profile"] for r in rs]
        print(f"{k:<12} " + pooled_line(hist, merged_histograms(profiles), compare_runs(traces, profiles)))
    halves = (traces[0::2], traces[1::2])
    print(f"{'tar vs tar':<12} the traces split in halves: "
          + pooled_line(merged_histograms(halves[0]), merged_histograms(halves[1]), compare_runs(*halves)))
    counts = op_counts(traces[0])
    print(f"{'sampling':<12} plain EMD of two samples of one run's calls from the pooled traces (median of 200 pairs): " + ", ".join(
        f"{op} {sampling_emd(hist[op], counts[op]):.2f} (n {counts[op]})" for op in CACHED if op in hist and op in counts))


def pooled_line(ha, hb, shifts):
    out = []
    for op in CACHED:
        if op not in ha or op not in hb:
            continue
        a, b = ha[op], hb[op]
        if op not in shifts or shifts[op][2] is None:
            continue
        line = f"{op} {shifts[op][2]:.2f} [{emd_noise(a, b):.2f}]"
        # compare tests no shift for an op too small to matter in its
        # layer (fdopendir, closedir).
        if not math.isnan(shifts[op][0]):
            line += f" {shifts[op][0]:+.2f} ({shifts[op][1]:.2g})"
        out.append(line)
    return ", ".join(out)


def cdf_pairs(a, b):
    ta, tb = sum(a.values()) or 1, sum(b.values()) or 1
    ca = cb = 0.0
    for i in range(min(min(a), min(b)), max(max(a), max(b)) + 1):
        ca += a.get(i, 0) / ta
        cb += b.get(i, 0) / tb
        yield ca, cb


def emd_noise(a, b):
    """What sampling alone puts between them (distance::emd_noise)."""
    na, nb = sum(a.values()), sum(b.values())
    both = {i: a.get(i, 0) + b.get(i, 0) for i in set(a) | set(b)}
    return sum(math.sqrt(max(f * (1 - f), 0) * (1 / na + 1 / nb)) for f, _ in cdf_pairs(both, both)) * math.sqrt(2 / math.pi)


def compare_runs(a, b):
    """`fsprof compare A... --vs B...`: per op of the user layer, the shift
    test's effect (B over A, powers of two) and p-value, and the EMD of the
    merged sides (compare's score, the fidelity table's measure)."""
    p = subprocess.run([ARGS.fsprof, "compare"] + a + ["--vs"] + b + ["--format", "json"], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise subprocess.CalledProcessError(p.returncode, p.args, p.stdout, p.stderr)
    out = {}
    for o in json.loads(p.stdout)["comparison"]["ops"]:
        if o["layer"] != "user":
            continue
        shift = [c for c in o["checks"] if c["test"] == "shift"]
        out[o["op"]] = ((shift[0]["effect"], shift[0]["p_value"]) if shift else (float("nan"), float("nan"))) + (o["score"],)
    return out


def user_ops(path):
    with open(path) as f:
        prof = json.load(f)
    return [o for l in prof["layers"] if l["name"] == "user" for o in l["ops"]]


def op_counts(path):
    return {o["name"]: o["post"] for o in user_ops(path)}


def merged_histograms(paths):
    """Per op: {bucket index: calls} over all the profiles (index -1 the
    zero bucket)."""
    out = {}
    for path in paths:
        for o in user_ops(path):
            h, acc = o["histogram"], out.setdefault(o["name"], {})
            acc[-1] = acc.get(-1, 0) + h.get("zero", 0)
            for i, n in enumerate(h["counts"]):
                acc[h["offset"] + i] = acc.get(h["offset"] + i, 0) + n
    return out


def sampling_emd(hist, n, pairs=200):
    """Median plain EMD (in buckets) between two samples of n calls drawn
    from the histogram: what sampling alone puts between two runs."""
    rng = random.Random(27)
    idx = sorted(hist)
    w = [hist[i] for i in idx]
    emds = []
    for _ in range(pairs):
        a, b = (collections.Counter(rng.choices(idx, w, k=n)) for _ in range(2))
        ca = cb = d = 0.0
        for i in range(idx[0], idx[-1] + 1):
            ca += a.get(i, 0) / n
            cb += b.get(i, 0) / n
            d += abs(ca - cb)
        emds.append(d)
    return statistics.median(emds)


# The ops of the tar that are cached calls on both sides (what the
# fidelity target is about); read too, with the trace taken warm.
CACHED = ["close", "closedir", "fdopendir", "fstat", "fstatat", "openat", "read", "readdir", "write"]


def median_emd(per_round, ops):
    return ", ".join(f"{op} {statistics.median(d[op] for d in per_round if op in d):.2f}"
                     for op in ops if any(op in d for d in per_round))


def retrace(tmp, work, r):
    """Traces the tar again; the path of its profile."""
    trace = os.path.join(tmp, f"again-{r}.trace")
    prof = os.path.join(tmp, f"again-{r}.json")
    fsprof(["trace", "-f", "--data", "digest", "-o", trace, "--profile", prof, "--", "tar", "-cf", "out.tar", "/usr/include/linux"], work)
    return prof


def compare_emd(a, b):
    """`fsprof compare` of two profiles: EMD per op of the user layer."""
    # compare exits 1 when an op changed.
    p = subprocess.run([ARGS.fsprof, "compare", a, b, "--format", "json"], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise subprocess.CalledProcessError(p.returncode, p.args, p.stdout, p.stderr)
    ops = json.loads(p.stdout)["comparison"]["ops"]
    return {o["op"]: o["score"] for o in ops if o["layer"] == "user" and o["score"] is not None}


def made_up_profile(path, latencies):
    """A profile of one op, fstat, of these latencies (ns), recorded as the
    shim files them at resolution 1 (bucket i: [2^i, 2^(i+1)) ns)."""
    idx = [int(math.log2(ns)) for ns in latencies]
    lo = min(idx)
    counts = [idx.count(i) for i in range(lo, max(idx) + 1)]
    op = {"name": "fstat", "pre": len(latencies), "post": len(latencies), "errors": 0, "total_ns": sum(latencies),
          "min_ns": min(latencies), "max_ns": max(latencies), "histogram": {"zero": 0, "offset": lo, "counts": counts}}
    prof = {"format": "fsprof-profile", "format_version": 1,
            "meta": {"fsprof_version": "0.1.0", "tool": "run", "command": ["made-up"], "host": "self-test", "kernel": "",
                     "start_time": "2026-11-29T00:00:00.000Z", "start_unix_ns": 0, "duration_ns": 10_000_000,
                     "clock": {"source": "tsc", "tsc_hz": 2.4e9}, "resolution": 1},
            "layers": [{"name": "user", "ops": [op]}]}
    with open(path, "w") as f:
        json.dump(prof, f)
    return path


def self_test_floors(tmp):
    """The two floors on made-up calls: itself() delays a call behind a
    slower one and never brings one forward; floor_calls() keeps a name
    relative to its traced directory, puts other paths under the root and
    leaves /proc out; replay_floor.c makes the calls (the file it writes
    has the written size after each pass)."""
    call = lambda op, t, d, **kw: dict(op=op, start_ns=t, duration_ns=d, **kw)
    a = [call("fstat", 0, 50), call("fstat", 100, 50), call("fstat", 200, 50), call("fstat", 300, 50)]
    b = [call("fstat", 0, 50), call("fstat", 0, 150), call("fstat", 0, 10), call("fstat", 0, 50)]
    got = itself(a, b)
    if got != [0, 0, 0, 50]:
        sys.exit(f"self-test failed: itself() gave {got}, want [0, 0, 0, 50]")
    if itself(a, b[:3] + [call("close", 0, 50)]) is not None:
        sys.exit("self-test failed: itself() paired different calls")
    root = os.path.join(tmp, "root")
    os.makedirs(os.path.join(root, "d"))
    calls = [call("fopen", 0, 1, path="/proc/filesystems", resolved="/proc/filesystems", ret=3),
             call("creat", 0, 1, path="out", resolved="/d/out", mode=0o644, ret=3),
             call("openat", 0, 1, fd=-100, path="/d", resolved="/d", flags=os.O_RDONLY | os.O_DIRECTORY, ret=4),
             call("fstatat", 0, 1, fd=4, path="out", resolved="/d/out", flags=0x100),
             call("write", 0, 1, fd=3, len=5000, resolved="/d/out"),
             call("close", 0, 1, fd=3, resolved="/d/out"),
             call("openat", 0, 1, fd=4, path="out", resolved="/d/out", flags=os.O_RDONLY, ret=3),
             call("read", 0, 1, fd=3, len=4096, resolved="/d/out"),
             call("close", 0, 1, fd=3, resolved="/d/out"),
             call("close", 0, 1, fd=4, resolved="/d")]
    lines = floor_calls(calls, root).splitlines()
    want = [f"k 420 3 {root}/d/out", f"o -100 {os.O_RDONLY | os.O_DIRECTORY} 0 4 {root}/d", "a 4 256 out", "w 3 5000", "c 3",
            f"o 4 {os.O_RDONLY} 0 3 out", "r 3 4096", "c 3", "c 4"]
    if lines != want:
        sys.exit(f"self-test failed: floor_calls() gave {lines}, want {want}")
    exe = os.path.join(tmp, "replay_floor")
    run(["cc", "-O2", "-o", exe, os.path.join(ROOT, "bench/replay_floor.c")])
    cpu, n = floor_cpu(exe, "\n".join(lines) + "\n", root, passes=2)
    if n != len(lines) or cpu <= 0 or os.path.getsize(os.path.join(root, "d/out")) != 5000:
        sys.exit(f"self-test failed: replay_floor made {n} calls, {cpu} ns each, left a file of {os.path.getsize(os.path.join(root, 'd/out'))} bytes")
    print(f"self-test passed: itself() {got}; floor_calls() and replay_floor.c ({cpu:.0f} ns a call)")


def self_test_pooled():
    """against_hiccups() delays a call caught by a gap and every call queued
    behind it, and lengthens a call a gap falls in; the pooled figure
    finds the p99 between the CDF's edges, calls rounds of one distribution
    against a copy of themselves not resolved and rounds 30 us later
    resolved."""
    call = lambda t, d: dict(start_ns=t, duration_ns=d)
    calls = [call(1000, 100), call(1100, 100), call(1200, 100), call(5000, 100)]
    # A gap of 250 ns from 1050 (inside the first call): the first call
    # ends at 1350, the two queued behind it 250 ns late, the last on time.
    got = against_hiccups(calls, [(50, 250)])
    if got != [0, 0, 250, 250]:
        sys.exit(f"self-test failed: against_hiccups() gave {got}, want [0, 0, 250, 250]")
    got = against_hiccups(calls, [(3900, 300)])
    if got != [0, 0, 0, 200]:
        sys.exit(f"self-test failed: against_hiccups() (a gap at a call's time) gave {got}, want [0, 0, 0, 200]")
    rng = random.Random(5)
    rounds = lambda shift: [cdf_of(sorted(int(rng.expovariate(1 / 8000)) + (shift if rng.random() < 0.05 else 0) for _ in range(6000)))
                            for _ in range(9)]
    a, b, c = rounds(0), rounds(0), rounds(30_000)
    st = pooled_stats(a)
    # An exponential of mean 8 us: p99 8 us x ln 100 = 36.8 us.
    if not 34_000 < st["p99"] < 40_000 or not 0.28 < st["10us"] < 0.30:
        sys.exit(f"self-test failed: pooled_stats() gave {st}")
    diff = lambda x, y, key: sign_interval([round_stats(p, None)[key] - round_stats(q, None)[key] for p, q in zip(x, y)])
    same, later = diff(b, a, "10us"), diff(c, a, "10us")
    if resolved(same[1]) != "not resolved" or resolved(later[1]) != "resolved: higher" or resolved(diff(c, a, "100us")[1]) != "not resolved":
        sys.exit(f"self-test failed: sign_interval() gave {same} against a copy, {later} 30 us later")
    if sign_interval([1.0] * 5)[1] is not None or sign_interval(list(range(6)))[1] != (0, 5):
        sys.exit("self-test failed: sign_interval()'s order statistics")
    print(f"self-test passed: against_hiccups(); pooled p99 {st['p99'] / 1e3:.1f} us; late by more than 10 us, a copy {same}, 30 us later {later}")


def self_test():
    """The pooled lines print the fidelity table's EMD (compare's, refined
    by the exact means), not the plain bucket EMD: made-up traces of an
    fstat at ~550 ns and replays of it at ~480 ns (0.2 powers of two
    faster, across the 512 ns bucket edge) must read 0.2 there, where the
    plain EMD of the merged histograms reads 1.00."""
    tmp = tempfile.mkdtemp(prefix="fsprof-bench-trace-selftest-")
    try:
        rng = random.Random(13)
        traces = [made_up_profile(os.path.join(tmp, f"t{i}.json"), [rng.randint(530, 570) for _ in range(1000)]) for i in range(4)]
        replays = [made_up_profile(os.path.join(tmp, f"r{i}.json"), [rng.randint(460, 500) for _ in range(1000)]) for i in range(4)]
        hist_t, hist_r = merged_histograms(traces), merged_histograms(replays)
        line = pooled_line(hist_t, hist_r, compare_runs(traces, replays))
        want = abs(math.log2(480 / 550))
        got = float(line.split()[1])
        if abs(got - want) > 0.02:
            sys.exit(f"self-test failed: the pooled line reads {line!r}, want the table's EMD {want:.2f}")
        print(f"self-test passed: {line}")
        self_test_floors(tmp)
        self_test_pooled()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsprof", default=os.path.join(ROOT, "target/release/fsprof"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline", help="part 3: another fsprof binary's `trace` measured beside (before/after a change)")
    ap.add_argument("--n", type=int, default=500_000, help="preads per thread")
    ap.add_argument("--skip-overhead", action="store_true", help="the same as --parts 1,2")
    ap.add_argument("--parts", default="1,2,3,4,5", help="which of the five measurements to run")
    ap.add_argument("--no-rt", action="store_true", help="parts 1 and 2 without the SCHED_FIFO rounds")
    ap.add_argument("--slowed", type=int, default=0, metavar="NS",
                    help="part 5: also replay with the build under test spinning NS ns after each call (a deliberately slower replayer: the pooled figure must resolve it)")
    ap.add_argument("--keep", action="store_true", help="keep the working directory (traces, each replay's profile and timing report) and print its path")
    ap.add_argument("--self-test", action="store_true", help="check on made-up profiles that the pooled lines print the fidelity table's EMD")
    ARGS = ap.parse_args()
    # The commands run in the bench's own directories.
    ARGS.fsprof = os.path.abspath(ARGS.fsprof)
    if ARGS.baseline:
        ARGS.baseline = os.path.abspath(ARGS.baseline)
    if not os.path.exists(ARGS.fsprof):
        sys.exit(f"{ARGS.fsprof} not found: run `cargo build --release` first")
    if ARGS.self_test:
        return self_test()
    tmp = tempfile.mkdtemp(prefix="fsprof-bench-trace-", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    try:
        parts = set(ARGS.parts.split(","))
        if ARGS.skip_overhead:
            parts.discard("3")
        if "1" in parts:
            pread_rates(tmp)
        if "2" in parts:
            bursty(tmp)
        if "3" in parts:
            overhead(tmp)
        if "4" in parts:
            percall(tmp)
        if "5" in parts:
            tar_replay(tmp)
    finally:
        if ARGS.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
