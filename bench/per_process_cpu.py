#!/usr/bin/env python3
"""What fsprof adds per short process, in CPU time, page faults and system
calls, with the variants interleaved a few milliseconds apart (issue 27).

bench/per_process.py times whole workloads of one to two seconds in
rounds: on this 2-vCPU VM a round moves by 5-15% (the machine runs several
times slower for 6-90 ms every few seconds, docs/analysis.md), which is
+-30-60 us a process, more than an empty preloaded library adds. Here the
unit is a short sample of the same workload (a loop of a few `cat`s, ~5
ms), and a round runs every variant once, shuffled, one after the other:
a slow stretch of the machine falls on one or two samples of a round, not
on one variant's whole run, and the median over hundreds of rounds of
each variant's paired difference to bare leaves those out.

Workloads (--only): loop (a shell loop of --loop cats), xargs (the
pipeline of bench/per_process.py, whole: ~200 ms a sample, so an eighth of
the rounds), xargs-short (the same pipeline over 33 headers: 9 `wc`s,
~15 ms), cat (one `cat` started directly: one process image, no shell).

Every sample is started by a driver (this script, --driver) that runs
under `fsprof run`: it starts the sample with the environment of the
variant, so that one run serves every variant:

  bare          LD_PRELOAD and FSPROF_SHM removed
  empty.so      an empty library preloaded (the floor of any preload
                profiler), FSPROF_SHM removed
  shim, no run  fsprof's shim preloaded, FSPROF_SHM removed: the library's
                load and constructor, nothing set up
  fsprof run    the run's own environment: the shim records every call
  fsprof run (other)
                the same under --other's `fsprof run` (a second driver),
                in the same rounds. Two collectors differ in more than
                their build (their CPU, their caches), which the bootstrap
                does not resample: a build against itself has read -9 to
                +11 us/proc at load 10-13, so read a difference between
                builds under +-10 us a process as none

A sample's CPU time is its whole tree's (user + system, from wait4: the
kernel's sum_exec_runtime, not ticks) plus fsprof's own CPU from the
sample's start until the next (the sum over fsprof's threads of
/proc/PID/task/*/schedstat, after a settle of --settle ms: fsprof folded
ended processes' blocks every 10 ms (every 5 before the fifteenth
session), on the other CPU; since the sixteenth it folds them when its
offers run low or 100 ms after activity, so a sample's fold may fall in a
later sample: "of it fsprof, mean" spreads them, the median leaves them
out). Every variant pays
fsprof's idle wake-ups alike; under a run fsprof also reads and zeroes
each process's block, which is the run's cost too.

--trace adds `fsprof trace` (and --other's; with --calls-only, one with
every capability dropped: no page faults followed) the same way: a driver under
each build's `fsprof trace`, whose samples are traced with every call and
page fault recorded. The variants outside a run always take the `fsprof
run` drivers, so that bare's fsprof CPU is a run's idle; a trace sample's
fsprof CPU holds the harvest of its records (and of the driver's own few
calls around it). Printed paired: trace - run, and trace - trace (other).

--floor adds the floor of the shim's design (bench/shim_floor.c: the
shim's exported wrappers, each resolving and timing its real function
into a per-op counter in a shared file mapped at start, nothing else),
built here against the installed shim's own symbol list: "floor" with
its file, "floor, unset" loaded without one (against "shim, no run"),
and the quotients of the shim's variants over it.

--trace-floor adds the floor of `fsprof trace`'s design: the same
library built with -DFLOOR_TRACE, whose wrappers also append a
fixed-size record of each call (op, clock readings, result, errno, four
arguments) to a 16 KiB window after the process's counters, published by
a release store of its length, with the pid and tid in the window's
header ("trace floor"), beside "floor" (counters only); with --trace,
"fsprof trace - trace floor" says how far trace is from what any tracer
that records every call into shared memory costs a process.

--preload NAME=PATH adds a variant with another library preloaded in the
shim's place (a shim linked another way, a library that does one part of
the shim's work), outside a run, or under this build's run with ",run"
(the library must then share the run's ABI).

Printed per variant: added CPU us a process over bare (median of the
rounds' paired differences, 95% bootstrap interval), added page faults a
process (ru_minflt), and "fsprof run / empty.so added" with its interval
from resampling whole rounds (the target: at most 2x). --counts adds
system calls a process (perf stat -e raw_syscalls:sys_enter over the
whole workload, fsprof included), which do not vary from run to run.

usage: python3 bench/per_process_cpu.py [--rounds N] [--loop K] [--only loop,xargs,cat]
          [--fsprof PATH] [--other PATH [--other-shim]] [--preload NAME=PATH[,run]]... [--pair A,B]...
          [--floor] [--trace-floor] [--settle MS] [--counts] [--fifo] [--trace [--calls-only]]
"""
import argparse
import glob
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import per_process  # noqa: E402

