#!/usr/bin/env bash
# fsprof bench against its peers on the same directory, side by side:
#   sprite   vs fio jobs doing the same I/O (11 files of 1 MiB, 4 KiB
#            read/write + lseek through the `sync` engine, random offsets
#            drawn with replacement, one fsync per written file and pass,
#            no cache invalidation, no preallocation, the sequential write
#            into new files every loop as Sprite's O_TRUNC does), the five
#            phases in Sprite's order, repeated;
#   metadata vs bonnie++ -s 0 -n 16:0:0:1024 (and, when bonnie++ prints
#            +++++ because a test took under 500 ms, both tools again at
#            -n SCALE:0:0:1024 / --files-per-dir SCALE, where it reports).
# Three figures per phase: the rate over wall time (what each tool prints;
# inflated by other processes on a loaded machine), the rate per second
# of on-CPU time (rate / CPU share: fsprof's on_cpu, fio's usr+sys,
# bonnie++'s %CP — load-robust), and the per-op median latency where the
# tool has one (fsprof's op p50: the whole Sprite iteration, random draw
# and lseek included; fio's lat p50, which starts after the sync engine's
# lseek: io_u.c takes start_time once td_io_prep has run). The tools take
# turns, one repetition each, so that both see the same machine; figures
# are medians over repetitions. docs/benchmarks.md explains every
# difference.
#   bench/bench_peers.sh DIR [REPS] [SCALE]
# Environment: FSPROF=path uses an existing build.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: bench/bench_peers.sh DIR [REPS] [SCALE]}
reps=${2:-5}
scale=${3:-128}
. bench/lib.sh
fsprof=$(fsprof_binary)
for t in fio bonnie++ python3; do
  command -v "$t" >/dev/null || { echo "bench_peers.sh: $t is not installed (apt-get install -y fio bonnie++)" >&2; exit 2; }
done
work=$(mktemp -d "$dir/fsprof-peers.XXXXXX")
trap 'rm -rf "$work"' EXIT
out=$(mktemp -d /tmp/fsprof-peers-out.XXXXXX)
echo "results in $out (JSON of every tool)" >&2

# fio: each repetition runs the five phases in Sprite's order on fresh
# files; --loops makes each job long enough for fio's millisecond runtime
# (one pass over 11 MiB takes ~3 ms here) without wrapping inside a file.
mkdir "$work/fio"
phases=(write read randwrite randread read)
for r in $(seq "$reps"); do
  "$fsprof" bench sprite --dir "$work" -o "$out/sprite-$r.json" --format csv >/dev/null
  rm -f "$work/fio/"*
  for k in 0 1 2 3 4; do
    rw=${phases[$k]}
    # Sprite fsyncs each written file once per pass: --fsync=256 (one
    # file's 4 KiB writes). fsync_on_close alone is not that: fio keeps
    # its files open across --loops and closes (and fsyncs) them once
    # per job (strace: 23 fsyncs for 5 loops over 11 files).
    fsync=0; case $rw in *write) fsync=256 ;; esac
    unlink=0; [ "$rw" = write ] && unlink=1
    fio --name=sprite --directory="$work/fio" --nrfiles=11 --filesize=1m --size=11m \
      --bs=4k --rw="$rw" --ioengine=sync --file_service_type=sequential \
      --norandommap --randrepeat=1 --fsync=$fsync --invalidate=0 \
      --fallocate=none --unlink_each_loop=$unlink --lat_percentiles=1 \
      --loops=20 --output-format=json >"$out/fio-$r-$k-$rw.json" 2>/dev/null
  done
done

# One bonnie++ run and two fsprof runs per repetition, in turns.
metadata() { # FILES_PER_DIR
  : >"$out/bonnie-$1.csv"
  for r in $(seq "$reps"); do
    "$fsprof" bench metadata --dir "$work" --files-per-dir "$1" --runs 2 \
      -o "$out/metadata-$1-$r.json" --format csv >/dev/null
    bonnie++ -d "$work" -s 0 -n "$1:0:0:1024" -u root -q -x 1 2>/dev/null |
      grep '^1\.9' >>"$out/bonnie-$1.csv"
  done
}
metadata 16
if grep -q '+++++' "$out/bonnie-16.csv"; then metadata "$scale"; fi

python3 - "$out" "$scale" <<'EOF'
import glob, json, os, statistics, sys
out, scale = sys.argv[1], sys.argv[2]
med = statistics.median

