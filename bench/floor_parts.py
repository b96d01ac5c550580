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
  no prefork      the floor without finding, before a process's first
                  fork, the functions a forked child calls before it execs
                  (the shim's before_fork_in_parent): each child finds its
                  own; "dlsym, no prefork" both (the floor until the tenth
                  session)
  libc handle     the floor, each real function found by dlsym on a handle
                  of libc.so.6 taken once (misses a later preload: a cost,
                  not a design)
  now             the floor linked with -z now (its few imports bound at
                  load, not at their first call)
  separate code   the floor linked as a library is by default (-z
                  separate-code: the headers, code and constants each a
                  segment of their own), not as the shim is (build.rs's
                  LINK_FLAGS, shim/layout.ld: one read-only executable
                  segment, the constants before the code)

Printed as per_process_cpu.py prints, with the parts as paired
differences: floor - floor, unset (the file, its pages and the counting),
floor, unset - hidden, unset (the wrappers bound and resolved), hidden,
unset - empty.so (a library of this size and its constructor), hidden -
hidden, unset (the file's open and map), and each resolution against
the floor's.

--resolve-cost N: instead, N fresh `cat`s a mode (interleaved) preloaded
with bench/resolve_cost.c, which times finding the real functions of the
eight wrappers a `cat` calls, cold, with the shim's own lookup and with
dlsym(RTLD_NEXT): the medians and quartiles in us (TSC ticks over the
TSC rate from /proc/cpuinfo's "cpu MHz", this VM's constant TSC).

usage: python3 bench/floor_parts.py [--rounds N] [--only cat,loop,xargs-short] [--fsprof PATH]
          [--fifo] [--variants "NAME;..."] [--resolve-cost N]
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
    "no prefork": (("-DFLOOR_NO_PREFORK",), True),
    "dlsym, no prefork": (("-DFLOOR_RESOLVE_DLSYM", "-DFLOOR_NO_PREFORK"), True),
    "libc handle": (("-DFLOOR_RESOLVE_HANDLE",), True),
    "now": (("-Wl,-z,now",), True),
    "separate code": ((ppc.DEFAULT_LINK,), True),
}

PAIRS = [("floor", "floor, unset"), ("floor, unset", "hidden, unset"), ("hidden, unset", "empty.so"),
         ("hidden", "hidden, unset"), ("dlsym", "floor"), ("no prefork", "floor"), ("dlsym, no prefork", "floor"), ("floor", "libc handle"), ("floor", "now"),
         ("separate code", "floor")]


def resolve_cost(n):
    """bench/resolve_cost.c in n fresh `cat`s per mode, interleaved."""
    tmp = tempfile.mkdtemp(prefix="fsprof-resolve-cost-")
    try:
        lib = os.path.join(tmp, "resolve_cost.so")
        ppc.subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-I",
                            os.path.join(per_process.ROOT, "crates/fsprof-shim/shim"), "-o", lib,
                            os.path.join(per_process.ROOT, "bench/resolve_cost.c"), "-ldl"], check=True)
        mhz = float(next(ln.split(":")[1] for ln in open("/proc/cpuinfo") if ln.startswith("cpu MHz")))
        cat = shutil.which("cat")
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", ppc.RUN_ENV)}
        env["LD_PRELOAD"] = lib
        us = {"own": [], "dlsym": []}
        for _ in range(n):
            for mode in us:
                r = ppc.subprocess.run([cat, "/dev/null"], env=dict(env, RC_MODE=mode), capture_output=True,
                                       text=True, check=True)
                ticks, found = r.stderr.split()
                assert found == "1", r.stderr
                us[mode].append(int(ticks) / mhz)
        print(f"# finding the 8 real functions of a cat, cold, {n} processes a mode; load "
              f"{' '.join(open('/proc/loadavg').read().split()[:3])}")
        for mode, v in us.items():
            v.sort()
            print(f"{mode:<6} median {v[n // 2]:6.2f} us  quartiles [{v[n // 4]:.2f}, {v[3 * n // 4]:.2f}]")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--loop", type=int, default=4, help="cats in a loop sample")
    ap.add_argument("--only", default="cat,loop,xargs-short")
    ap.add_argument("--fsprof", default=os.path.join(per_process.ROOT, "target/release/fsprof"))
    ap.add_argument("--settle", type=float, default=8.0)
    ap.add_argument("--fifo", action="store_true")
    ap.add_argument("--variants", default=";".join(PARTS), help="which of the floor's variants, separated by ;")
    ap.add_argument("--resolve-cost", type=int, metavar="N", help="time finding real functions instead")
    args = ap.parse_args()
    if args.resolve_cost:
        resolve_cost(args.resolve_cost)
        return
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
