#!/usr/bin/env python3
"""fsprof mount against native access and its peers, side by side in one run.

Workloads (each repeated, medians): a warm `grep -r` over a copy of
/usr/include, a sequential read of a 1 GiB file (both warm: LOWER's
caches and the mount's where it keeps them; each timed run of these two
right after an untimed one),
and create+stat+unlink of 10,000 files (bench/mount_meta.c).

Configurations: native (LOWER itself), `fsprof mount` --observe-all and
--fast with the default thread (one) and with two, each also without busy
polling (`--busy-poll 0`, "no-poll"), --fast --passthrough,
the same daemon built with
timing compiled out (`--features fsprof-fuse/untimed`), bindfs (Debian;
single-threaded by default, --multithreaded, and with entry/attribute
caching off like observe-all), and libfuse's
passthrough_hp (default threads and --single, each with its default day-long
entry/attribute caching and with --nocache, like observe-all), built from
Debian's fuse3 source package (`apt-get source fuse3`, never committed).

All configurations are mounted at once (each at a mount point of its own)
and the repetitions are interleaved; ratios are medians of each round's
ratio to native in the same round.

Needs root. Usage:
  bench/mount_bench.py [--reps 5] [--dir target/mount-bench] [--skip-build]
                       [--only CONFIG,...] [--workloads grep,read,meta]
                       [--requests | --floor | --crossings] [--folios]
                       [--placements free,same,split,daemon0]
Prints a table of medians and ratios to native, then the per-request
overhead of the timing (timed vs untimed build, and as the profile
measures it).

--requests counts instead of timing: each workload runs once more (after
the warm-up) on every mount while the kernel's own tracepoint
`fuse:fuse_request_send` is recorded in a private tracefs instance,
filtered to that mount's connection. The counts are what each daemon was
asked, whoever the daemon is, so peers that cache entries or attributes
show the requests they never get.

--floor times the FUSE round trip instead: N fstat() calls on one open file
(bench/fuse_rtt.c; one GETATTR each where attributes are not cached)
through every mount and through bench/fuse_floor.c, a libfuse low-level
daemon that answers from constants on one thread: the cost any daemon pays
before doing any work; and through the same no-work daemon written on
fuser (crates/fsprof-fuse/examples/fuser_floor.rs), to tell what the crate
costs against libfuse. Interleaved rounds, medians, ns per call.

--crossings traces sched:sched_switch (a private tracefs instance,
filtered to the workload's programs and the daemon's threads) during each
workload and prints, per configuration and placement, the share of
hand-offs between workload and daemon that landed on the other vCPU.

--folios prints, after the timed runs, how the page cache holds each
configuration's 1 GiB file: pages, folios, mean folio size (ext4 up to
2 MiB after a sequential read; a FUSE mount's page cache 4 KiB pages on
this kernel). Mapping the file to read its frames faults in what is not
cached, through the daemon for a mount.

--placements free,same,split repeats every timed run with the daemon's
threads and the workload left to the scheduler (free), both on CPU 0
(same), on different CPUs (split), or only the daemon on CPU 0 (daemon0),
to compare daemons on equal
placement (see PLACEMENTS). Every timed run also counts the vCPU halts
(cpuidle entries) it caused.
"""
import argparse
import collections
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=isinstance(cmd, str), check=True, **kw)


def build(args):
    if args.skip_build:
        return
    sh(["cargo", "build", "--release", "-q", "-p", "fsprof"], cwd=ROOT)
    sh(["cargo", "build", "--release", "-q", "-p", "fsprof", "--features", "fsprof-fuse/untimed",
        "--target-dir", os.path.join(ROOT, "target/untimed")], cwd=ROOT)
    sh(["cc", "-O2", "-o", os.path.join(args.dir, "mount_meta"), os.path.join(ROOT, "bench/mount_meta.c")])


def build_floor(args):
    """The no-work daemon and the fstat timer (small; always rebuilt)."""
    flags = subprocess.check_output(["pkg-config", "--cflags", "--libs", "fuse3"], text=True).split()
    sh(["cc", "-O2", "-o", os.path.join(args.dir, "fuse_floor"), os.path.join(ROOT, "bench/fuse_floor.c"), *flags])
    sh(["cc", "-O2", "-o", os.path.join(args.dir, "fuse_rtt"), os.path.join(ROOT, "bench/fuse_rtt.c")])
    # The same no-work daemon on fuser, the crate `fsprof mount` uses.
    sh(["cargo", "build", "--release", "-q", "-p", "fsprof-fuse", "--example", "fuser_floor"], cwd=ROOT)


