#!/usr/bin/env bash
# The memory-rich microbenchmark paper's anomalies (Wang et al.), tried on
# this machine with fsprof bench; docs/benchmarks.md has the results.
#   bench/bench_anomalies.sh DIR [ROUNDS] [PLOTDIR]
# DIR: where the files go (tmpfs: the paper's ramfs case). PLOTDIR: where
# the sweep charts are written (default docs/bench).
#
# 1. Sweep (§6, §4): Sprite over file sizes 4 KiB..512 MiB, page-aligned,
#    sequential phases padded with the random phases' lseek and random
#    draw (so only the access pattern differs). Per size: random read vs
#    the sequential re-read (both after a read phase), and the first
#    sequential read (right after the writes) vs the re-read.
# 2. Alignment (§5): the same sweep with --align none up to 64 MiB, and
#    ROUNDS interleaved pairs of 1 MiB Sprite runs, --align page and none.
# 3. First file (§4.6.5): in every 1 MiB run, the first file's time over
#    the median of files 2..11, per phase, apart for the warm-up runs (the
#    first run of each process) and the measured ones.
# All comparisons use per-op medians (fsprof's op p50), which other
# processes on a loaded machine move far less than MB/s figures.
# Environment: FSPROF=path uses an existing build; RESULTS=dir re-analyses
# the results of an earlier run (its 'results in' directory) without
# measuring again.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: bench/bench_anomalies.sh DIR [ROUNDS] [PLOTDIR]}
rounds=${2:-5}
plots=${3:-docs/bench}
. bench/lib.sh
fsprof=$(fsprof_binary)
out=${RESULTS:-}
if [ -z "$out" ]; then
out=$(mktemp -d /tmp/fsprof-anomalies.XXXXXX)
echo "results in $out" >&2
mkdir -p "$plots"
"$fsprof" bench sweep --dir "$dir" --files 4 --runs 5 --min-size 4k --max-size 512M \
  --pad-syscalls -o "$out/sweep-page.json" \
  --plot "$plots/sweep-tmpfs-rate.svg" --plot-p50 "$plots/sweep-tmpfs-p50.svg" --force --format csv >/dev/null
"$fsprof" bench sweep --dir "$dir" --files 4 --runs 5 --min-size 8k --max-size 64M \
  --pad-syscalls --align none -o "$out/sweep-none.json" \
  --plot "$plots/sweep-tmpfs-unaligned-rate.svg" --plot-p50 "$plots/sweep-tmpfs-unaligned-p50.svg" --force --format csv >/dev/null
for r in $(seq "$rounds"); do
  for a in page none; do
    "$fsprof" bench sprite --dir "$dir" --align "$a" --pad-syscalls -o "$out/sprite-$a-$r.json" --format csv >/dev/null
  done
done
fi

python3 - "$out" "$rounds" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
med = statistics.median
def bench(f):
    return json.load(open(f"{out}/{f}"))["bench"]
def p50(phases):
    return {p["name"]: p["op_median_ns"] for p in phases}
def kib(n):
    return f"{n // 1024} KiB" if n < 1 << 20 else f"{n >> 20} MiB"

for f, what in [("sweep-page.json", "page-aligned"), ("sweep-none.json", "unaligned")]:
    b = bench(f)
    caches = ", ".join(f"L{c['level']} {kib(c['size_bytes'])}" for c in b["machine"]["caches"] if c["kind"] != "Instruction")
    print(f"\nsweep, {what}, padded ({caches}); op p50 in ns, ratios < 1: the first named is faster")
    print(f"{'file size':>10} {'seq_read':>9} {'rand_read':>9} {'seq_reread':>10} {'rand/reread':>11} {'read/reread':>11} {'seq_write':>9} {'rand_write':>10} {'rand_w/seq_w':>12}")
    for s in b["sweep"]:
        m = p50(s["phases"])
        print(f"{kib(s['file_size']):>10} {m['seq_read']:9.0f} {m['rand_read']:9.0f} {m['seq_reread']:10.0f} "
              f"{m['rand_read'] / m['seq_reread']:11.2f} {m['seq_read'] / m['seq_reread']:11.2f} "
              f"{m['seq_write']:9.0f} {m['rand_write']:10.0f} {m['rand_write'] / m['seq_write']:12.2f}")

print(f"\n1 MiB Sprite, {rounds} interleaved rounds of --align page / none (padded, 10 runs each); medians over rounds")
ratios = {"page": [], "none": []}
cross = []
for r in range(1, rounds + 1):
    m = {a: p50(bench(f"sprite-{a}-{r}.json")["phases"]) for a in ("page", "none")}
    for a in m:
        ratios[a].append(m[a]["rand_read"] / m[a]["seq_reread"])
    cross.append(m["none"]["rand_read"] / m["page"]["rand_read"])
print(f"rand_read / seq_reread op p50: page {med(ratios['page']):.2f}, none {med(ratios['none']):.2f}")
print(f"rand_read op p50, none / page: {med(cross):.2f}  (per round: {', '.join(f'{x:.2f}' for x in cross)})")

print("\nfile k's time over the median of the run's other files, 1 MiB runs, all phases;")
print("file 1 against files 2..11 as a control (a stall: over 3x), warm-up runs (each process's first) apart")
by = {}
for r in range(1, rounds + 1):
    for a in ("page", "none"):
        b = bench(f"sprite-{a}-{r}.json")
        w = b["params"]["warmup"]
        for p in b["phases"]:
            for k, files in enumerate(p["file_ns"]):
                kind = "warm-up" if k < w else "measured"
                for i in range(len(files)):
                    x = files[i] / med(files[:i] + files[i + 1:])
                    by.setdefault((kind, p["name"], i == 0), []).append(x)
for kind in ("warm-up", "measured"):
    for name in ["seq_write", "seq_read", "rand_write", "rand_read", "seq_reread", None]:
        def pick(first):
            return [x for (k, n, f), xs in by.items() if k == kind and f == first and name in (None, n) for x in xs]
        one, rest = pick(True), pick(False)
        stall = lambda xs: 100 * sum(x > 3 for x in xs) / len(xs)
        print(f"{kind:9} {name or 'all phases':12} file 1: median {med(one):5.2f}, stalled {stall(one):5.1f}% of {len(one):4}"
              f" | files 2..11: median {med(rest):5.2f}, stalled {stall(rest):5.1f}% of {len(rest)}")
EOF
