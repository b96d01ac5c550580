#!/usr/bin/env bash
# Issue 24 §4: does `fsprof bench metadata` have a slow mode a plain C loop
# does not, and does every slow run say why?
#   bench/metadata_slow_mode.sh DIR [RUNS]
# On DIR (a disk-backed file system), with the layout of the issue
# (--dirs 64 --files-per-dir 16): RUNS rounds of bench/meta_loop.c (stat
# and unlink passes timed as a whole) and one `fsprof bench metadata
# --runs RUNS`, both at normal priority, then both again under
# `chrt -f 1` (root: SCHED_FIFO, which no normal process preempts). Prints
# per mode the stat_seq and unlink_seq spread (fastest / slowest run) of
# each, how many fsprof runs were slow (at half the fastest's rate or
# less), how many of those carry a slow_run warning, and the causes named.
# Environment: FSPROF=path uses an existing build.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: bench/metadata_slow_mode.sh DIR [RUNS]}
runs=${2:-10}
. bench/lib.sh
fsprof=$(fsprof_binary)
out=$(mktemp -d /tmp/fsprof-metaslow.XXXXXX)
echo "results in $out" >&2
cc -O2 -o "$out/meta_loop" bench/meta_loop.c
for mode in normal fifo; do
  prio=()
  [ "$mode" = fifo ] && prio=(chrt -f 1)
  mkdir "$dir/.metaslow-c"
  "${prio[@]}" "$out/meta_loop" "$dir/.metaslow-c" 64 16 "$runs" >"$out/c-$mode.txt"
  rm -rf "$dir/.metaslow-c"
  "${prio[@]}" "$fsprof" bench metadata "$dir" --dirs 64 --files-per-dir 16 \
    --runs "$runs" -o "$out/fsprof-$mode.json" --force 2>"$out/fsprof-$mode.txt"
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" <<'PY'
import json, re, sys
out = sys.argv[1]
def spread(xs):
    return max(xs) / min(xs)
for mode in ("normal", "fifo"):
    c = {"stat_seq": [], "unlink_seq": []}
    for line in open(f"{out}/c-{mode}.txt"):
        w = line.split()
        c[w[0]].append(float(w[1])); c[w[2]].append(float(w[3]))
    r = json.load(open(f"{out}/fsprof-{mode}.json"))["bench"]
    for phase in ("stat_seq", "unlink_seq"):
        p = next(p for p in r["phases"] if p["name"] == phase)
        runs = p["runs"]
        best = max(runs)
        slow = [i + 1 for i, v in enumerate(runs) if best / v >= 2.0]
        warned = {}
        for w in r["warnings"]:
            m = re.match(rf"{phase}: run (\d+) \(.*?slower than the fastest \([0-9]+\): (preempted|blocked|it was on a CPU)", w["message"])
            if w["kind"] == "slow_run" and m:
                warned[int(m.group(1))] = {"it was on a CPU": "on-CPU"}.get(m.group(2), m.group(2))
        causes = sorted(set(warned.values()))
        ratio = spread(runs) / spread(c[phase])
        print(f"{mode:6} {phase:10} fsprof median {sorted(runs)[len(runs)//2]:9.0f} ops/s spread {spread(runs):5.2f}x | "
              f"C loop median {sorted(c[phase])[len(runs)//2]:9.0f} spread {spread(c[phase]):5.2f}x | "
              f"spread ratio {ratio:4.2f} ({'within' if ratio <= 2 else 'NOT within'} 2x) | "
              f"slow runs {len(slow)}, warned {len([s for s in slow if s in warned])} ({', '.join(causes) or '-'})")
PY
