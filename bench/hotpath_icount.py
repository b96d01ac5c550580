#!/usr/bin/env python3
"""The instructions each of the shim's wrappers runs per call, counted
exactly (valgrind's callgrind, --dump-instr=yes) while bench/hotpath_calls.c
makes N calls of each kind under `fsprof run`, and the wrapper's hot path:
every instruction that ran on (nearly) every call, with the disassembly of
the shim that `fsprof run` installed. Counts are instructions, not time: an
rdtsc counts as one (it is about 10 ns here, bench/hotpath_parts.c).

usage: bench/hotpath_icount.py [--fsprof PATH] [--calls N] [--listing]
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# wrapper: calls of it per N (read: the read with data and the one at the end)
WRAPPERS = {"pread": 1, "fstat": 1, "openat": 1, "read": 2, "close": 1}
HELPERS = ["fsprof_fd_opened", "fsprof_fd_classify", "fsprof_own_fire", "fsprof_own_file"]


def disassembly(so):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", so], capture_output=True,
                         text=True, check=True).stdout
    dis = {}
    for line in out.splitlines():
        m = re.match(r"\s+([0-9a-f]+):\s+(.*)", line)
        if m:
            dis[int(m.group(1), 16)] = m.group(2).strip()
    return dis


def counts(cg_file):
    """{(object, function): {address: instructions run}} from a callgrind file."""
    names, res = {}, {}
    ob = fn = None
    addr, skip = 0, False

    def name(kind, s):
        m = re.match(r"\((\d+)\)(?: (.*))?", s)
        if m.group(2) is not None:
            names[(kind, m.group(1))] = m.group(2)
        return names.get((kind, m.group(1)), "")

    for line in open(cg_file):
        line = line.rstrip("\n")
        key, _, val = line.partition("=")
        if key in ("ob", "cob"):
            v = name("ob", val)
            if key == "ob":
                ob = v
            continue
        if key in ("fn", "cfn"):
            v = name("fn", val)
            if key == "fn":
                fn = v
            continue
        if key in ("fl", "fi", "fe", "cfi", "cfl"):
            continue
        if key == "calls":
            skip = True  # the next line is the call's inclusive cost
            continue
        m = re.match(r"(0x[0-9a-f]+|[+-]\d+|\*)\s+\S+\s+(\d+)$", line)
        if not m:
            continue
        a = m.group(1)
        if a.startswith("0x"):
            addr = int(a, 16)
        elif a != "*":
            addr += int(a)
        if skip:
            skip = False
            continue
        d = res.setdefault((ob, fn), {})
        d[addr] = d.get(addr, 0) + int(m.group(2))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsprof", default=os.path.join(ROOT, "target/release/fsprof"))
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--listing", action="store_true", help="print each wrapper's hot path")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="fsprof-icount-")
    exe, cg = os.path.join(tmp, "hotpath_calls"), os.path.join(tmp, "cg.out")
    subprocess.run(["cc", "-O2", "-o", exe, os.path.join(ROOT, "bench/hotpath_calls.c")],
                   check=True)
    subprocess.run([args.fsprof, "run", "-q", "-f", "-o", os.path.join(tmp, "p.json"), "--",
                    "valgrind", "-q", "--tool=callgrind", "--dump-instr=yes",
                    f"--callgrind-out-file={cg}", exe, str(args.calls)], check=True)
    res = counts(cg)
    shims = {ob for ob, _ in res if ob and "libfsprof_shim" in ob}
    if len(shims) != 1:
        sys.exit(f"expected one shim object in the profile of the run, found {shims}")
    shim = shims.pop()
    dis = disassembly(shim)
    n = args.calls
    print(f"# instructions per call in the shim ({shim}), {n} calls of each kind")
    for f, per in WRAPPERS.items():
        c = res.get((shim, f), {})
        calls = n * per
        hot = sorted(a for a, k in c.items() if k >= calls * 0.9)
        rdtsc = sum(1 for a in hot if dis.get(a, "").startswith("rdtsc"))
        print(f"{f:<8} {sum(c.values()) / calls:7.1f} per call, {len(hot)} on the hot path "
              f"({rdtsc} rdtsc)")
        if args.listing:
            for a in hot:
                print(f"    {a:7x} {c[a] / calls:5.2f}  {dis.get(a, '?')}")
    for f in HELPERS:
        c = res.get((shim, f), {})
        if c:
            print(f"{f:<18} {sum(c.values()) / n:7.2f} per {n} calls of each kind")
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