RUN_ENV = "FSPROF_SHM"
# The pipeline of bench/per_process.py over 33 headers, not 950: 9 `wc`s, a
# sample of ~15 ms that interleaves as finely as the loop's (the whole
# pipeline, ~200 ms a sample, left the empty library unresolved in 37
# rounds, and a build against itself at +23 us/proc [+5, +71]).
XARGS_SHORT = "find /usr/include/linux/tc_act /usr/include/linux/usb -name '*.h' | xargs -n4 wc -c >/dev/null"


def tree_cpu_ns(pid):
    """CPU time of every thread of pid so far, ns (schedstat's first field)."""
    total = 0
    for p in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(p) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended between the listing and the read
    return total


# The control header's words (crates/fsprof-shim/shim/abi.h) the driver
# needs to ring `fsprof run`'s bell: abi_version, and the wake word, by ABI
# (12 and 13, the sixteenth session's: beside ring_head; a later ABI that
# moves it adds its offset here, else the driver rings nothing).
CTL_ABI_VERSION = 8
CTL_WAKE = {12: 96, 13: 96}


class Bell:
    """`fsprof run`'s low-water bell (ABI 12 on), rung by the driver after
    each sample: fsprof then folds the sample's ended processes within the
    settle, as its 10 ms tick did before, rather than when its offers run
    low a few samples later (in another variant's sample). Every variant's
    sample rings it, so its wake-up cancels out of the differences; what
    the bell saves fsprof (a wake-up every ~30 processes of a loop, not
    every 10 ms) shows in a whole run (perf stat of the loop of 1,000 cats),
    not here. None under an older build, which folds on its tick."""

    def __init__(self):
        import ctypes
        import mmap
        path = os.environ.get(RUN_ENV, "").split(":", 4)[-1] + "/control"
        fd = os.open(path, os.O_RDWR)
        try:
            self.map = mmap.mmap(fd, 4096)
        finally:
            os.close(fd)
        abi = struct.unpack_from("<I", self.map, CTL_ABI_VERSION)[0]
        if abi not in CTL_WAKE:
            raise OSError(f"no bell at ABI {abi}")
        self.off = CTL_WAKE[abi]
        self.addr = ctypes.addressof(ctypes.c_char.from_buffer(self.map, self.off))
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.ctypes = ctypes

    def ring(self):
        # Not atomic: a process's bump lost meanwhile still leaves a
        # changed word, which is all fsprof looks at.
        v = struct.unpack_from("<I", self.map, self.off)[0]
        struct.pack_into("<I", self.map, self.off, (v + 1) & 0xFFFFFFFF)
        c = self.ctypes  # futex(addr, FUTEX_WAKE, 1): the address as a pointer, not a C int
        self.libc.syscall(c.c_long(202), c.c_void_p(self.addr), c.c_int(1), c.c_int(1), None, None, c.c_int(0))


def driver():
    """Runs samples on request, one JSON line in, one out: the child tree's
    CPU us and minor faults (wait4), wall us, and fsprof's CPU us from the
    sample's start until after the settle."""
    fsprof = os.getppid()
    try:
        bell = Bell()
    except (OSError, ValueError):
        bell = None
    base = dict(os.environ)
    # A sample's output goes nowhere: this process's stdout is the reply pipe.
    quiet = [(os.POSIX_SPAWN_DUP2, os.open(os.devnull, os.O_WRONLY), 1)]
    for line in sys.stdin:
        req = json.loads(line)
        env = dict(base)
        for k in req["unset"]:
            env.pop(k, None)
        env.update(req["set"])
        argv = req["argv"]
        f0 = tree_cpu_ns(fsprof)
        t0 = time.perf_counter()
        pid = os.posix_spawn(argv[0], argv, env, file_actions=quiet)
        _, status, ru = os.wait4(pid, 0)
        wall = time.perf_counter() - t0
        if bell:
            bell.ring()
        time.sleep(req["settle"])
        fs = tree_cpu_ns(fsprof) - f0
        out = {
            "ok": status == 0,
            "cpu": (ru.ru_utime + ru.ru_stime) * 1e6,
            "minflt": ru.ru_minflt,
            "wall": wall * 1e6,
            "fsprof": fs / 1e3,
        }
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


