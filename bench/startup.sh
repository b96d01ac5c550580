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
# For scale, a minimal launcher is timed too: a C program that only
# posix_spawns `true` and waits (built here with cc). It is the floor of
# any tool that starts a command: one more process's exec, dynamic
# linking (with glibc's CPUID-based start-up, slow in a VM) and exit.
#
# fsprof runs as the issue states it, without -o: each run writes a new
# profile under the default name into the current directory (a temporary
# one here, emptied by a --prepare between runs). `-o FILE` would also
# time a probe that FILE's directory takes a new file, and replacing the
# same FILE every run ext4's flush-on-rename-over. `fsprof --version` is
# timed too: the part of the start-up that is only exec'ing and linking
# fsprof's own binary. Beside wall time, each line shows CPU time (user +
# system of the command and its children): on a busy machine wall time
# mostly measures waiting for a CPU, CPU time much less so.
#
# With --perf, also where the CPU time goes (perf stat, 40 runs each):
# fsprof alone (--no-inherit) against fsprof with its child, page faults.
#
# With --other PATH, another build's `run -q -- true` is timed in the same
# rounds (e.g. a static-pie build, or main before a change), with its
# difference to this one.
#
#
# With --floor, instead: where `fsprof run -q -- true`'s added time goes,
# against the floor of the machine it runs on, in interleaved rounds
# (medians of the round medians, wall and CPU time) of
#
#   true                        a dynamically linked program that does nothing
#   no libc, exit(0)            a static program without libc (`_start` makes
#                               the exit system call): the exec alone
#   static return 0             a statically linked (glibc) C program that does
#                               nothing: any exec here without the dynamic
#                               loader (glibc's CPUID start-up included; its
#                               difference to the line above is that start-up)
#   launcher -- true            a minimal C launcher (vfork + execve + waitpid),
#                               dynamic: the floor of any tool that starts a
#                               command
#   static launcher -- true     the same, linked statically (as fsprof is)
#   static launcher, shim       the same with fsprof's preload shim in the
#                               child, inactive (no run): loading the shim
#   fsprof --version            exec'ing and starting fsprof's own binary
#   fsprof run -o /dev/null     the run without creating a profile file
#   fsprof run                  the issue's command
#   static C, run's system calls  bench/run_floor.c: a static C program making
#                               the system calls `fsprof run -q -- true` makes
#                               (run directory, control file, blocks, clone,
#                               profile file), shim loaded but inactive: the
#                               floor of run's design, without Rust or fsprof's
#                               own CPU work
#
# and the differences between them; with --other PATH, that build's three
# fsprof commands in the same rounds, and its differences to this one. With --fifo (either mode), every command runs under
# SCHED_FIFO (chrt -f 50; root): other processes are kept off the CPUs
# while it runs, so on a busy machine wall times come close to idle ones.
#
# usage: bench/startup.sh [--rounds N] [--runs N] [--fsprof PATH] [--other PATH] [--no-percall] [--perf] [--fifo]
#        bench/startup.sh --floor [--rounds N] [--runs N] [--fsprof PATH] [--other PATH] [--fifo]
# Needs hyperfine (apt-get install hyperfine) and a release build.
set -euo pipefail
# Paths given as options are taken from where the script was started.
start=$PWD
abs() { case "$1" in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$start" "$1" ;; esac; }
cd "$(dirname "$0")/.."
rounds=11 runs=20 percall=1 perf=0 other= floor=0 fifo=()
fsprof="$PWD/target/release/fsprof"
while (($#)); do
  case "$1" in
    --rounds) rounds=$2; shift ;;
    --runs) runs=$2; shift ;;
    --fsprof) fsprof=$(abs "$2"); shift ;;
    --other) other=$(abs "$2"); shift ;;
    --no-percall) percall=0 ;;
    --perf) perf=1 ;;
    --floor) floor=1 ;;
    --fifo) fifo=(chrt -f 50) ;;
    *) echo "usage: $0 [--floor [--fifo]] [--rounds N] [--runs N] [--fsprof PATH] [--other PATH] [--no-percall] [--perf]" >&2; exit 2 ;;
  esac
  shift
