#!/usr/bin/env bash
# The shim's per-call cost taken apart (bench/hotpath_parts.c): builds the
# parts bench from this checkout's shim sources with the shim's own flags,
# runs it pinned to one CPU at real-time priority (when allowed) around a
# no-op, libc's fstat and libc's pread, and prints `uptime` before and after.
#
# usage: bench/hotpath_parts.sh [ROUNDS] [CALLS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-21}
calls=${2:-200000}
shim=crates/fsprof-shim/shim
exe=$(mktemp -d)/hotpath_parts
srcs=()
for f in "$shim"/*.c; do
  # wrappers.c would interpose the bench's own calls; the parts are in record.h.
  [ "$(basename "$f")" = wrappers.c ] || srcs+=("$f")
done
cc -O2 -g0 -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter -fvisibility=hidden \
  -ftls-model=initial-exec -fno-stack-protector -D__NO_INLINE__ -U_FORTIFY_SOURCE \
  -I "$shim" -o "$exe" bench/hotpath_parts.c "${srcs[@]}" -ldl -lpthread
pin=(chrt -f 50 taskset -c 1)
"${pin[@]}" true 2>/dev/null || pin=()
echo "# uptime: $(uptime)"
for callee in noop fstat pread; do
  "${pin[@]}" "$exe" "$callee" "$rounds" "$calls"
done
echo "# uptime: $(uptime)"
rm -rf "$(dirname "$exe")"