class Driver:
    """A driver process under one build's `fsprof run` (or `fsprof trace`)."""

    def __init__(self, fsprof, tmp, tag, fifo, trace=False, calls_only=False):
        pre = ["chrt", "-f", "50"] if fifo else []
        if calls_only:
            pre += per_process.NO_CAPS
        how = ["trace", "-o", os.path.join(tmp, f"driver{tag}.trace")] if trace else \
            ["run", "-q", "-o", os.path.join(tmp, f"driver{tag}.json")]
        argv = pre + [fsprof] + how + ["-f", "--", sys.executable, os.path.abspath(__file__), "--driver"]
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)

    def sample(self, argv, set_env, unset, settle):
        req = {"argv": argv, "set": set_env, "unset": unset, "settle": settle}
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            sys.exit("the driver under fsprof run ended")
        out = json.loads(line)
        if not out["ok"]:
            sys.exit(f"failed: {' '.join(argv)} ({set_env}, without {unset})")
        return out

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def variants(args, tmp):
    """name -> (driver tag, environment set, environment removed); a tag
    of None: any driver (the variant does not use the run)."""
    empty = os.path.join(tmp, "empty.so")
    shim = per_process.installed_shim(args.fsprof, tmp)
    both = ["LD_PRELOAD", RUN_ENV]
    out = {
        "bare": (None, {}, both),
        "empty.so": (None, {"LD_PRELOAD": empty}, [RUN_ENV]),
        "shim, no run": (None, {"LD_PRELOAD": shim}, [RUN_ENV]),
        "fsprof run": ("", {}, []),
    }
    for spec in args.preload:
        # Another library in the shim's place, outside a run or (",run")
        # under this build's run: what a part of the shim's cost is.
        name, _, path = spec.partition("=")
        path, _, mode = path.partition(",")
        if mode == "run":
            out[name] = ("", {"LD_PRELOAD": os.path.abspath(path)}, [])
        else:
            out[name] = (None, {"LD_PRELOAD": os.path.abspath(path)}, [RUN_ENV])
    if args.floor or args.trace_floor:
        lib, counters = build_floor(shim, tmp)
        if args.floor:
            out["floor, unset"] = (None, {"LD_PRELOAD": lib}, [RUN_ENV])
        out["floor"] = (None, {"LD_PRELOAD": lib, "FSPROF_FLOOR": counters}, [RUN_ENV])
    if args.trace_floor:
        lib, records = build_floor(shim, tmp, trace=True)
        out["trace floor"] = (None, {"LD_PRELOAD": lib, "FSPROF_FLOOR": records}, [RUN_ENV])
    if args.other:
        out["fsprof run (other)"] = ("other", {}, [])
        if args.other_shim:
            other = per_process.installed_shim(args.other, tmp)
            out["shim, no run (other)"] = (None, {"LD_PRELOAD": other}, [RUN_ENV])
    if args.trace:
        out["fsprof trace"] = ("trace", {}, [])
        if args.calls_only:
            out["trace, calls only"] = ("trace-calls", {}, [])
        if args.other:
            out["fsprof trace (other)"] = ("trace-other", {}, [])
    return out


# The floor is linked as the shim is (crates/fsprof-shim/build.rs,
# LINK_FLAGS and shim/layout.ld: one read-only executable segment, the
# constants before the code): how a library is linked is no part of the
# design, and a floor linked as by default would charge the shim's design
# two mmaps and page faults that it need not pay.
FLOOR_LINK = ["-Wl,-z,noseparate-code", "-Wl,-z,relro",
              "-Wl,-T," + os.path.join(per_process.ROOT, "crates/fsprof-shim/shim/layout.ld")]
DEFAULT_LINK = "default link"


def build_floor(shim, tmp, trace=False, defines=(), tag=""):
    """bench/shim_floor.c built with the shim's exported wrappers (its
    dynamic symbol table, less its own fsprof_shim_* entry points and the
    execl family, which the floor writes out by hand), and its counter
    file made on tmpfs, as a run's control file is: (library, file).
    `trace`: the floor of trace's design (-DFLOOR_TRACE), whose regions
    also hold a window of records. `defines`: the floor's parts left out or
    done another way (bench/floor_parts.py), built as shim_floor`tag`.so;
    DEFAULT_LINK among them links it as a library is by default rather
    than as the shim is (FLOOR_LINK)."""
    syms = subprocess.run(["nm", "-D", "--defined-only", shim], capture_output=True, text=True,
                          check=True).stdout.split()[2::3]
    wrappers = [s for s in syms if not s.startswith("fsprof_shim_")]
    by_hand = {"execl", "execle", "execlp"}
    if not by_hand <= set(wrappers):
        sys.exit(f"the shim no longer exports {sorted(by_hand - set(wrappers))}: fix shim_floor.c")
    # Variadic, and may pass floating-point arguments: written by hand
    # (FLOOR_PRINTF) when the shim exports them (a shim that traces
    # stdio output), all or none.
    printf = {"printf", "fprintf", "dprintf", "__printf_chk", "__fprintf_chk", "__dprintf_chk"}
    has_printf = bool(printf & set(wrappers))
    if has_printf and not printf <= set(wrappers):
        sys.exit(f"the shim exports part of the printf family only: fix shim_floor.c")
    if has_printf:
        by_hand |= printf
    generic = [s for s in wrappers if s not in by_hand]
    with open(os.path.join(tmp, "floor_syms.h"), "w") as f:
        f.writelines(f"W({s})\n" for s in generic)
    lib = os.path.join(tmp, f"shim_floor{'_trace' if trace else ''}{tag}.so")
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-fno-builtin", "-fvisibility=hidden", "-I", tmp,
                    "-I", os.path.join(per_process.ROOT, "crates/fsprof-shim/shim")]
                   + (["-DFLOOR_TRACE"] if trace else []) + (["-DFLOOR_PRINTF"] if has_printf else [])
                   + [d for d in defines if d.startswith("-D")]
                   + ["-o", lib, os.path.join(per_process.ROOT, "bench/shim_floor.c"), "-ldl"]
                   + ([] if DEFAULT_LINK in defines else FLOOR_LINK)
                   + [d for d in defines if not d.startswith("-D") and d != DEFAULT_LINK], check=True)
    got = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                         check=True).stdout.split()[2::3]
    if "-DFLOOR_HIDDEN" in defines:
        assert got == [], "the hidden floor exports symbols"
    else:
        assert sorted(got) == sorted(wrappers), "the floor exports other symbols than the shim's wrappers"
    size = floor_size(len(generic), trace)
    fd, counters = tempfile.mkstemp(prefix="fsprof-shim-floor-", dir="/dev/shm")
    os.ftruncate(fd, size)
    os.close(fd)
    return lib, counters