def fsprof_phases(pattern):
    """Per phase, medians over the repetitions' files of: rate, rate per
    CPU-second, op p50."""
    reps = {}
    for path in sorted(glob.glob(pattern)):
        b = json.load(open(path))["bench"]
        for p in b["phases"]:
            rate = p["summary"]["median"]
            cpu = p.get("on_cpu")
            reps.setdefault(p["name"], []).append((rate, rate / cpu if cpu else float("nan"), p["op_median_ns"]))
    rows = {n: tuple(med([x[i] for x in v]) for i in range(3)) for n, v in reps.items()}
    return b, rows, len(glob.glob(pattern))

def show(title, unit, names, fs, peer, peer_name):
    print(f"\n{title}")
    print(f"{'phase':12} | {'fsprof '+unit:>14} {'per CPU-s':>11} {'op p50':>8} | {peer_name+' '+unit:>14} {'per CPU-s':>11} {'op p50':>8} | wall ratio  CPU ratio")
    for ours, theirs in names:
        a = fs.get(ours); b = peer.get(theirs)
        if not a or not b:
            continue
        if b[0] is None:
            print(f"{ours:12} | {a[0]:14.0f} {a[1]:11.0f} {p50(a[2]):>8} | {'+++++':>14} {'+++++':>11} {'-':>8} |")
            continue
        r1 = f"{a[0] / b[0]:.2f}" if b[0] else "-"
        r2 = f"{a[1] / b[1]:.2f}" if b[1] else "-"
        print(f"{ours:12} | {a[0]:14.0f} {a[1]:11.0f} {p50(a[2]):>8} | {b[0]:14.0f} {b[1]:11.0f} {p50(b[2]):>8} | {r1:>10} {r2:>10}")

def p50(x):
    return "-" if x is None else f"{x:.0f}ns"

# sprite vs fio
b, fs, n_fs = fsprof_phases(f"{out}/sprite-*.json")
fio = {}
for f in sorted(glob.glob(f"{out}/fio-*.json")):
    rep, k, rw = os.path.basename(f)[4:-5].split("-")
    j = json.load(open(f))["jobs"][0]
    d = j["write"] if "write" in rw else j["read"]
    cpu = (j["usr_cpu"] + j["sys_cpu"]) / 100
    mbs = d["bw_bytes"] / 1e6
    fio.setdefault(int(k), []).append((mbs, mbs / cpu if cpu else float("nan"), d["lat_ns"]["percentile"]["50.000000"]))
order = ["seq_write", "seq_read", "rand_write", "rand_read", "seq_reread"]
fio_rows = {order[k]: tuple(med([x[i] for x in v]) for i in range(3)) for k, v in fio.items()}
m = b["machine"]
print(f"{b['dir']['path']} ({b['dir']['fs_type']}), load average {m['load_average']:.1f} on {m['cpus']} CPUs")
show(f"sprite (11 x 1 MiB, 4 KiB I/O): fsprof median of {n_fs} repetitions' medians of {b['params']['runs']} runs (files 2..11) | fio median of its {len(fio[0])} repetitions (all 11 files, 20 loops)",
     "MB/s", [(n, n) for n in order], fs, fio_rows, "fio")

# metadata vs bonnie++
names = ["create_seq", "stat_seq", "unlink_seq", "create_rand", "stat_rand", "unlink_rand"]
for n in ["16", scale]:
    if not os.path.exists(f"{out}/bonnie-{n}.csv"):
        continue
    _, fs, n_fs = fsprof_phases(f"{out}/metadata-{n}-*.json")
    rows = [l.strip().split(",") for l in open(f"{out}/bonnie-{n}.csv")]
    bon = {}
    for i, name in enumerate(names):
        vals = [r[26 + 2 * i] for r in rows]
        cpus = [r[27 + 2 * i] for r in rows]
        if any("+" in v for v in vals):
            bon[name] = (None, None, None)
            continue
        rate = med([float(v) for v in vals])
        cpu = med([float(c) for c in cpus]) / 100
        bon[name] = (rate, rate / cpu if cpu else float("nan"), None)
    show(f"metadata, 1024 dirs x {n} files: fsprof median of {n_fs} repetitions' medians of 2 runs | bonnie++ -n {n}:0:0:1024, median of {len(rows)} runs (+++++ = under 500 ms, not reported)",
         "ops/s", [(x, x) for x in names], fs, bon, "bonnie++")
EOF
