#!/usr/bin/env python3
"""fsprof mount against native access and its peers, side by side in one run.

Workloads (each repeated, medians): a warm `grep -r` over a copy of
/usr/include, a sequential read of a 1 GiB file (LOWER's page cache warm),
and create+stat+unlink of 10,000 files (bench/mount_meta.c).

Configurations: native (LOWER itself), `fsprof mount` --observe-all and
--fast with the default threads and with one, the same daemon built with
timing compiled out (`--features fsprof-fuse/untimed`), bindfs (Debian;
single-threaded by default, and --multithreaded), and libfuse's
passthrough_hp (default threads and --single, each with its default day-long
entry/attribute caching and with --nocache, like observe-all), built from
Debian's fuse3 source package (`apt-get source fuse3`, never committed).

All configurations are mounted at once (each at a mount point of its own)
and the repetitions are interleaved; ratios are medians of each round's
ratio to native in the same round.

Needs root. Usage:
  bench/mount_bench.py [--reps 5] [--dir target/mount-bench] [--skip-build]
Prints a table of medians and ratios to native, then the per-request
overhead of the timing (timed vs untimed build, and as the profile
measures it).
"""
import argparse
import json
import os
import shutil
import statistics
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


class Config:
    def __init__(self, name, mount=None, unmount=None):
        self.name, self.mount, self.unmount = name, mount, unmount


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
        fsp("fsprof observe-all", []),
        fsp("fsprof observe-all 1T", ["--threads", "1"]),
        fsp("fsprof observe-all untimed", [], untimed=True),
        fsp("fsprof fast", ["--fast"]),
        fsp("fsprof fast 1T", ["--fast", "--threads", "1"]),
        Config("bindfs", lambda mnt: sh(["bindfs", lower, mnt]), plain_umount),
        Config("bindfs multithreaded", lambda mnt: sh(["bindfs", "--multithreaded", lower, mnt]), plain_umount),
        Config("passthrough_hp", lambda mnt: sh([hp, lower, mnt]), plain_umount),
        Config("passthrough_hp --single", lambda mnt: sh([hp, "--single", lower, mnt]), plain_umount),
        # Without caching (what observe-all does): the like-for-like peer.
        Config("passthrough_hp --nocache", lambda mnt: sh([hp, "--nocache", lower, mnt]), plain_umount),
        Config("passthrough_hp --nocache --single",
               lambda mnt: sh([hp, "--nocache", "--single", lower, mnt]), plain_umount),
    ]


def timed(cmd, **kw):
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
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
        out = subprocess.run([meta, d, "10000"], capture_output=True, text=True, check=True).stdout
        os.rmdir(d)
        return float(out)

    return [("grep -r /usr/include", grep), ("read 1 GiB", seqread), ("10k create+stat+unlink", metaops)]


def prepare(args, lower):
    inc = os.path.join(lower, "include")
    if not os.path.exists(inc):
        sh(["cp", "-a", "/usr/include", inc])
    big = os.path.join(lower, "big")
    if not os.path.exists(big) or os.path.getsize(big) != 1 << 30:
        sh(["dd", "if=/dev/zero", f"of={big}", "bs=1M", "count=1024", "status=none"])
        sh(["sync"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", default=os.path.join(ROOT, "target/mount-bench"))
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated config names")
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
        times, ws = {}, workloads(args)
        for rep in range(args.reps + 1):
            for wname, w in ws:
                for c in cs:
                    t = w(roots[c.name])
                    if rep:  # rep 0 warms the caches below (and above, where kept)
                        times.setdefault((c.name, wname), []).append(t)
            print(f"rep {rep}/{args.reps} done", file=sys.stderr, flush=True)
    finally:
        for c, mnt in mounted:
            c.unmount(mnt)
    for (c, w), xs in times.items():
        print(f"{c:<28} {w:<24} median {statistics.median(xs):8.3f} s  (min {min(xs):.3f}, max {max(xs):.3f})")
    report(args, times)


def ratio(times, c, w):
    """Median over the repetitions of each one's ratio to native's in the
    same round (the load of that moment cancels)."""
    a, n = times.get((c, w)), times.get(("native", w))
    if not a or not n:
        return None
    return statistics.median(x / y for x, y in zip(a, n))


def report(args, times):
    names, wls = [], []
    for (c, w) in times:
        if c not in names:
            names.append(c)
        if w not in wls:
            wls.append(w)
    print("\n| configuration | " + " | ".join(wls) + " |")
    print("|---|" + "---|" * len(wls))
    for c in names:
        cells = []
        for w in wls:
            xs = times.get((c, w))
            r = ratio(times, c, w)
            if not xs:
                cells.append("–")
                continue
            t = statistics.median(xs)
            if w == "read 1 GiB":
                cells.append(f"{1024 / t:,.0f} MiB/s ({100 / r:.0f}% of native)")
            else:
                cells.append(f"{t:.3f} s ({r:.2f}×)")
        print(f"| {c} | " + " | ".join(cells) + " |")
    overhead(args, {k: statistics.median(v) for k, v in times.items()})


def overhead(args, results):
    """The timing's cost per request, two ways."""
    p = os.path.join(args.dir, "prof-fsprof observe-all.json")
    if not os.path.exists(p):
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