FLOOR_CTR = 8 * 67  # shim_floor.c's struct ctr: op, calls, ticks, 64 buckets
FLOOR_TWIN = 16384  # shim_floor.c's trace window (FLOOR_TRACE)
FLOOR_TWIN_HDR = 64  # its struct twin: committed, dropped, pid, tid, 5 reserved
FLOOR_TREC = 64  # its struct trec: op, err, t0, t1, ret, 4 arguments


def floor_counters(nops):
    """Bytes of a region's counters in the trace floor (page aligned)."""
    return ((nops + 3) * FLOOR_CTR + 4095) & ~4095


def floor_region(nops, trace=False):
    """shim_floor.c's FLOOR_REGION: every op's counter (the 3 written by
    hand too) and 4 KiB; for the trace floor, the counters page aligned
    and the window."""
    if trace:
        return floor_counters(nops) + FLOOR_TWIN
    return (nops + 3) * FLOOR_CTR + 4096


def floor_size(nops, trace=False):
    """shim_floor.c's FLOOR_SIZE: 4 KiB of header, 64 regions."""
    return 4096 + 64 * floor_region(nops, trace)


def floor_calls(counters, names, trace=False):
    """Calls per wrapper name over the floor's regions, and the regions
    taken; `names` in the floor's op order (floor_syms.h, then the execl
    family)."""
    data = open(counters, "rb").read()
    taken = int.from_bytes(data[:4], "little")
    nops = len(names) - 3
    region = floor_region(nops, trace)
    calls = {}
    for r in range(min(taken, 64)):
        at = 4096 + r * region
        for k in range(nops + 3):
            op, n = struct.unpack_from("<QQ", data, at + k * FLOOR_CTR)
            if op == 0:
                break
            calls[names[op - 1]] = calls.get(names[op - 1], 0) + n
    return calls, taken


