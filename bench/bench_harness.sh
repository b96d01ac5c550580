#!/usr/bin/env bash
# What fsprof bench's timing loop adds per operation, against a bare C loop
# doing the same calls (bench/bare_pread.c) and against fio, on one cached
# 1 KiB pread. Interleaved rounds, medians; prints differences and ratios.
#   bench/bench_harness.sh [ROUNDS] [OPS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
ops=${2:-1000000}
# FSPROF=path uses an existing build instead of building one.
fsprof=${FSPROF:-}
if [ -z "$fsprof" ]; then
  cargo build --release -q -p fsprof
  fsprof=target/release/fsprof
fi
work=$(mktemp -d /dev/shm/fsprof-harness.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/bare" bench/bare_pread.c
head -c 1024 /dev/urandom >"$work/f"
have_fio=$(command -v fio || true)
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
: >"$work/bare.txt"; : >"$work/fsprof.txt"; : >"$work/fio.txt"
for _ in $(seq "$rounds"); do
  "$work/bare" "$work/f" 1024 "$ops" >>"$work/bare.txt"
  # ns/op of the timed loop = 1e9 / ops/s of one thread (one run).
  "$fsprof" bench pread --dir "$work" --ops "$ops" --runs 1 --warmup 0 --format csv |
    awk -F, 'NR==2 {printf "%.2f\n", 1e9/$4}' >>"$work/fsprof.txt"
  if [ -n "$have_fio" ]; then
    fio --name=p --filename="$work/f" --rw=read --bs=1k --size=1k --io_size=$((ops / 1000))m \
      --ioengine=psync --output-format=json 2>/dev/null |
      python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]["read"]; print("%.2f" % (1e9/j["iops"]))' >>"$work/fio.txt"
  fi
done
b=$(median <"$work/bare.txt"); f=$(median <"$work/fsprof.txt")
echo "rounds=$rounds ops=$ops  (medians, ns per 1 KiB cached pread)"
echo "bare C loop:           $b"
echo "fsprof bench pread:    $f   adds $(awk -v a="$f" -v b="$b" 'BEGIN{printf "%.1f ns (%.3fx)", a-b, a/b}')"
if [ -n "$have_fio" ]; then
  o=$(median <"$work/fio.txt")
  echo "fio psync:             $o   adds $(awk -v a="$o" -v b="$b" 'BEGIN{printf "%.1f ns (%.3fx)", a-b, a/b}')"
fi
