#!/usr/bin/env python3
"""Where the floor of the shim's design (bench/shim_floor.c) spends what it
adds to a short process over an empty preloaded library: variants of the
floor that each leave one part out or do it another way, interleaved by
round with bare and the empty library as bench/per_process_cpu.py does
(same drivers, same medians and intervals; read its docstring).

  floor           the floor: exported wrappers, each finding its real
                  function at its first call as the shim does (its own
                  lookup of what dlsym(RTLD_NEXT) returns, shim/nextsym.c)
                  and timing it into a counter in a shared file mapped by
                  the constructor
  floor, unset    the same without the file: nothing mapped or counted,
                  the wrappers still bound and resolving
  hidden          the same library with nothing exported (-DFLOOR_HIDDEN):
                  no program binds to it, its constructor still opens and
                  maps the file; "hidden, unset" without the file: the
                  library's load and size alone
  dlsym           the floor, each real function found by dlsym(RTLD_NEXT)
                  (the shim's way until the tenth session)
  libc handle     the floor, each real function found by dlsym on a handle
                  of libc.so.6 taken once (misses a later preload: a cost,
                  not a design)
  now             the floor linked with -z now (its few imports bound at
                  load, not at their first call)

Printed as per_process_cpu.py prints, with the parts as paired
differences: floor - floor, unset (the file, its pages and the counting),
floor, unset - hidden, unset (the wrappers bound and resolved), hidden,
unset - empty.so (a library of this size and its constructor), hidden -
hidden, unset (the file's open and map), and each resolution against
the floor's.

usage: python3 bench/floor_parts.py [--rounds N] [--only cat,loop,xargs-short] [--fsprof PATH]
          [--fifo] [--variants "NAME;..."]
"""
import argparse
import os
import random
import shutil
import sys
import tempfile
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import per_process  # noqa: E402
import per_process_cpu as ppc  # noqa: E402

# name -> (defines and link flags, with the counter file)
PARTS = {
    "floor": ((), True),
    "floor, unset": ((), False),
    "hidden": (("-DFLOOR_HIDDEN",), True),
    "hidden, unset": (("-DFLOOR_HIDDEN",), False),
    "dlsym": (("-DFLOOR_RESOLVE_DLSYM",), True),
    "libc handle": (("-DFLOOR_RESOLVE_HANDLE",), True),
    "now": (("-Wl,-z,now",), True),
}

PAIRS = [("floor", "floor, unset"), ("floor, unset", "hidden, unset"), ("hidden, unset", "empty.so"),
         ("hidden", "hidden, unset"), ("dlsym", "floor"), ("floor", "libc handle"), ("floor", "now")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--loop", type=int, default=4, help="cats in a loop sample")
    ap.add_argument("--only", default="cat,loop,xargs-short")
    ap.add_argument("--fsprof", default=os.path.join(per_process.ROOT, "target/release/fsprof"))
    ap.add_argument("--settle", type=float, default=8.0)
    ap.add_argument("--fifo", action="store_true")
    ap.add_argument("--variants", default=";".join(PARTS), help="which of the floor's variants, separated by ;")
    args = ap.parse_args()
    if not os.access(args.fsprof, os.X_OK):
        sys.exit(f"{args.fsprof} not found: cargo build --release")
    chosen = args.variants.split(";")
    for v in chosen:
        if v not in PARTS:
            sys.exit(f"unknown variant {v!r}: one of {', '.join(PARTS)}")
    bash = shutil.which("bash")
    tmp = tempfile.mkdtemp(prefix="fsprof-floor-parts-")
    files = []
    drivers = {}
    try:
        empty = os.path.join(tmp, "empty.so")
        with open(os.path.join(tmp, "empty.c"), "w") as f:
            f.write("void fsprof_bench_empty(void) {}\n")
        ppc.subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", empty, os.path.join(tmp, "empty.c")],
                           check=True)
        shim = per_process.installed_shim(args.fsprof, tmp)
        run = ppc.RUN_ENV
        vs = {"bare": (None, {}, ["LD_PRELOAD", run]), "empty.so": (None, {"LD_PRELOAD": empty}, [run])}
        for i, name in enumerate(chosen):
            defines, with_file = PARTS[name]
            lib, counters = ppc.build_floor(shim, tmp, defines=defines, tag=f"_{i}")
            files.append(counters)
            env = {"LD_PRELOAD": lib}
            if with_file:
                env["FSPROF_FLOOR"] = counters
            vs[name] = (None, env, [run])
        drivers[""] = ppc.Driver(args.fsprof, tmp, "", args.fifo)
        pairs = [p for p in PAIRS if p[0] in vs and p[1] in vs]
        opts = SimpleNamespace(loop=args.loop, settle=args.settle, rounds=args.rounds, fsprof=args.fsprof,
                               pair=pairs, counts=False)
        load = open("/proc/loadavg").read().split()[:3]
        print(f"# the floor's parts; load before {' '.join(load)}{', SCHED_FIFO' if args.fifo else ''}")
        for name in args.only.split(","):
            ppc.run_workload(opts, tmp, name, drivers, vs, bash)
        print(f"\n# load after {' '.join(open('/proc/loadavg').read().split()[:3])}")
    finally:
        for d in drivers.values():
            d.close()
        for f in files:
            os.unlink(f)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    random.seed(27)
    main()