def floor_records(counters, names):
    """The trace floor's windows: (pid, tid, dropped, [(op name, ret)...])
    per region taken."""
    data = open(counters, "rb").read()
    taken = int.from_bytes(data[:4], "little")
    nops = len(names) - 3
    out = []
    for r in range(min(taken, 64)):
        at = 4096 + r * floor_region(nops, True) + floor_counters(nops)
        committed, dropped, pid, tid = struct.unpack_from("<QQii", data, at)
        recs = []
        for k in range(committed // FLOOR_TREC):
            op, _err, _t0, _t1, ret = struct.unpack_from("<IiQQq", data, at + FLOOR_TWIN_HDR + k * FLOOR_TREC)
            recs.append((names[op - 1], ret))
        out.append((pid, tid, dropped, recs))
    return out


def trace_floor_self_test(fsprof):
    """The trace floor records every call a program makes, in order, under
    its pid, and leaves its output alone: a `cat` of a 3-byte file under it
    prints the file, takes one region, and its window holds one record for
    each call its counters counted, with the two reads' results (3, then
    0 at the end of the file) in the order made."""
    tmp = tempfile.mkdtemp(prefix="fsprof-trace-floor-test-")
    records = None
    try:
        shim = per_process.installed_shim(fsprof, tmp)
        lib, records = build_floor(shim, tmp, trace=True)
        wrappers = [ln[2:-1] for ln in open(os.path.join(tmp, "floor_syms.h")).read().split()]
        names = wrappers + ["execl", "execle", "execlp"]
        src = os.path.join(tmp, "three")
        with open(src, "w") as f:
            f.write("ab\n")
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", RUN_ENV)}
        env.update({"LD_PRELOAD": lib, "FSPROF_FLOOR": records})
        p = subprocess.Popen([shutil.which("cat"), src], env=env, stdout=subprocess.PIPE)
        out, _ = p.communicate()
        assert p.returncode == 0 and out == b"ab\n", (p.returncode, out)
        calls, taken = floor_calls(records, names, trace=True)
        assert taken == 1, f"{taken} regions taken by one process"
        [(pid, tid, dropped, recs)] = floor_records(records, names)
        assert pid == p.pid and tid == p.pid, (pid, tid, p.pid)
        assert dropped == 0 and len(recs) == sum(calls.values()) > 2, (dropped, recs, calls)
        assert [ret for op, ret in recs if op == "read"] == [3, 0], recs
        print(f"trace floor self-test passed ({len(recs)} records)")
    finally:
        if records:
            os.unlink(records)
        shutil.rmtree(tmp, ignore_errors=True)


def floor_self_test(fsprof):
    """The floor counts a program's calls and leaves its output alone: a
    `cat` of a 3-byte file under it prints the file, takes one region,
    and files its two reads (the data, then the end of the file)."""
    tmp = tempfile.mkdtemp(prefix="fsprof-floor-test-")
    counters = None
    try:
        shim = per_process.installed_shim(fsprof, tmp)
        lib, counters = build_floor(shim, tmp)
        wrappers = [ln[2:-1] for ln in open(os.path.join(tmp, "floor_syms.h")).read().split()]
        src = os.path.join(tmp, "three")
        with open(src, "w") as f:
            f.write("ab\n")
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", RUN_ENV)}
        env.update({"LD_PRELOAD": lib, "FSPROF_FLOOR": counters})
        out = subprocess.run([shutil.which("cat"), src], env=env, capture_output=True, check=True).stdout
        assert out == b"ab\n", out
        calls, taken = floor_calls(counters, wrappers + ["execl", "execle", "execlp"])
        assert taken == 1, f"{taken} regions taken by one process"
        assert calls.get("read") == 2, calls
        print("floor self-test passed")
    finally:
        if counters:
            os.unlink(counters)
        shutil.rmtree(tmp, ignore_errors=True)


def boot_interval(stat, n, rng, boot=per_process.BOOT):
    """95% interval of stat(round indices), rounds resampled whole."""
    vals = sorted(stat(rng.choices(range(n), k=n)) for _ in range(boot))
    return vals[int(0.025 * boot)], vals[int(0.975 * boot) - 1]


def cpu(r):
    """A sample's CPU us: its tree's and fsprof's around it."""
    return r["cpu"] + r["fsprof"]


def added(res, k, nproc, idx, key=cpu):
    """Median over the rounds idx of variant k's difference to bare in
    the same round, per process."""
    return statistics.median((key(res[k][i]) - key(res["bare"][i])) / nproc for i in idx)


def quotient(res, num, den, nproc, rng):
    """(added(num) / added(den), 95% interval) with rounds resampled
    whole, or None when den's own interval reaches 0: no quotient is
    resolved then."""
    n = len(res["bare"])
    lo_d, _ = boot_interval(lambda idx: added(res, den, nproc, idx), n, rng)
    if lo_d <= 0:
        return None

    def q(idx):
        d = added(res, den, nproc, idx)
        return added(res, num, nproc, idx) / d if d > 0 else float("inf")
    lo, hi = boot_interval(q, n, rng)
    return q(range(n)), lo, hi


def quotient_text(res, num, den, nproc, rng):
    r = quotient(res, num, den, nproc, rng)
    if r is None:
        return f"not resolved ({den}'s interval reaches 0)"
    return f"{r[0]:5.2f}x [{r[1]:.2f}, {r[2]:.2f}]"


def report(name, nproc, res, rng, pair=()):
    n = len(res["bare"])
    med = statistics.median
    every = range(n)
    print(f"\n## {name}: {nproc} processes a sample, {n} rounds")
    print(f"{'variant':<24} {'cpu us':>9} {'fsprof us':>9} {'faults':>7}"
          f"  {'added cpu us/proc [95% CI]':>30}  {'added faults/proc':>17}  {'wall us':>9}")
    for k in res:
        c = med(cpu(r) for r in res[k])
        fs = med(r["fsprof"] for r in res[k])
        fl = med(r["minflt"] for r in res[k])
        w = med(r["wall"] for r in res[k])
        line = f"{k:<24} {c:9.0f} {fs:9.0f} {fl:7.0f}"
        if k != "bare":
            a = added(res, k, nproc, every)
            lo, hi = boot_interval(lambda idx, k=k: added(res, k, nproc, idx), n, rng)
            f = added(res, k, nproc, every, key=lambda r: r["minflt"])
            line += f"  {a:+9.1f} [{lo:+7.1f}, {hi:+7.1f}]  {f:+17.2f}"
        else:
            line += " " * 51
        print(line + f"  {w:9.0f}")
    for k in res:
        if k.startswith("fsprof run"):
            print(f"{k + ' / empty.so added':<40} cpu {quotient_text(res, k, 'empty.so', nproc, rng)}"
                  "  (target <= 2x)")
    quotients = [("shim, no run", "empty.so"), ("floor", "empty.so"), ("floor, unset", "empty.so"),
                 ("fsprof run", "floor"), ("shim, no run", "floor, unset"),
                 ("trace floor", "empty.so"), ("fsprof trace", "trace floor"),
                 ("trace, calls only", "trace floor")]
    for num, den in quotients:
        if num in res and den in res:
            print(f"{num + ' / ' + den + ' added':<40} cpu {quotient_text(res, num, den, nproc, rng)}")
    pairs = [("fsprof run", "fsprof run (other)"), ("shim, no run", "shim, no run (other)"), ("fsprof run", "floor"),
             ("shim, no run", "floor, unset"), ("fsprof trace", "fsprof run"),
             ("fsprof trace", "fsprof trace (other)"), ("fsprof trace", "trace, calls only"),
             ("trace, calls only", "fsprof run"), ("trace floor", "floor"),
             ("fsprof trace", "trace floor"), ("trace, calls only", "trace floor"),
             ("fsprof trace (other)", "trace floor")] + pair
    for a, b in pairs:
        if a not in res or b not in res:
            continue

        def diff(idx, a=a, b=b):
            return med((cpu(res[a][i]) - cpu(res[b][i])) / nproc for i in idx)
        lo, hi = boot_interval(diff, n, rng)
        print(f"{a + ' - ' + b:<40} cpu {diff(every):+.1f} us/proc [{lo:+.1f}, {hi:+.1f}]"
              "  (paired by round)")

        # fsprof's own part: a change to its harvest alone resolves here
        # when the traced processes' spread hides it in the total.
        def own(idx, a=a, b=b):
            return med((res[a][i]["fsprof"] - res[b][i]["fsprof"]) / nproc for i in idx)
        lo, hi = boot_interval(own, n, rng)
        print(f"{'  of it fsprof':<40} cpu {own(every):+.1f} us/proc [{lo:+.1f}, {hi:+.1f}]")

        # The mean too: since the sixteenth session `fsprof run` folds
        # ended processes when its offers run low (every few samples), not
        # every 10 ms, so most samples hold no fold and a few hold several:
        # the median leaves the folds out, the mean spreads them.
        def own_mean(idx, a=a, b=b):
            return statistics.fmean((res[a][i]["fsprof"] - res[b][i]["fsprof"]) / nproc for i in idx)
        lo, hi = boot_interval(own_mean, n, rng)
        print(f"{'  of it fsprof, mean':<40} cpu {own_mean(every):+.1f} us/proc [{lo:+.1f}, {hi:+.1f}]")


def split_pair(spec, names):
    """`--pair A,B` as (A, B): at the one comma that leaves a variant's
    name on each side. Names have commas of their own ("shim, no run",
    "floor, unset"), so the first comma is not always the one; an
    argument no comma splits into two variants, or that two commas do,
    is refused before any round is measured."""
    cuts = [(spec[:i], spec[i + 1:]) for i, c in enumerate(spec) if c == ","]
    fits = [ab for ab in cuts if ab[0] in names and ab[1] in names]
    if len(fits) == 1:
        return fits[0]
    why = "is split by more than one comma into" if fits else "is not two variants A,B of"
    sys.exit(f"--pair {spec!r} {why}: {', '.join(repr(n) for n in names)}")


def self_test():
    """The quotient on made-up rounds: resolved, with an interval around
    the true quotient, when the empty library's cost stands out of the
    noise; "not resolved" when it does not."""
    rng = random.Random(5)

    def rounds(extra, noise, n=200):
        out = []
        for _ in range(n):
            out.append({"cpu": 1000 + rng.gauss(0, noise) + extra, "fsprof": 0.0})
        return out
    # 40 us / 120 us added to a 1 ms sample of 1 process (3x), every
    # variant of a round slowed alike by the machine.
    slow = [rng.gauss(0, 100) for _ in range(200)]
    res = {k: [{"cpu": 1000 + s + extra + rng.gauss(0, 5), "fsprof": 0.0} for s in slow]
           for k, extra in (("bare", 0), ("empty.so", 40), ("fsprof run", 120))}
    q = quotient(res, "fsprof run", "empty.so", 1, random.Random(27))
    assert q is not None and q[1] < 3.0 < q[2] and q[1] > 2.0, q
    # The empty library adds nothing: no quotient.
    res["empty.so"] = [{"cpu": 1000 + s + rng.gauss(0, 5), "fsprof": 0.0} for s in slow]
    assert quotient(res, "fsprof run", "empty.so", 1, random.Random(27)) is None
    # Noise of its own, ten times the effect: not resolved either.
    res["empty.so"] = rounds(40, 400, n=200)
    assert quotient(res, "fsprof run", "empty.so", 1, random.Random(27)) is None
    # --pair splits where both sides are variants, not at the first comma.
    names = ["bare", "shim, no run", "floor, unset", "floor", "fsprof run"]
    assert split_pair("shim, no run,floor, unset", names) == ("shim, no run", "floor, unset")
    assert split_pair("fsprof run,shim, no run", names) == ("fsprof run", "shim, no run")
    for bad, ok in (("floor,nothing", names), ("a,b,c", ["a", "c", "a,b", "b,c"])):
        try:
            split_pair(bad, ok)
        except SystemExit as e:
            assert str(e).startswith(f"--pair {bad!r}"), e
        else:
            raise AssertionError(f"{bad} was split")
    print("self-test passed")


def counts(args, tmp, shell, vs, nproc_full):
    """System calls, page faults and task-clock a process over the whole
    workload (fsprof included), each variant once: counts vary little."""
    print(f"\n# perf stat -e raw_syscalls:sys_enter,page-faults,task-clock, whole workload "
          f"({nproc_full} processes), fsprof included")
    print(f"{'variant':<24} {'syscalls/proc':>14} {'faults/proc':>12} {'task-clock us/proc':>19}")
    empty = os.path.join(tmp, "empty.so")
    shim = per_process.installed_shim(args.fsprof, tmp)
    cmd = ["bash", "-c", shell]
    runs = {
        "bare": (cmd, {}),
        "empty.so": (cmd, {"LD_PRELOAD": empty}),
        "shim, no run": (cmd, {"LD_PRELOAD": shim}),
        "fsprof run": ([args.fsprof, "run", "-q", "-f", "-o", os.path.join(tmp, "c.json"), "--"] + cmd, {}),
    }
    if args.other:
        runs["fsprof run (other)"] = (
            [args.other, "run", "-q", "-f", "-o", os.path.join(tmp, "c.json"), "--"] + cmd, {})
    for k, (argv, env) in runs.items():
        e = {x: y for x, y in os.environ.items() if x not in ("LD_PRELOAD", RUN_ENV)}
        e.update(env)
        out = os.path.join(tmp, "perf.txt")
        subprocess.run(["perf", "stat", "-x,", "-o", out, "-e",
                        "raw_syscalls:sys_enter,page-faults,task-clock", "--"] + argv,
                       env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        vals = {}
        for line in open(out):
            f = line.strip().split(",")
            if len(f) > 2 and f[0] and f[0][0].isdigit():
                vals[f[2]] = float(f[0])
        print(f"{k:<24} {vals['raw_syscalls:sys_enter'] / nproc_full:14.1f} "
              f"{vals['page-faults'] / nproc_full:12.1f} {vals['task-clock'] * 1e3 / nproc_full:19.1f}")


def sample_argv(name, k, bash):
    """The command of one sample: a loop of k cats, the xargs pipeline,
    or one `cat` started directly (one image, no shell: the cost of a
    process image alone)."""
    if name == "cat":
        return [shutil.which("cat"), "/etc/hostname"]
    if name == "loop":
        return [bash, "-c", f"for i in $(seq {k}); do cat /etc/hostname >/dev/null; done"]
    if name == "xargs-short":
        return [bash, "-c", XARGS_SHORT]
    return [bash, "-c", per_process.workloads(k)[name]]


def run_workload(args, tmp, name, drivers, vs, bash):
    argv = sample_argv(name, args.loop, bash)
    shell = " ".join(argv[2:]) if argv[0] == bash else " ".join(argv)
    nproc = 1 if name == "cat" else per_process.processes(args.fsprof, tmp, argv[2])
    settle = args.settle / 1e3
    rounds = max(args.rounds // 8, 11) if name == "xargs" else args.rounds
    order = list(vs)
    for k in order:  # warm: page cache, the shims, the drivers' imports
        tag, s, u = vs[k]
        for t in drivers if tag is None else [tag]:
            drivers[t].sample(argv, s, u, settle)
    res = {k: [] for k in vs}
    shuffle = random.Random(len(order))
    # Outside a run: only the run drivers, whose idle is the same for all.
    tags = sorted(t for t in drivers if not t.startswith("trace"))
    for r in range(rounds):
        shuffle.shuffle(order)
        for k in order:
            tag, s, u = vs[k]
            # The variants outside a run take turns between the drivers,
            # so that each fsprof sees the same mix of work around its
            # run's samples (a null comparison, --other the same build,
            # read +9 us/proc [+2, +16] with every one on the first).
            if tag is None:
                tag = tags[r % len(tags)]
            res[k].append(drivers[tag].sample(argv, s, u, settle))
    # floor_parts.py hands its pairs over split already.
    pair = [p if isinstance(p, tuple) else split_pair(p, vs) for p in args.pair]
    report(f"{name}: {shell}", nproc, res, random.Random(27), pair)
    if args.counts and name in ("loop", "xargs"):
        full = per_process.workloads(1000)[name]
        counts(args, tmp, full, vs, per_process.processes(args.fsprof, tmp, full))


def main():
    if "--driver" in sys.argv:
        driver()
        return
    if "--self-test" in sys.argv:
        self_test()
        return
    if "--trace-floor-self-test" in sys.argv:
        trace_floor_self_test(sys.argv[sys.argv.index("--trace-floor-self-test") + 1])
        return
    if "--floor-self-test" in sys.argv:
        floor_self_test(sys.argv[sys.argv.index("--floor-self-test") + 1])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=400, help="rounds of the loop (xargs: an eighth, at least 11)")
    ap.add_argument("--loop", type=int, default=4, help="cats in a loop sample")
    ap.add_argument("--only", default="loop,xargs", help="workloads: loop, xargs, xargs-short, cat")
    ap.add_argument("--fsprof", default=os.path.join(per_process.ROOT, "target/release/fsprof"))
    ap.add_argument("--other")
    ap.add_argument("--other-shim", action="store_true", help="with --other: its shim loaded without a run too")
    ap.add_argument("--preload", action="append", default=[], metavar="NAME=PATH[,run]",
                    help="a variant with PATH preloaded instead, outside a run or under it (,run)")
    ap.add_argument("--pair", action="append", default=[], metavar="A,B",
                    help="also variant A minus variant B, paired by round")
    ap.add_argument("--floor", action="store_true",
                    help="the shim's design floor (bench/shim_floor.c) as variants too")
    ap.add_argument("--trace-floor", action="store_true",
                    help="the floor of trace's design (shim_floor.c with a record of every call) and the floor")
    ap.add_argument("--settle", type=float, default=14.0, help="ms after each sample for fsprof's folding")
    ap.add_argument("--counts", action="store_true", help="system calls a process too (perf stat)")
    ap.add_argument("--fifo", action="store_true")
    ap.add_argument("--trace", action="store_true", help="fsprof trace too (a driver under it)")
    ap.add_argument("--calls-only", action="store_true",
                    help="with --trace: also a trace with every capability dropped (no page faults followed)")
    args = ap.parse_args()
    for f in [args.fsprof] + ([args.other] if args.other else []):
        if not os.access(f, os.X_OK):
            sys.exit(f"{f} not found: cargo build --release")
    if args.counts and not shutil.which("perf"):
        sys.exit("--counts needs perf")
    bash = shutil.which("bash")
    tmp = tempfile.mkdtemp(prefix="fsprof-per-process-cpu-")
    drivers = {}
    vs = {}
    try:
        with open(os.path.join(tmp, "empty.c"), "w") as f:
            f.write("void fsprof_bench_empty(void) {}\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", os.path.join(tmp, "empty.so"),
                        os.path.join(tmp, "empty.c")], check=True)
        vs = variants(args, tmp)
        for p in args.pair:  # a bad one refused before the rounds, not after
            split_pair(p, vs)
        drivers[""] = Driver(args.fsprof, tmp, "", args.fifo)
        if args.other:
            drivers["other"] = Driver(args.other, tmp, "other", args.fifo)
        if args.trace:
            drivers["trace"] = Driver(args.fsprof, tmp, "trace", args.fifo, trace=True)
            if args.calls_only:
                drivers["trace-calls"] = Driver(args.fsprof, tmp, "trace-calls", args.fifo,
                                                trace=True, calls_only=True)
            if args.other:
                drivers["trace-other"] = Driver(args.other, tmp, "trace-other", args.fifo, trace=True)
        load = open("/proc/loadavg").read().split()[:3]
        ver = subprocess.run([args.fsprof, "--version"], capture_output=True, text=True).stdout.strip()
        print(f"# {ver}" + (f"; other: {args.other}" if args.other else ""))
        print(f"# samples interleaved by round (every variant once a round, shuffled), medians of the "
              f"rounds' differences to bare; load before {' '.join(load)}"
              f"{', SCHED_FIFO' if args.fifo else ''}; settle {args.settle:g} ms")
        for name in args.only.split(","):
            run_workload(args, tmp, name, drivers, vs, bash)
        print(f"\n# load after {' '.join(open('/proc/loadavg').read().split()[:3])}")
    finally:
        for d in drivers.values():
            d.close()
        for k in ("floor", "trace floor"):
            if k in vs:
                os.unlink(vs[k][1]["FSPROF_FLOOR"])
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
