#!/usr/bin/env bash
# fsprof bench against its peers on the same directory: sprite vs an
# equivalent fio job set (11 files of 1 MiB, 4 KiB psync I/O, fsync after
# writes), metadata vs bonnie++ -s 0 -n 16:0:0:1024. Prints each tool's
# figures side by side; docs/benchmarks.md explains the differences.
#   bench/bench_peers.sh DIR
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: bench/bench_peers.sh DIR}
# FSPROF=path uses an existing build instead of building one.
fsprof=${FSPROF:-}
if [ -z "$fsprof" ]; then
  cargo build --release -q -p fsprof
  fsprof=target/release/fsprof
fi
echo "== fsprof bench sprite (mean MB/s of files 2..11, 10 runs)"
"$fsprof" bench sprite --dir "$dir" --format csv | awk -F, 'NR>1 {printf "%-12s %10.1f MB/s  ±%.1f\n", $1, $4, ($6-$5)/2}'
echo "== fio, same files and sizes (MB/s, median of 5 runs)"
work=$(mktemp -d "$dir/fio.XXXXXX")
trap 'rm -rf "$work"' EXIT
for rw in write read randwrite randread read; do
  for _ in 1 2 3 4 5; do
    fio --name=s --directory="$work" --nrfiles=11 --filesize=1m --bs=4k --rw=$rw \
      --ioengine=psync --end_fsync=$([ "${rw%write}" != "$rw" ] && echo 1 || echo 0) \
      --file_service_type=sequential --output-format=json 2>/dev/null |
      python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; d=j["write"] if j["write"]["io_bytes"] else j["read"]; print(d["bw_bytes"]/1e6)'
  done | sort -n | awk -v rw=$rw '{a[NR]=$1} END {printf "%-12s %10.1f MB/s\n", rw, a[3]}'
done
echo "== fsprof bench metadata (ops/s, 10 runs)"
"$fsprof" bench metadata --dir "$dir" --format csv | awk -F, 'NR>1 {printf "%-12s %10.0f ops/s  ±%.0f\n", $1, $4, ($6-$5)/2}'
echo "== bonnie++ -s 0 -n 16:0:0:1024 (ops/s; +++++ = finished too fast to report)"
bonnie++ -d "$dir" -s 0 -n 16:0:0:1024 -u root -q 2>/dev/null | tail -1 |
  awk -F, '{printf "create_seq %s\nstat_seq %s\nunlink_seq %s\ncreate_rand %s\nstat_rand %s\nunlink_rand %s\n", $25, $27, $29, $31, $33, $35}'
