#!/usr/bin/env bash
# fsprof run's fixed start-up cost and its end-to-end ratio on a short real
# workload, against bare runs measured in the same rounds (hyperfine,
# interleaved: every round times every command once more), as medians:
#
#   1. `fsprof run -q -- true` against `true`: the added milliseconds
#      (issue 10's target: within +1 ms);
#   2. `grep -r <absent pattern> /usr/include`, warm page cache, under
#      `fsprof run -q` against bare: the ratio (target: <= 1.04);
#   3. unless --no-percall: the ns added per intercepted call
#      (bench/user_overhead.py's tight pread/fstat loop; target: <= 25 ns).
#
# usage: bench/startup.sh [--rounds N] [--runs N] [--fsprof PATH] [--no-percall]
# Needs hyperfine (apt-get install hyperfine) and a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=11 runs=20 percall=1
fsprof="$PWD/target/release/fsprof"
while (($#)); do
  case "$1" in
    --rounds) rounds=$2; shift ;;
    --runs) runs=$2; shift ;;
    --fsprof) fsprof=$2; shift ;;
    --no-percall) percall=0 ;;
    *) echo "usage: $0 [--rounds N] [--runs N] [--fsprof PATH] [--no-percall]" >&2; exit 2 ;;
  esac
  shift
done
command -v hyperfine >/dev/null || { echo "needs hyperfine: apt-get install hyperfine" >&2; exit 2; }
[ -x "$fsprof" ] || { echo "$fsprof not found: cargo build --release" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep=$(command -v grep)
pattern=fsprof_bench_pattern_that_is_not_there
cmds=(
  "true"
  "$fsprof run -q -f -o $tmp/t.json -- true"
  "$grep -r $pattern /usr/include"
  "$fsprof run -q -f -o $tmp/g.json -- $grep -r $pattern /usr/include"
)
"$grep" -r "$pattern" /usr/include >/dev/null || true # warm the page cache
for ((r = 1; r <= rounds; r++)); do
  hyperfine -N -i -w 3 -r "$runs" --style none --export-json "$tmp/round-$r.json" "${cmds[@]}" >/dev/null
done
echo "# fsprof version: $("$fsprof" --version)"
echo "# host: $(uname -n), kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $rounds interleaved rounds x $runs runs per command (hyperfine -N), medians of the round medians"
python3 - "$tmp" "$rounds" <<'PY'
import json, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
med = [[statistics.median(r["times"]) for r in json.load(open(f"{tmp}/round-{k}.json"))["results"]]
       for k in range(1, rounds + 1)]
col = lambda i: [m[i] for m in med]
def line(name, i):
    print(f"{name:<30} {statistics.median(col(i)) * 1e3:8.2f} ms")
line("true", 0)
line("fsprof run -q -- true", 1)
added = [m[1] - m[0] for m in med]
print(f"{'start-up added':<30} {statistics.median(added) * 1e3:8.2f} ms   (rounds {min(added) * 1e3:.2f}..{max(added) * 1e3:.2f})")
line("grep -r /usr/include", 2)
line("fsprof run -q -- grep -r", 3)
ratio = [m[3] / m[2] for m in med]
print(f"{'grep ratio':<30} {statistics.median(ratio):8.3f}      (rounds {min(ratio):.3f}..{max(ratio):.3f})")
PY
if ((percall)); then
  python3 bench/user_overhead.py --fsprof "$fsprof" --rounds "$rounds" --no-peers | sed -n '/ns per call/,$p'
fi
