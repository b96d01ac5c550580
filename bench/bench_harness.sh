#!/usr/bin/env bash
# What fsprof bench's timing loop adds per operation, on one cached 1 KiB
# pread at offset 0 of a tmpfs file, against C loops doing the same calls
# (bench/bare_pread.c) and against fio, all in the same run: interleaved
# rounds, medians over rounds.
#   bench/bench_harness.sh [ROUNDS] [OPS]
# Environment: FSPROF=path (an existing build), FSPROF_BEFORE=path (an older
# build to show before/after in the same rounds).
#
# Three measures per tool, because this machine is shared and loaded:
#   op p50   median of the per-op latencies (fsprof's op_median_ns, the C
#            loop's rdtsc deltas, fio's clat p50): robust to preemption,
#            which hits few ops but lasts long;
#   cpu/op   on-CPU time of the reading thread per op (thread CPU clock
#            around the timed loop; fio's usr+sys): preemption excluded;
#   wall/op  loop wall time per op: what the machine's load inflates.
# "fsprof adds" is fsprof minus the C loop that reads the same clock per op
# (C tsc, main thread) — the honest like-for-like baseline — and also minus
# the C loop with no clock at all (C bare), which includes the clock read.
# If valgrind is installed, instructions per op in the timed region alone
# (callgrind, deterministic under any load) follow.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-9}
ops=${2:-300000}
. bench/lib.sh
fsprof=$(fsprof_binary)
before=${FSPROF_BEFORE:-}
work=$(mktemp -d /dev/shm/fsprof-harness.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -O2 -pthread -o "$work/bare" bench/bare_pread.c
head -c 1024 /dev/urandom >"$work/f"
mkdir "$work/d"
have_fio=$(command -v fio || true)
out="$work/rows.txt"
: >"$out"

# fsprof: op p50 from the CSV; wall/op = 1e9 / ops/s (one run, one
# thread); cpu/op = on_cpu × wall/op (empty on_cpu: a build without it).
fsprof_row() {
  "$1" bench pread --dir "$work/d" --ops "$ops" --runs 1 --warmup 0 --format csv |
    awk -F, -v t="$2" 'NR==2 {w=1e9/$4; c=($14=="")?"nan":$14*w; print t, $13, c, w}'
}

for _ in $(seq "$rounds"); do
  for mode in "bare main" "tsc main" "tsc thread"; do
    set -- $mode
    # bare_pread prints wall/op cpu/op p50 (p50 0 for the bare loop).
    "$work/bare" "$work/f" 1024 "$ops" "$1" "$2" |
      awk -v t="C_$1_$2" '{print t, ($3==0)?"nan":$3, $2, $1}' >>"$out"
  done
  fsprof_row "$fsprof" fsprof >>"$out"
  if [ -n "$before" ]; then fsprof_row "$before" fsprof_before >>"$out"; fi
  if [ -n "$have_fio" ]; then
    # Offset 0 every time, as the others: a one-block file read at random
    # with no random map. (--rw=read on a 1 KiB file wraps around after
    # every op, and fio's per-pass reset then costs microseconds.)
    fio --name=p --filename="$work/f" --rw=randread --bs=1k --size=1k --norandommap \
      --io_size=$((ops / 1024 + 1))m --ioengine=psync --output-format=json 2>/dev/null |
      python3 -c '
import json, sys
j = json.load(sys.stdin)["jobs"][0]; r = j["read"]; n = r["total_ios"]; rt = j["job_runtime"] * 1e6
print("fio", r["clat_ns"]["percentile"]["50.000000"], (j["usr_cpu"] + j["sys_cpu"]) / 100 * rt / n, rt / n)' >>"$out"
  fi
done

echo "rounds=$rounds ops=$ops, one cached 1 KiB pread at offset 0 on tmpfs; medians over rounds, ns"
python3 - "$out" <<'EOF'
import math, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    t, *v = line.split()
    rows.setdefault(t, []).append([float(x) for x in v])
def med(t, k):
    xs = [r[k] for r in rows.get(t, []) if not math.isnan(r[k])]
    return statistics.median(xs) if xs else float("nan")
names = {"C_bare_main": "C loop, no clock (main thread)",
         "C_tsc_main": "C loop, rdtsc + store per op (main thread)",
         "C_tsc_thread": "C loop, rdtsc + store per op (spawned thread)",
         "fsprof": "fsprof bench pread --threads 1",
         "fsprof_before": "fsprof bench pread (FSPROF_BEFORE build)",
         "fio": "fio psync randread 1k, norandommap"}
print(f"{'':48} {'op p50':>8} {'cpu/op':>8} {'wall/op':>8}")
for t, label in names.items():
    if t in rows:
        print(f"{label:48} {med(t,0):8.1f} {med(t,1):8.1f} {med(t,2):8.1f}")
def adds(t, base, k):
    a, b = med(t, k), med(base, k)
    return f"{a - b:+.1f} ns ({a / b:.3f}x)" if not (math.isnan(a) or math.isnan(b)) else "n/a"
for t in ("fsprof", "fsprof_before", "fio"):
    if t in rows:
        print(f"{t} adds over C tsc (same clock): op p50 {adds(t, 'C_tsc_main', 0)}, cpu/op {adds(t, 'C_tsc_main', 1)}")
        print(f"{t} adds over C bare (no clock):  cpu/op {adds(t, 'C_bare_main', 1)}, wall/op {adds(t, 'C_bare_main', 2)}")
print(f"a spawned reader thread costs (C tsc thread - main): op p50 {adds('C_tsc_thread', 'C_tsc_main', 0)}, cpu/op {adds('C_tsc_thread', 'C_tsc_main', 1)}")
EOF

if command -v valgrind >/dev/null; then
  # Instructions in the timed region per op. fsprof's loop function also
  # times the 20,000 empty ops of its overhead measurement: two op counts,
  # differenced, leave the pread loop alone.
  ir() { valgrind --tool=callgrind --collect-atstart=no --toggle-collect="$1" \
    --callgrind-out-file=/dev/null "${@:2}" 2>&1 | awk '/Collected/ {print $NF}'; }
  n1=20000 n2=40000
  echo "instructions per op in the timed region (callgrind, user space only):"
  for m in bare tsc; do
    a=$(ir 'timed_*' "$work/bare" "$work/f" 1024 $n1 $m main)
    b=$(ir 'timed_*' "$work/bare" "$work/f" 1024 $n2 $m main)
    echo "  C $m: $(( (b - a) / (n2 - n1) ))"
  done
  a=$(ir '*timed_loop*' "$fsprof" bench pread --dir "$work/d" --ops $n1 --runs 1 --warmup 0 --format csv)
  b=$(ir '*timed_loop*' "$fsprof" bench pread --dir "$work/d" --ops $n2 --runs 1 --warmup 0 --format csv)
  echo "  fsprof: $(( (b - a) / (n2 - n1) ))"
fi