def peers(args):
    """bindfs from Debian; passthrough_hp from Debian's fuse3 source."""
    need = [p for p, b in [("bindfs", "bindfs"), ("pkg-config", "pkg-config")] if not shutil.which(b)]
    if need or not os.path.exists("/usr/include/fuse3/fuse_lowlevel.h"):
        sh(["apt-get", "install", "-y", "-qq", "bindfs", "libfuse3-dev", "pkg-config", "g++"])
    hp = os.path.join(args.dir, "passthrough_hp")
    if os.path.exists(hp):
        return hp
    src = os.path.join(args.dir, "fuse3-src")
    os.makedirs(src, exist_ok=True)
    lst = "/etc/apt/sources.list.d/fsprof-bench-src.sources"
    if not os.path.exists(lst):
        with open(lst, "w") as f:
            f.write("Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n"
                    "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
        sh(["apt-get", "update", "-qq"])
    sh(["apt-get", "source", "-qq", "fuse3"], cwd=src)
    d = [x for x in os.listdir(src) if x.startswith("fuse3-") and os.path.isdir(os.path.join(src, x))][0]
    cflags = subprocess.check_output(["pkg-config", "--cflags", "--libs", "fuse3"], text=True).split()
    sh(["g++", "-O2", "-std=c++17", os.path.join(src, d, "example/passthrough_hp.cc"), *cflags,
        "-lpthread", "-o", hp])
    return hp


def fsprof_bin(untimed=False):
    t = "target/untimed/release/fsprof" if untimed else "target/release/fsprof"
    return os.path.join(ROOT, t)


NO_CACHE = "entry_timeout=0,attr_timeout=0,negative_timeout=0"


class Config:
    def __init__(self, name, mount=None, unmount=None):
        self.name, self.mount, self.unmount = name, mount, unmount


FLOOR = "no-work daemon (fuse_floor)"
FUSER_FLOOR = "no-work daemon on fuser (fuser_floor)"


def floor_configs(args):
    def cfg(name, binary, fsname):
        def m(mnt):
            # Foreground daemon of our own, in the background.
            subprocess.Popen([binary, mnt], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
            for _ in range(100):
                if os.path.exists(os.path.join(mnt, "f")):
                    return
                time.sleep(0.05)
            sys.exit(f"mount_bench.py: {fsname} did not mount")
        return Config(name, m, lambda mnt: sh(["umount", mnt]))
    return [cfg(FLOOR, os.path.join(args.dir, "fuse_floor"), "fuse_floor"),
            cfg(FUSER_FLOOR, os.path.join(ROOT, "target/release/examples/fuser_floor"), "fuser_floor")]


def daemon_of(mnt):
    """The pid of the process serving `mnt` (the one with it on its
    command line)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if mnt.encode() in argv and b"umount" not in argv and b"mount_bench.py" not in b" ".join(argv):
            return int(pid)
    return None


def daemon_cost(pid):
    """CPU nanoseconds and context switches of all of a process's threads
    so far (schedstat: on-CPU time in ns; status: switches)."""
    cpu = switches = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                cpu += int(f.read().split()[0])
            with open(f"/proc/{pid}/task/{t}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                        switches += int(line.split()[1])
        except OSError:
            pass
    return cpu, switches


# Where the daemon's threads and the workload (or the --floor timer) may
# run: CPU masks for (daemon, workload). "free" leaves both to the
# scheduler; "same" puts both on CPU 0; "split" the daemon on CPU 0 and the
# workload on CPU 1; "daemon0" the daemon on CPU 0 and the workload
# anywhere. On this VM a request that wakes a thread on the other
# vCPU costs tens of microseconds (an idle vCPU halts at once), one on the
# same vCPU a few; "free" is whichever the scheduler chose in that run.
PLACEMENTS = {"free": (None, None), "same": (0x1, 0x1), "split": (0x1, 0x2), "daemon0": (0x1, None)}


def place(pid, mask):
    """Sets the CPU mask of every thread of `pid` (None: all CPUs)."""
    if pid:
        m = mask or (1 << os.cpu_count()) - 1
        sh(["taskset", "-a", "-p", hex(m), str(pid)], stdout=subprocess.DEVNULL)


def rtt(args, cs, roots, n=20000):
    """fstat() round trips through each mount, interleaved, medians, for
    each placement of daemon and timer; and what each daemon spent per
    request (its own CPU time, its context switches) and how often a
    vCPU halted (went idle) per request."""
    timer = os.path.join(args.dir, "fuse_rtt")
    per, cpu, sw, hl = {}, {}, {}, {}
    pids = {c.name: daemon_of(roots[c.name]) for c in cs if c.mount}
    placements = [p for p in args.placements.split(",") if p]
    for rep in range(args.reps + 1):
        for c in cs:
            f = "f" if c.name.startswith("no-work") else "big"
            pid = pids.get(c.name)
            for pl in placements:
                dmask, tmask = PLACEMENTS[pl]
                place(pid, dmask)
                pre = ["taskset", hex(tmask)] if tmask else []
                before = daemon_cost(pid) if pid else None
                h0 = halts()
                out = subprocess.run([*pre, timer, os.path.join(roots[c.name], f), str(n)],
                                     capture_output=True, text=True, check=True).stdout
                h1 = halts()
                after = daemon_cost(pid) if pid else None
                key = (c.name, pl)
                if rep:
                    per.setdefault(key, []).append(float(out))
                    hl.setdefault(key, []).append((h1 - h0) / n)
                    if before:
                        cpu.setdefault(key, []).append((after[0] - before[0]) / n)
                        sw.setdefault(key, []).append((after[1] - before[1]) / n)
            place(pid, None)
    print(f"\nfstat() through each mount ({n:,} calls per round, {args.reps} rounds, medians); "
          f"load {os.getloadavg()[0]:.1f}\n")
    print("| configuration | placement | ns per fstat | over the no-work daemon | daemon CPU ns per request | "
          "daemon context switches per request | vCPU halts per request |\n|---|---|---:|---:|---:|---:|---:|")
    for c in cs:
        for pl in placements:
            key = (c.name, pl)
            m = statistics.median(per[key])
            floor = statistics.median(per[(FLOOR, pl)])
            dc = f"{statistics.median(cpu[key]):,.0f}" if key in cpu else "–"
            ds = f"{statistics.median(sw[key]):.2f}" if key in sw else "–"
            print(f"| {c.name} | {pl} | {m:,.0f} | {m - floor:+,.0f} ns | {dc} | {ds} | "
                  f"{statistics.median(hl[key]):.2f} |")


def halts():
    """How often the vCPUs went idle so far (cpuidle states entered, all
    CPUs): on this VM every idle entry halts the vCPU, and waking one
    costs tens of microseconds."""
    n = 0
    base = "/sys/devices/system/cpu"
    for cpu in os.listdir(base):
        d = os.path.join(base, cpu, "cpuidle")
        if cpu.startswith("cpu") and cpu[3:].isdigit() and os.path.isdir(d):
            for st in os.listdir(d):
                try:
                    with open(os.path.join(d, st, "usage")) as f:
                        n += int(f.read())
                except OSError:
                    pass
    return n


def configs(args, hp, lower):
    prof = lambda n: os.path.join(args.dir, f"prof-{n}.json")

    def fsp(name, extra, untimed=False):
        def m(mnt):
            p = prof(name)
            if os.path.exists(p):
                os.unlink(p)
            sh([fsprof_bin(untimed), "mount", *extra, lower, mnt, "-o", p], stderr=subprocess.DEVNULL)
        return Config(name, m, lambda mnt: sh([fsprof_bin(untimed), "umount", mnt], stderr=subprocess.DEVNULL))

    plain_umount = lambda mnt: sh(["umount", mnt])
    return [
        Config("native"),
        # The default is one worker thread; 2T is the earlier default.
        fsp("fsprof observe-all", []),
        fsp("fsprof observe-all 2T", ["--threads", "2"]),
        fsp("fsprof observe-all untimed", [], untimed=True),
        # Without polling /dev/fuse after each reply: what the polling buys
        # (wall time) and costs (the daemon's CPU time).
        fsp("fsprof observe-all no-poll", ["--busy-poll", "0"]),
        fsp("fsprof fast", ["--fast"]),
        fsp("fsprof fast no-poll", ["--fast", "--busy-poll", "0"]),
        fsp("fsprof fast 2T", ["--fast", "--threads", "2"]),
        # Files opened in the daemon, data ops by kernel passthrough.
        fsp("fsprof fast passthrough", ["--fast", "--passthrough"]),
        Config("bindfs", lambda mnt: sh(["bindfs", lower, mnt]), plain_umount),
        Config("bindfs multithreaded", lambda mnt: sh(["bindfs", "--multithreaded", lower, mnt]), plain_umount),
        # bindfs caches entries and attributes for libfuse's default second;
        # with that off it is asked what observe-all is asked.
        Config("bindfs no cache", lambda mnt: sh(["bindfs", "-o", NO_CACHE, lower, mnt]), plain_umount),
        Config("passthrough_hp", lambda mnt: sh([hp, lower, mnt]), plain_umount),
        Config("passthrough_hp --single", lambda mnt: sh([hp, "--single", lower, mnt]), plain_umount),
        # Without caching (what observe-all does): the like-for-like peer.
        Config("passthrough_hp --nocache", lambda mnt: sh([hp, "--nocache", lower, mnt]), plain_umount),
        Config("passthrough_hp --nocache --single",
               lambda mnt: sh([hp, "--nocache", "--single", lower, mnt]), plain_umount),
    ]


# The CPU mask the workload runs under (taskset prefix; empty: any CPU).
WORKLOAD_CPUS = []


def timed(cmd, **kw):
    t = time.perf_counter()
    subprocess.run([*WORKLOAD_CPUS, *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    return time.perf_counter() - t


def workloads(args):
    meta = os.path.join(args.dir, "mount_meta")
    seq = [0]

    def grep(root):
        return timed(["grep", "-r", "zzqx_no_such_pattern_fsprof", os.path.join(root, "include")])

    def seqread(root):
        return timed(["dd", f"if={os.path.join(root, 'big')}", "of=/dev/null", "bs=1M"])

    def metaops(root):
        # A name no configuration used before: the fast mounts cache entries.
        seq[0] += 1
        d = os.path.join(root, f"meta{os.getpid()}-{seq[0]}")
        os.mkdir(d)
        out = subprocess.run([*WORKLOAD_CPUS, meta, d, "10000"], capture_output=True, text=True,
                             check=True).stdout
        os.rmdir(d)
        return float(out)

    return [("grep -r /usr/include", grep), ("read 1 GiB", seqread), ("10k create+stat+unlink", metaops)]


WORKLOAD_KEYS = {"grep": "grep -r /usr/include", "read": "read 1 GiB", "meta": "10k create+stat+unlink"}
# Workloads run once more, untimed, right before each timed run: warm
# means in the caches now. A page a round left untouched for a minute is
# not (this VM's DAMON pages out page cache idle for 60 s; others drop
# caches), and a mount whose own caches are touched once a round loses
# part of them between rounds: a "warm" --fast read sent 36-122 of its
# 1,024 reads to the daemon again; a --fast grep 100 s after the last
# took 1.13 s instead of ~0.1 s (5,982 reads and 1,074 readdirs again).
# It also keeps the first grep after the metadata rounds from being timed
# (0.17-0.31 s instead of 0.074 s, even after a sync and 6 s of sleep;
# native, first in every round, used to pay it alone).
REWARM = {WORKLOAD_KEYS["read"], WORKLOAD_KEYS["grep"]}


class FuseTrace:
    """Counts FUSE requests per opcode for one connection, from the kernel's
    `fuse:fuse_request_send` tracepoint, in a tracefs instance of our own
    (the global buffer and other users' instances are left alone)."""

    def __init__(self):
        base = "/sys/kernel/tracing"
        if not os.path.exists(os.path.join(base, "events/fuse/fuse_request_send")):
            sys.exit("mount_bench.py --requests: this kernel has no fuse:fuse_request_send tracepoint")
        self.dir = os.path.join(base, "instances", f"fsprof-mount-bench-{os.getpid()}")
        os.mkdir(self.dir)
        self.put("buffer_size_kb", "65536")
        self.ev = os.path.join(self.dir, "events/fuse/fuse_request_send")

    def put(self, rel, value):
        with open(os.path.join(self.dir, rel), "w") as f:
            f.write(value)

    def count(self, mnt, run):
        st = os.stat(mnt)
        conn = (os.major(st.st_dev) << 20) | os.minor(st.st_dev)  # the kernel's dev_t
        self.put("trace", "")
        self.put("events/fuse/fuse_request_send/filter", f"connection == {conn}")
        self.put("events/fuse/fuse_request_send/enable", "1")
        try:
            run()
        finally:
            self.put("events/fuse/fuse_request_send/enable", "0")
        counts = collections.Counter()
        with open(os.path.join(self.dir, "trace")) as f:
            for line in f:
                if "fuse_request_send:" in line and "(FUSE_" in line:
                    counts[line.split("(FUSE_", 1)[1].split(")", 1)[0].lower()] += 1
        lost = 0
        for cpu in os.listdir(os.path.join(self.dir, "per_cpu")):
            with open(os.path.join(self.dir, "per_cpu", cpu, "stats")) as f:
                for line in f:
                    if line.startswith("overrun:"):
                        lost += int(line.split()[1])
        if lost:
            print(f"warning: {lost} trace events lost; counts are low", file=sys.stderr)
        return counts

    def close(self):
        os.rmdir(self.dir)


def requests(cs, roots, ws):
    """One traced run of each workload on each mount; prints the requests
    per opcode."""
    tr = FuseTrace()
    try:
        table = {}
        for wname, w in ws:
            for c in cs:
                if c.mount:
                    table[(c.name, wname)] = tr.count(roots[c.name], lambda: w(roots[c.name]))
    finally:
        tr.close()
    for wname, _ in ws:
        print(f"\n{wname}: FUSE requests the kernel sent (fuse:fuse_request_send)\n")
        print("| configuration | total | by opcode |\n|---|---:|---|")
        for c in cs:
            n = table.get((c.name, wname))
            if n is None:
                continue
            ops = ", ".join(f"{op} {k:,}" for op, k in n.most_common())
            print(f"| {c.name} | {sum(n.values()):,} | {ops} |")


# The workloads' programs as the scheduler names them.
WORKLOAD_COMMS = ("grep", "dd", "mount_meta")


class SchedTrace:
    """sched:sched_switch into a tracefs instance of our own, filtered to
    the workload's programs and one daemon's threads."""

    def __init__(self):
        base = "/sys/kernel/tracing"
        self.dir = os.path.join(base, "instances", f"fsprof-mount-cross-{os.getpid()}")
        os.mkdir(self.dir)
        self.put("buffer_size_kb", "65536")
        self.ev = "events/sched/sched_switch"

    put = FuseTrace.put

    def run(self, pid, run):
        tids = os.listdir(f"/proc/{pid}/task")
        who = [f'next_comm == "{c}"' for c in WORKLOAD_COMMS] + [f"next_pid == {t}" for t in tids]
        self.put("trace", "")
        self.put(f"{self.ev}/filter", " || ".join(who))
        self.put(f"{self.ev}/enable", "1")
        try:
            t = run()
        finally:
            self.put(f"{self.ev}/enable", "0")
        tids = {int(t) for t in tids}
        seq = []  # (is the daemon, vCPU) at each switch-in, in time order
        with open(os.path.join(self.dir, "trace")) as f:
            for line in f:
                if "sched_switch:" not in line or "==> " not in line:
                    continue
                cpu = int(line.split("[", 1)[1].split("]", 1)[0])
                nxt = line.rsplit("==> ", 1)[1]
                npid = int(nxt.split("next_pid=", 1)[1].split()[0])
                seq.append((npid in tids, cpu))
        handoffs = crossed = 0
        for (d0, c0), (d1, c1) in zip(seq, seq[1:]):
            if d0 != d1:
                handoffs += 1
                crossed += c0 != c1
        return t, handoffs, crossed

    def close(self):
        os.rmdir(self.dir)


def crossings(args, cs, roots, ws):
    """For each configuration and placement: of the hand-offs between the
    workload and the daemon (one switches in after the other), how many
    went to the other vCPU. At idle a crossing wakes a halted vCPU (tens of
    microseconds on this VM); on one vCPU none can cross."""
    tr = SchedTrace()
    placements = [p for p in args.placements.split(",") if p]
    res = {}
    try:
        pids = {c.name: daemon_of(roots[c.name]) for c in cs if c.mount}
        for rep in range(args.reps + 1):
            for wname, w in ws:
                for c in cs:
                    pid = pids.get(c.name)
                    if not pid:
                        continue
                    for pl in placements:
                        dmask, wmask = PLACEMENTS[pl]
                        place(pid, dmask)
                        WORKLOAD_CPUS[:] = ["taskset", hex(wmask)] if wmask else []
                        r = tr.run(pid, lambda: w(roots[c.name]))
                        if rep:
                            res.setdefault((c.name, pl, wname), []).append(r)
                    place(pid, None)
            print(f"rep {rep}/{args.reps} done", file=sys.stderr)
    finally:
        WORKLOAD_CPUS[:] = []
        tr.close()
    print(f"\nhand-offs between workload and daemon that changed vCPU (sched:sched_switch; medians of "
          f"{args.reps}); load {os.getloadavg()[0]:.1f}\n")
    print("| configuration | placement | workload | time | hand-offs | crossed vCPU |\n|---|---|---|---:|---:|---:|")
    for c in cs:
        for pl in placements:
            for wname, _ in ws:
                rs = res.get((c.name, pl, wname))
                if not rs:
                    continue
                t = statistics.median(r[0] for r in rs)
                h = statistics.median(r[1] for r in rs)
                x = statistics.median(r[2] / r[1] if r[1] else 0 for r in rs)
                print(f"| {c.name} | {pl} | {wname} | {t:.3f} s | {h:,.0f} | {100 * x:.1f}% |")


def prepare(args, lower):
    inc = os.path.join(lower, "include")
    if not os.path.exists(inc):
        sh(["cp", "-a", "/usr/include", inc])
    big = os.path.join(lower, "big")
    if not os.path.exists(big) or os.path.getsize(big) != 1 << 30:
        sh(["dd", "if=/dev/zero", f"of={big}", "bs=1M", "count=1024", "status=none"])
        sh(["sync"])
    # Native's read speed depends on the folios LOWER's page cache holds the
    # file in (up to 2 MiB after a sequential read, 4 KiB pages after
    # scattered ones; 88% against 93% of native for the same mount): start
    # every run from what a sequential read leaves.
    fd = os.open(big, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    sh(["dd", f"if={big}", "of=/dev/null", "bs=1M", "status=none"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", default=os.path.join(ROOT, "target/mount-bench"))
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated config names")
    ap.add_argument("--workloads", default="grep,read,meta", help="comma-separated: grep, read, meta")
    ap.add_argument("--requests", action="store_true", help="count each daemon's requests instead of timing")
    ap.add_argument("--floor", action="store_true",
                    help="time fstat() round trips through each mount and a no-work daemon instead")
    ap.add_argument("--crossings", action="store_true",
                    help="trace which vCPU the workload and the daemon run on at each hand-off "
                         "instead of timing (sched:sched_switch)")
    ap.add_argument("--folios", action="store_true",
                    help="after the timed runs, print the size of the page-cache folios holding each "
                         "configuration's 1 GiB file (needs the read workload)")
    ap.add_argument("--placements", default="free",
                    help="comma-separated: free (the scheduler's choice), same (daemon and workload "
                         "or timer on CPU 0), split (daemon on CPU 0, workload or timer on CPU 1), "
                         "daemon0 (daemon on CPU 0, workload anywhere)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("mount_bench.py: needs root (FUSE mounts)")
    args.dir = os.path.abspath(args.dir)
    os.makedirs(args.dir, exist_ok=True)
    lower = os.path.join(args.dir, "lower")
    os.makedirs(lower, exist_ok=True)
    build(args)
    hp = peers(args)
    prepare(args, lower)
    only = [x for x in args.only.split(",") if x]
    # Every configuration mounted at once, each at a mount point of its
    # own, and the repetitions interleaved (rep 1 of each configuration,
    # then rep 2 ...): the machine's load drifts (other builds come and
    # go), and interleaving spreads the drift over all configurations
    # instead of charging it to whichever ran last.
    cs = [c for c in configs(args, hp, lower) if not only or c.name in only or c.name == "native"]
    if args.floor:
        build_floor(args)
        cs.extend(floor_configs(args))
    roots, mounted = {}, []
    try:
        for k, c in enumerate(cs):
            if c.mount:
                mnt = os.path.join(args.dir, f"mnt{k}")
                os.makedirs(mnt, exist_ok=True)
                c.mount(mnt)
                mounted.append((c, mnt))
                roots[c.name] = mnt
            else:
                roots[c.name] = lower
        if args.floor:
            rtt(args, cs, roots)
            return
        want = [WORKLOAD_KEYS[k] for k in args.workloads.split(",") if k]
        times, ws = {}, [(n, w) for n, w in workloads(args) if n in want]
        if args.requests:
            for wname, w in ws:
                for c in cs:
                    w(roots[c.name])  # warm-up, as in the timed rounds
            requests(cs, roots, ws)
            return
        if args.crossings:
            crossings(args, cs, roots, ws)
            return
        drops0 = page_cache_drops()
        pids = {c.name: daemon_of(roots[c.name]) for c in cs if c.mount}
        placements = [p for p in args.placements.split(",") if p]
        for rep in range(args.reps + 1):
            for wname, w in ws:
                # Each round starts one configuration further on, so that no
                # configuration always follows the same one. On LOWER's ext4
                # without a journal, a create skips every inode deleted in
                # the last 60-300 s (ialloc.c recently_deleted), so each
                # metadata run paid for the 10,000 files of every run before
                # it in the round: in a fixed order the medians rose with
                # the position (1.19, 2.21, 2.91, 3.72, 4.30 s). The first
                # timed round keeps the given order (the tables' order).
                k = (rep - 1) % len(cs)
                for c in cs[k:] + cs[:k]:
                    pid = pids.get(c.name)
                    for pl in placements:
                        dmask, wmask = PLACEMENTS[pl]
                        place(pid, dmask)
                        WORKLOAD_CPUS[:] = ["taskset", hex(wmask)] if wmask else []
                        name = c.name if pl == "free" else f"{c.name} [{pl}]"
                        if wname in REWARM:
                            w(roots[c.name])
                        before = daemon_cost(pid) if pid else None
                        h0 = halts()
                        t = w(roots[c.name])
                        h1 = halts()
                        if rep:  # rep 0 warms the caches below (and above, where kept)
                            times.setdefault((name, wname), []).append(t)
                            HALTS.setdefault((name, wname), []).append(h1 - h0)
                            if before:
                                after = daemon_cost(pid)
                                DAEMON.setdefault((name, wname), []).append(
                                    ((after[0] - before[0]) / 1e6, after[1] - before[1]))
                    place(pid, None)
            print(f"rep {rep}/{args.reps} done", file=sys.stderr, flush=True)
        if args.folios:
            folio_table(cs, roots)
    finally:
        for c, mnt in mounted:
            c.unmount(mnt)
    drops = page_cache_drops() - drops0
    if drops:
        print(f"warning: the page cache was dropped machine-wide {drops} time(s) during the run "
              "(echo 1|3 > /proc/sys/vm/drop_caches by another process): cached rounds re-read", file=sys.stderr)
    for (c, w), xs in times.items():
        print(f"{c:<28} {w:<24} median {statistics.median(xs):8.3f} s  (min {min(xs):.3f}, max {max(xs):.3f})")
    report(args, times)


def folio_sizes(path):
    """(pages, folios, pages in single-page folios) of the page cache
    holding `path`, from the physical pages its shared mapping shows
    (/proc/self/pagemap, /proc/kpageflags: KPF_COMPOUND_HEAD/TAIL). Mapping
    faults in what is not cached (through the daemon, for a mount)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    page = os.sysconf("SC_PAGE_SIZE")
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"mmap {path}")
        try:
            libc.madvise(addr, size, 22)  # MADV_POPULATE_READ
            n = size // page
            with open("/proc/self/pagemap", "rb") as pm, open("/proc/kpageflags", "rb") as kf:
                pm.seek(addr // page * 8)
                entries = struct.unpack(f"<{n}Q", pm.read(8 * n))
                pfns = [e & ((1 << 55) - 1) for e in entries if e >> 63]
                frames, flags, i = sorted(set(pfns)), {}, 0
                while i < len(frames):  # each run of consecutive frames in one read
                    j = i
                    while j + 1 < len(frames) and frames[j + 1] == frames[j] + 1:
                        j += 1
                    kf.seek(frames[i] * 8)
                    flags.update(zip(frames[i:j + 1], struct.unpack(f"<{j - i + 1}Q", kf.read(8 * (j - i + 1)))))
                    i = j + 1
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    head, tail = 1 << 15, 1 << 16
    folios = sum(1 for p in pfns if not flags[p] & tail)
    single = sum(1 for p in pfns if not flags[p] & (head | tail))
    return len(pfns), folios, single


def folio_table(cs, roots):
    """Where a warm read's time goes besides the copy: one lookup and one
    reference per folio. ext4 keeps a file read sequentially in folios of up
    to 2 MiB; a FUSE mount's page cache here in 4 KiB ones."""
    print("\npage-cache folios holding the 1 GiB file (after the timed runs)\n")
    print("| configuration | pages | folios | mean folio | pages in 4 KiB folios |\n|---|---:|---:|---:|---:|")
    for c in cs:
        pages, folios, single = folio_sizes(os.path.join(roots[c.name], "big"))
        print(f"| {c.name} | {pages:,} | {folios:,} | {pages / max(folios, 1) * 4:,.0f} KiB | "
              f"{100 * single / max(pages, 1):.1f}% |")


def page_cache_drops():
    """How often anyone dropped the page cache since boot (vmstat)."""
    with open("/proc/vmstat") as f:
        for line in f:
            if line.startswith("drop_pagecache "):
                return int(line.split()[1])
    return 0


def ratio(times, c, w):
    """Median over the repetitions of each one's ratio to native's in the
    same round (the load of that moment cancels)."""
    # Against native under the same placement ("X [same]" → "native [same]").
    native = "native" + (c[c.rindex(" ["):] if c.endswith("]") else "")
    a, n = times.get((c, w)), times.get((native, w))
    if not a or not n:
        return None
    return statistics.median(x / y for x, y in zip(a, n))


# (configuration, workload) -> [(daemon CPU ms, daemon context switches)]
# per timed round.
DAEMON = {}
# (configuration, workload) -> [vCPU idle entries (halts) during the round]
HALTS = {}


def table(names, wls, data, cell):
    """A markdown table, a row per configuration with any data, a column
    per workload; `cell` renders one configuration's values for one
    workload."""
    print("| configuration | " + " | ".join(wls) + " |")
    print("|---|" + "---|" * len(wls))
    for c in names:
        cells = [cell(c, w, data[(c, w)]) if data.get((c, w)) else "–" for w in wls]
        if any(x != "–" for x in cells):
            print(f"| {c} | " + " | ".join(cells) + " |")


def report(args, times):
    names, wls = [], []
    for (c, w) in times:
        if c not in names:
            names.append(c)
        if w not in wls:
            wls.append(w)

    def timing(c, w, xs):
        t, r = statistics.median(xs), ratio(times, c, w)
        # The daemon's CPU time beside its wall time: the price of polling.
        d = DAEMON.get((c, w))
        cpu = f", daemon CPU {statistics.median(x[0] for x in d) / 1000:.3f} s" if d else ""
        if w == "read 1 GiB":
            return f"{1024 / t:,.0f} MiB/s ({100 / r:.0f}% of native){cpu}"
        return f"{t:.3f} s ({r:.2f}×){cpu}"

    def daemon(c, w, xs):
        cpu = statistics.median(x[0] for x in xs)
        sw = statistics.median(x[1] for x in xs)
        return f"{cpu:,.1f} ms CPU, {sw:,.0f} switches"

    print()
    table(names, wls, times, timing)
    print("\nthe daemon's own CPU time and context switches per run (medians; /proc/PID/task/*/schedstat, status)\n")
    table(names, wls, DAEMON, daemon)
    print("\nvCPU halts per run (idle entries of all CPUs, /sys/devices/system/cpu/cpu*/cpuidle; medians): "
          "each is a wake-up of a halted vCPU to come\n")
    table(names, wls, HALTS, lambda c, w, xs: f"{statistics.median(xs):,.0f}")
    polling(args, names)
    overhead(args, {k: statistics.median(v) for k, v in times.items()})


def polling(args, names):
    """What each fsprof mount's busy polling found over the whole run
    (all workloads and placements, warm-ups included; from its profile)."""
    rows = []
    for c in names:
        p = os.path.join(args.dir, f"prof-{c}.json")
        if not c.startswith("fsprof") or c.endswith("]") or not os.path.exists(p):
            continue
        s = json.load(open(p))["meta"]["settings"]
        if "busy poll" in s:
            found, blocked = int(s["requests found by polling"]), int(s["requests found by blocking reads"])
            share = 100 * found / max(found + blocked, 1)
            gave = int(s.get("busy polls given up for other tasks", 0))
            rows.append(f"| {c} | {s['busy poll']} | {found:,} | {blocked:,} | {share:.1f}% | {gave:,} |")
    if rows:
        print("\nbusy polling over the whole run (the profiles' settings; the last setting seen)\n")
        print("| configuration | busy poll | requests found by polling | by blocking reads | share | "
              "polls given up for other tasks |\n|---|---|---:|---:|---:|---:|")
        print("\n".join(rows))


def overhead(args, results):
    """The timing's cost per request, two ways."""
    p = os.path.join(args.dir, "prof-fsprof observe-all.json")
    # The file outlives the run: only this run's profile is reported.
    if not any(c == "fsprof observe-all" for c, _ in results) or not os.path.exists(p):
        return
    prof = json.load(open(p))
    layer = next(l for l in prof["layers"] if l["name"] == "fusefs")
    calls = sum(o["post"] for o in layer["ops"])
    total = sum(o["total_ns"] for o in layer["ops"])
    per_call = prof["meta"]["overhead"]["per_call_ns"]
    print(f"\nprofile of the observe-all runs: {calls:,} requests, mean daemon time {total / calls / 1000:.2f} µs; "
          f"measured timing cost {per_call:.1f} ns per request = {per_call / (total / calls) * 100:.2f}% of it")
    for w in ["grep -r /usr/include", "10k create+stat+unlink"]:
        a, b = results.get(("fsprof observe-all", w)), results.get(("fsprof observe-all untimed", w))
        if a and b:
            print(f"timed vs untimed build, {w}: {a:.3f} s vs {b:.3f} s ({(a / b - 1) * 100:+.1f}%)")


if __name__ == "__main__":
    main()