done
command -v hyperfine >/dev/null || { echo "needs hyperfine: apt-get install hyperfine" >&2; exit 2; }
[ -x "$fsprof" ] || { echo "$fsprof not found: cargo build --release" >&2; exit 2; }
[ -z "$other" ] || [ -x "$other" ] || { echo "$other not found" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
floor() { # where the start-up goes, against this machine's floor (--floor)
cp bench/vlaunch.c "$tmp/vlaunch.c"
cp bench/run_floor.c "$tmp/run_floor.c"
echo 'int main(void) { return 0; }' >"$tmp/ret0.c"
echo 'void _start(void) { __asm__ volatile("mov $60, %%eax; xor %%edi, %%edi; syscall" ::: "memory"); }' >"$tmp/nolibc.c"
cc -O2 -o "$tmp/vlaunch" "$tmp/vlaunch.c"
cc -O2 -static -o "$tmp/vlaunch-static" "$tmp/vlaunch.c"
cc -O2 -static -o "$tmp/run_floor" "$tmp/run_floor.c"
cc -O2 -static -o "$tmp/ret0-static" "$tmp/ret0.c"
cc -O2 -static -nostdlib -o "$tmp/nolibc" "$tmp/nolibc.c"
# The shim this build installs and runs its command with is the one to
# load: the command is asked for the LD_PRELOAD it was given (the newest
# file in the shim directory may be another build's).
shim=$(cd "$tmp" && env -u LD_PRELOAD "$fsprof" run -q -o /dev/null -- sh -c 'printf %s "$LD_PRELOAD"' 2>/dev/null)
[ -f "$shim" ] || { echo "cannot find $fsprof's shim (LD_PRELOAD was '$shim')" >&2; exit 2; }
true=$(type -P true)
cmds=(
  "$true"
  "$tmp/ret0-static"
  "$tmp/nolibc"
  "$tmp/vlaunch $true"
  "$tmp/vlaunch-static $true"
  "$tmp/vlaunch-static --preload $shim $true"
  "$fsprof --version"
  "$fsprof run -q -o /dev/null -- true"
  "$fsprof run -q -- true"
  "$tmp/run_floor $shim true"
)
# With --other, the other build's three commands in the same rounds.
[ -z "$other" ] || cmds+=("$other --version" "$other run -q -o /dev/null -- true" "$other run -q -- true")
for ((r = 1; r <= rounds; r++)); do
  (cd "$tmp/cwd" && "${fifo[@]}" hyperfine -N -i -w 3 -r "$runs" --prepare "find $tmp/cwd -name fsprof-*.json -delete" \
    --style none --export-json "$tmp/floor-$r.json" "${cmds[@]}" >/dev/null 2>&1)
done
echo "# fsprof version: $("$fsprof" --version); shim $(basename "$shim")"
[ -z "$other" ] || echo "# other: $other, $("$other" --version)"
echo "# host: $(uname -n), kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)${fifo:+, under SCHED_FIFO}"
echo "# $rounds interleaved rounds x $runs runs per command (hyperfine -N), medians of the round medians; cpu = user + system"
python3 - "$tmp" "$rounds" <<'PY'
import json, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
res = [json.load(open(f"{tmp}/floor-{k}.json"))["results"] for k in range(1, rounds + 1)]
wall = [[statistics.median(r["times"]) * 1e3 for r in rr] for rr in res]
cpu = [[(r["user"] + r["system"]) * 1e3 for r in rr] for rr in res]
names = ["true", "static return 0", "no libc, exit(0)", "launcher -- true",
         "static launcher -- true", "static launcher, shim loaded", "fsprof --version",
         "fsprof run -o /dev/null", "fsprof run -q -- true", "static C, run's system calls"]
for i, n in enumerate(names):
    print(f"{n:<32} {statistics.median(w[i] for w in wall):7.3f} ms   cpu {statistics.median(c[i] for c in cpu):7.3f} ms")
print("# parts (median of the per-round differences, wall; range over rounds)")
def part(name, a, b):
    d = [w[a] - w[b] for w in wall]
    print(f"{name:<52} {statistics.median(d) * 1e3:+7.0f} us  ({min(d) * 1e3:+.0f}..{max(d) * 1e3:+.0f})")
part("fsprof run -q -- true over true (the target: +1 ms)", 8, 0)
part("fsprof run -q -- true over the floor (shim launcher; target +0.3 ms)", 8, 5)
part("  dynamic launcher over true (any launcher's floor)", 3, 0)
part("  static launcher over true", 4, 0)
part("  loading the shim, inactive (shim launcher - static)", 5, 4)
part("  fsprof's binary over a static C program (--version)", 6, 1)
part("  fsprof run (no file) over the static launcher, shim", 7, 5)
part("  creating the profile file", 8, 7)
part("the design's system calls (static C doing run's, over the shim launcher)", 9, 5)
part("fsprof run -q -- true over the static C doing its system calls", 8, 9)
part("glibc's static start-up (static return 0 - no libc)", 1, 2)
cd = [c[1] - c[2] for c in cpu]
print(f"{'  the same, cpu':<52} {statistics.median(cd) * 1e3:+7.0f} us  ({min(cd) * 1e3:+.0f}..{max(cd) * 1e3:+.0f})")
if len(wall[0]) > 10:
    print("# the other build in the same rounds (other minus this: negative = this is slower)")
    for i, n in enumerate(["--version", "run -o /dev/null", "run -q -- true"]):
        print(f"{'other ' + n:<32} {statistics.median(w[10 + i] for w in wall):7.3f} ms   cpu {statistics.median(c[10 + i] for c in cpu):7.3f} ms")
    part("other run -q -- true over the floor", 12, 5)
    part("other minus this: --version", 10, 6)
    part("other minus this: run -o /dev/null", 11, 7)
    part("other minus this: run -q -- true", 12, 8)
    for name, a, b in [("other minus this, cpu: --version", 10, 6), ("other minus this, cpu: run -q -- true", 12, 8)]:
        d = [c[a] - c[b] for c in cpu]
        print(f"{name:<52} {statistics.median(d) * 1e3:+7.0f} us  ({min(d) * 1e3:+.0f}..{max(d) * 1e3:+.0f})")
PY
}
mkdir "$tmp/cwd"
if ((floor)); then
  floor
  exit
fi
grep=$(command -v grep)
pattern=fsprof_bench_pattern_that_is_not_there
cat >"$tmp/launch.c" <<'C'
#include <spawn.h>
#include <sys/wait.h>
extern char **environ;
int main(int argc, char **argv) {
    pid_t pid;
    int st;
    if (argc < 2 || posix_spawn(&pid, argv[1], 0, 0, argv + 1, environ) != 0) return 127;
    return waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
C
cc -O2 -o "$tmp/launch" "$tmp/launch.c"
cmds=(
  "true"
  "$fsprof run -q -- true"
  "$grep -r $pattern /usr/include"
  "$fsprof run -q -- $grep -r $pattern /usr/include"
  "$fsprof --version"
  "$tmp/launch $(type -P true)"
)
[ -z "$other" ] || cmds+=("$other run -q -- true")
"$grep" -r "$pattern" /usr/include >/dev/null || true # warm the page cache
for ((r = 1; r <= rounds; r++)); do
  (cd "$tmp/cwd" && "${fifo[@]}" hyperfine -N -i -w 3 -r "$runs" --prepare "find $tmp/cwd -name fsprof-*.json -delete" --style none --export-json "$tmp/round-$r.json" "${cmds[@]}" >/dev/null)
done
echo "# fsprof version: $("$fsprof" --version)"
echo "# host: $(uname -n), kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $rounds interleaved rounds x $runs runs per command (hyperfine -N), medians of the round medians"
python3 - "$tmp" "$rounds" <<'PY'
import json, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
med = [[statistics.median(r["times"]) for r in json.load(open(f"{tmp}/round-{k}.json"))["results"]]
       for k in range(1, rounds + 1)]
cpu = [[r["user"] + r["system"] for r in json.load(open(f"{tmp}/round-{k}.json"))["results"]]
       for k in range(1, rounds + 1)]
col = lambda i: [m[i] for m in med]
# CPU time (user + system of the command and its children, hyperfine's
# per-round means) moves less than wall time when the machine is busy.
def line(name, i):
    print(f"{name:<30} {statistics.median(col(i)) * 1e3:8.2f} ms   cpu {statistics.median(m[i] for m in cpu) * 1e3:6.2f} ms")
line("true", 0)
line("fsprof --version", 4)
line("minimal launcher -- true", 5)
line("fsprof run -q -- true", 1)
def added(name, a, b, cols):
    d = [m[a] - m[b] for m in cols]
    print(f"{name:<30} {statistics.median(d) * 1e3:8.2f} ms   (rounds {min(d) * 1e3:.2f}..{max(d) * 1e3:.2f})")
added("start-up added", 1, 0, med)
added("start-up added, cpu", 1, 0, cpu)
added("  floor (launcher), cpu", 5, 0, cpu)
added("  fsprof over floor, cpu", 1, 5, cpu)
line("grep -r /usr/include", 2)
line("fsprof run -q -- grep -r", 3)
ratio = [m[3] / m[2] for m in med]
print(f"{'grep ratio':<30} {statistics.median(ratio):8.3f}      (rounds {min(ratio):.3f}..{max(ratio):.3f})")
ratio_cpu = [m[3] / m[2] for m in cpu]
print(f"{'grep ratio, cpu':<30} {statistics.median(ratio_cpu):8.3f}      (rounds {min(ratio_cpu):.3f}..{max(ratio_cpu):.3f})")
if len(med[0]) > 6:
    line("other: run -q -- true", 6)
    added("other minus this build", 6, 1, med)
    added("other minus this build, cpu", 6, 1, cpu)
PY
if ((perf)); then
  echo "# perf stat -r 40: task-clock (CPU ms) and page faults"
  stat() { # LABEL PERF-OPTIONS... -- COMMAND...
    local label=$1
    shift
    (cd "$tmp/cwd" && perf stat -r 40 -x, -e task-clock,page-faults "$@" 2>&1 >/dev/null) |
      awk -F, -v l="$label" '$3 == "task-clock" { t = $1 } $3 == "page-faults" { p = $1 }
        END { printf "%-30s %8.2f ms cpu %5d faults\n", l, t, p }'
  }
  stat "true" -- true
  stat "fsprof --version" -- "$fsprof" --version
  stat "fsprof run -q -- true" -- "$fsprof" run -q -- true
  stat "  of which fsprof alone" --no-inherit -- "$fsprof" run -q -- true
  find "$tmp/cwd" -name 'fsprof-*.json' -delete
fi
if ((percall)); then
  python3 bench/user_overhead.py --fsprof "$fsprof" --rounds "$rounds" --no-peers | sed -n '/ns per call/,$p'
fi
