#!/usr/bin/env python3
"""How well can any verdict on ONE run a side do? (issue 24 §1)

Reads pools made by bench/compare_rates.py (--pool DIR; nothing is run but
`fsprof compare`) and pairs their runs as that script does, over the whole
pool: identical pairs are baseline runs 2i and 2i+1, slowed pairs baseline
run 2i against slowed run i of an op (made between them). Two tables:

- the ROC of compare's own verdict with its one free parameter, the
  assumed spread between runs (`--spread S`), varied: per workload, the
  identical pairs flagged (exit 1) and the slowed ops found (flagged);
- the floor of any test that looks at an op's change the way compare
  measures it: an op's shift in powers of two beyond the profile shift
  (`effect`) and the share of its layer's latency the change moves
  (`moved`). For every pair of thresholds (e, m) an identical pair is
  flagged when some op has |effect| >= e and moved >= m, a slowed pair is
  found when the slowed op has; the table gives, per workload, the fewest
  identical pairs flagged at which at least 95% of the slowdowns are still
  found (with --fail-on slower, the default, only changes that made an
  op slower count, as compare's gate). A change between identical runs
  that is as large as a 2x
  slowdown in both figures cannot be told from one by one run a side.
  The row "moved <= 5%" keeps the share threshold at or under the 5% the
  target is about: a test that must find a 2x slowdown of any op holding
  5% of the latency cannot ask a change to move more than that (the
  bench's slowed ops hold more, so thresholds above it look better here
  than they would be).

usage: bench/compare_floor.py [--fsprof PATH] [--spreads 0.12,0.15,...] [--fail-on slower|any] POOL...
"""
import argparse
import glob
import json
import os
import subprocess
import sys

import compare_pools

ap = argparse.ArgumentParser()
ap.add_argument("pools", nargs="+")
ap.add_argument("--fsprof", default="target/release/fsprof")
ap.add_argument("--workloads", default="meta,read,procs")
ap.add_argument("--spreads", default="0.12,0.15,0.18,0.20,0.22,0.25,0.30")
ap.add_argument("--target", type=float, default=0.95, help="detection the floor must keep")
ap.add_argument("--fail-on", default="slower", choices=["slower", "any"],
                help="the gate's direction: slower counts only changes that made an op slower")
ARGS = ap.parse_args()
FSPROF = os.path.abspath(ARGS.fsprof)


def pairs(w):
    """(kind, slowed op or None, A, B) over every pool."""
    for pool in ARGS.pools:
        yield from compare_pools.pairs(pool, w)


def compare(a, b, extra):
    p = subprocess.run([FSPROF, "compare", "--format", "json"] + extra + [a, "--vs", b],
                       capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit(f"compare failed: {p.stderr}")
    return p.returncode, json.loads(p.stdout)["comparison"]["ops"]


def sizes(ops):
    """op -> (|effect|, moved) of its largest check; with --fail-on slower,
    of its largest check that found it slower (a gate on regressions does
    not act on a faster op)."""
    out = {}
    for o in ops:
        for c in o.get("checks", []):
            if ARGS.fail_on == "slower" and c["effect"] <= 0:
                continue
            e, m = abs(c["effect"]), abs(c["moved"])
            if o["op"] not in out or e > out[o["op"]][0]:
                out[o["op"]] = (e, m)
    return out


def floor(ident, slowed, cap):
    """(identical flagged, e, m, found): the fewest identical pairs flagged
    by `|effect| >= e and moved >= m` (m <= cap) that finds the target."""
    best = None
    need = ARGS.target * len(slowed)
    for e in sorted({e for e, _ in slowed}):
        for m in sorted({m for _, m in slowed if m <= cap} | {0.0}):
            found = sum(se >= e and sm >= m for se, sm in slowed)
            if found < need:
                continue
            flagged = sum(any(ie >= e and im >= m for ie, im in x) for x in ident)
            if best is None or flagged < best[0]:
                best = (flagged, e, m, found)
    return best


def pct(k, n):
    return f"{k}/{n} = {100.0 * k / n:.1f}%" if n else "-"


def main():
    spreads = [float(s) for s in ARGS.spreads.split(",")]
    print(f"# pools: {' '.join(ARGS.pools)}; {FSPROF}")
    print("\n## compare's verdict, one run a side, --spread varied\n")
    print("| workload | --spread | identical flagged | 2x found |")
    print("|---|---|---|---|")
    floor_rows = []
    for w in ARGS.workloads.split(","):
        ps = list(pairs(w))
        for s in spreads:
            fp = det = n_id = n_sl = 0
            for kind, op, a, b in ps:
                code, ops = compare(a, b, ["--spread", str(s), "--fail-on", ARGS.fail_on])
                if kind == "identical":
                    n_id += 1
                    fp += code == 1
                else:
                    n_sl += 1
                    det += any(o["op"] == op and o["interesting"] for o in ops)
            print(f"| {w} | {s} | {pct(fp, n_id)} | {pct(det, n_sl)} |")
        ident, slowed = [], []
        for kind, op, a, b in ps:
            sz = sizes(compare(a, b, [])[1])
            if kind == "identical":
                ident.append(list(sz.values()))
            else:
                slowed.append(sz.get(op, (0.0, 0.0)))
        for cap in (1.0, 0.05):
            floor_rows.append((w, cap, len(ident), len(slowed), floor(ident, slowed, cap)))
    print(f"\n## the floor: any test on (shift, share moved), at least {ARGS.target:.0%} found\n")
    print("| workload | identical flagged at best | 2x found | thresholds |")
    print("|---|---|---|---|")
    for w, cap, ni, ns, (fl, e, m, found) in floor_rows:
        limit = "" if cap >= 1.0 else f" (moved <= {100 * cap:.0f}%)"
        print(f"| {w}{limit} | {pct(fl, ni)} | {pct(found, ns)} | shift >= {e:.2f}, moved >= {100 * m:.1f}% |")


if __name__ == "__main__":
    main()
