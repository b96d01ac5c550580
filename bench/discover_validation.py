#!/usr/bin/env python3
"""The validation table of `fsprof discover` (docs/discovery.md): real
loop-mounted images (loop devices with direct I/O), each parameter
discovered by the CLI and compared with a ground truth fsprof did not
compute: the mkfs block size, the read-ahead set with `blockdev --setra`
(for btrfs, which reads ahead through a bdi of its own, that bdi's
read_ahead_kb), ext2's 12 direct pointers, a memory cgroup's limit.

Caches are emptied by remounting the image (`--device` is given). Prints a
Markdown table: expected, discovered, what the kernel states, whether they
agree, confidence, iterations and run time of that discovery.

Needs root, mkfs.ext2/ext4/xfs/btrfs, losetup, blockdev and a release
build (cargo build --release).

usage: python3 bench/discover_validation.py [--iterations N] [--only FS]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FSPROF = os.environ.get("FSPROF", os.path.join(ROOT, "target/release/fsprof"))


def sh(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


class Image:
    def __init__(self, fs, mkfs, mib):
        self.dir = tempfile.mkdtemp(prefix="fsprof-discover-bench-", dir="/var/tmp")
        img = os.path.join(self.dir, "image")
        with open(img, "wb") as f:
            f.truncate(mib << 20)
        sh(f"mkfs.{fs}", *mkfs, img)
        self.dev = sh("losetup", "--find", "--show", "--direct-io=on", img)
        self.mnt = os.path.join(self.dir, "mnt")
        os.mkdir(self.mnt)
        sh("mount", self.dev, self.mnt)

    def close(self):
        subprocess.run(["umount", self.mnt])
        subprocess.run(["losetup", "-d", self.dev])
        subprocess.run(["rm", "-rf", self.dir])


def discover(img, what, iterations, extra=()):
    out = os.path.join(img.dir, "r.json")
    if os.path.exists(out):
        os.unlink(out)
    cmd = [FSPROF, "discover", img.mnt, "--device", img.dev, "--what", what, "-q", "-o", out, *extra]
    if iterations:
        cmd += ["--iterations", str(iterations)]
    t = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t
    r = json.load(open(out))
    return r["findings"][0], wall, r["cold_cache"]


def size(v):
    if v is None:
        return "–"
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if v < 1024 or unit == "GiB":
            return f"{v:g} {unit}" if unit == "B" else f"{v:.4g} {unit}"
        v /= 1024


def shown(f):
    if f["status"] == "not-applicable":
        return "not applicable: " + f["reason"].split(" (")[0]
    if f["status"] == "inconclusive":
        return "inconclusive"
    return str(f["value"]) if f["unit"] == "blocks" else size(f["value"])


def row(fs, setting, f, expected, ok, wall, cold):
    kernel = f.get("kernel") or []
    k = kernel[0]["value"] if kernel else None
    ks = "–" if k is None else (str(k) if f["unit"] == "blocks" else size(k))
    conf = (f.get("confidence") or {}).get("level", "–")
    exp = expected if isinstance(expected, str) else (str(expected) if f["unit"] == "blocks" else size(expected))
    print(f"| {fs} | {f['parameter']} | {setting} | {exp} | {shown(f)} | {ks} | {'yes' if ok else '**NO**'} "
          f"| {conf} | {f['iterations']} | {f['run_time_ns'] / 1e9:.1f} s ({cold}) |", flush=True)
    return ok


def within(found, expected, tol):
    return found is not None and abs(found - expected) <= tol


CASES = [
    # fs, mkfs args, MiB, block size, direct blocks (None: not applicable)
    ("ext2", ["-q", "-F", "-b", "1024"], 256, 1024, 12),
    ("ext2", ["-q", "-F", "-b", "2048"], 256, 2048, 12),
    ("ext2", ["-q", "-F", "-b", "4096"], 256, 4096, 12),
    ("ext4", ["-q", "-F", "-b", "1024"], 256, 1024, None),
    ("ext4", ["-q", "-F", "-b", "4096"], 256, 4096, None),
    ("xfs", ["-q", "-f", "-b", "size=4096"], 512, 4096, None),
    ("btrfs", ["-q", "-f", "-s", "4096"], 256, 4096, None),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=None, help="override every method's default")
    ap.add_argument("--only", default=None, help="only this file system")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (loop devices, mounts, cgroups)")
    if not os.access(FSPROF, os.X_OK):
        sys.exit(f"{FSPROF} not found: run cargo build --release")
    print(f"{time.strftime('%Y-%m-%d')}, kernel {os.uname().release}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}; command: python3 bench/discover_validation.py"
          + (f" --iterations {a.iterations}" if a.iterations else ""))
    print()
    print("| fs | parameter | setting | expected | discovered | kernel says | agrees | confidence | iterations | time (cold cache) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ok = True
    for fs, mkfs, mib, block, direct in CASES:
        if a.only and fs != a.only:
            continue
        img = Image(fs, mkfs, mib)
        setting = " ".join(mkfs[2:])
        try:
            f, wall, cold = discover(img, "block-size", a.iterations)
            ok &= row(fs, f"mkfs {setting}", f, block, f["value"] == block, wall, cold)
            f, wall, cold = discover(img, "direct-blocks", a.iterations)
            if direct is None:
                ok &= row(fs, f"mkfs {setting}", f, "not applicable", f["status"] == "not-applicable", wall, cold)
            else:
                ok &= row(fs, f"mkfs {setting}", f, direct, f["value"] == direct, wall, cold)
            for sectors in (256, 1024):
                sh("blockdev", "--setra", str(sectors), img.dev)
                f, wall, cold = discover(img, "readahead", a.iterations)
                if fs == "btrfs":
                    # btrfs reads ahead through its own bdi (at least 4 MiB),
                    # whatever the loop device's setting.
                    expected = f["kernel"][0]["value"] if f.get("kernel") else None
                    setting_ra = f"setra {sectors} (btrfs bdi)"
                else:
                    expected = sectors * 512
                    setting_ra = f"setra {sectors}"
                good = expected is not None and within(f.get("value"), expected, 4096)
                ok &= row(fs, setting_ra, f, expected, good, wall, cold)
                if fs == "btrfs":
                    break
        finally:
            img.close()
    if not a.only or a.only == "ext4":
        img = Image("ext4", ["-q", "-F"], 512)
        try:
            for limit in (64, 128):
                f, wall, cold = discover(img, "page-cache", a.iterations, ["--cgroup-limit", f"{limit}M"])
                good = within(f.get("value"), limit << 20, 0.15 * (limit << 20))
                ok &= row("ext4", f"cgroup {limit} MiB", f, limit << 20, good, wall, cold)
        finally:
            img.close()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
