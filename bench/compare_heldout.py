#!/usr/bin/env python3
"""compare's single-run rates, per group of pools, for one build or two
(issue 24 §1): a rule chosen on some pools is measured on pools it was
not chosen on.

Reads pools made by bench/compare_rates.py (nothing is run but `fsprof
compare`) and pairs their runs as bench/compare_floor.py does, over the
whole pool: identical pairs are baseline runs 2i and 2i+1, slowed pairs
baseline run 2i against slowed run i of an op (made between them). A pair
of identical runs is flagged when compare exits 1 (with the new build's
default `--fail-on slower`, when something got slower; `--new-args
'--fail-on any'` for a change either way); a slowdown is found when
compare flags the slowed op. Each group is a comma-separated list of
pools; `--other OLD` gives the same figures for another build, side by
side, on the same pairs.

usage: bench/compare_heldout.py --fsprof NEW [--other OLD]
           --group chosen=POOL,POOL --group held-out=POOL,POOL ...
"""
import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import compare_pools

ap = argparse.ArgumentParser()
ap.add_argument("--fsprof", default="target/release/fsprof")
ap.add_argument("--other", default=None, help="a second build, compared on the same pairs")
ap.add_argument("--new-args", default="",
                help="extra compare arguments for the new build only (--new-args='--fail-on any')")
ap.add_argument("--group", action="append", required=True, help="NAME=POOL,POOL,...")
ap.add_argument("--workloads", default="meta,read,procs")
ap.add_argument("--three", action="store_true",
                help="three runs a side, compare_rates.py's sets, instead of single pairs")
ap.add_argument("--jobs", type=int, default=2)
ARGS = ap.parse_args()

def verdict(build, pair):
    fsprof, extra = build
    _, op, a, b = pair
    a, b = ([a], [b]) if isinstance(a, str) else (a, b)
    p = subprocess.run([fsprof, "compare", "--format", "json"] + extra + a + ["--vs"] + b,
                       capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit(f"compare failed: {p.stderr}")
    if op is None:
        return p.returncode == 1
    return any(o["op"] == op and o["interesting"] for o in json.loads(p.stdout)["comparison"]["ops"])


def rates(fsprof, ps):
    with ThreadPoolExecutor(ARGS.jobs) as ex:
        got = list(ex.map(lambda p: verdict(fsprof, p), ps))
    ident = [g for (kind, _, _, _), g in zip(ps, got) if kind == "identical"]
    slowed = [g for (kind, _, _, _), g in zip(ps, got) if kind == "slowed"]
    return sum(ident), len(ident), sum(slowed), len(slowed)


def pct(k, n):
    return f"{k}/{n} = {100.0 * k / n:.1f}%" if n else "-"


def main():
    builds = [("new", (os.path.abspath(ARGS.fsprof), ARGS.new_args.split()))]
    if ARGS.other:
        builds.insert(0, ("old", (os.path.abspath(ARGS.other), [])))
    for name, (path, extra) in builds:
        print(f"# {name}: {path} {' '.join(extra)}")
    print("| group | workload | build | identical flagged | 2x found |")
    print("|---|---|---|---|---|")
    for g in ARGS.group:
        name, pools = g.split("=", 1)
        for w in ARGS.workloads.split(","):
            of = compare_pools.sets if ARGS.three else compare_pools.pairs
            ps = [p for pool in pools.split(",") for p in of(pool, w)]
            for b, path in builds:
                fp, n_id, found, n_sl = rates(path, ps)
                print(f"| {name} | {w} | {b} | {pct(fp, n_id)} | {pct(found, n_sl)} |")


if __name__ == "__main__":
    main()
