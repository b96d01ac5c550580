#!/usr/bin/env bash
# Where `fsprof run -q -- true`'s start-up goes, against the floor of the
# machine it runs on: interleaved hyperfine rounds (medians of the round
# medians, wall and CPU time) of
#
#   true                        a dynamically linked program that does nothing
#   static return 0             a statically linked (glibc) C program that does
#                               nothing: the cost of any exec here, without the
#                               dynamic loader (glibc's CPUID start-up included)
#   launcher -- true            a minimal C launcher (vfork + execve + waitpid),
#                               dynamic: the floor of any tool that starts a
#                               command
#   static launcher -- true     the same, linked statically (as fsprof is)
#   static launcher, shim       the same with fsprof's preload shim in the
#                               child, inactive (no run): loading the shim
#   fsprof --version            exec'ing and starting fsprof's own binary
#   fsprof run -o /dev/null     the run without creating a profile file
#   fsprof run                  the issue's command (a new profile file each
#                               run, in an emptied directory)
#
# and the differences between them: the parts of fsprof's added time.
# With --fifo, every command runs under SCHED_FIFO (chrt -f 50; needs
# root), which keeps other processes off the CPUs while it runs: on a busy
# machine wall times then come close to what an idle one gives.
#
# usage: bench/startup_floor.sh [--rounds N] [--runs N] [--fsprof PATH] [--fifo]
# Needs hyperfine, cc with static glibc (libc6-dev), a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=11 runs=30 fifo=()
fsprof="$PWD/target/release/fsprof"
while (($#)); do
  case "$1" in
    --rounds) rounds=$2; shift ;;
    --runs) runs=$2; shift ;;
    --fsprof) fsprof=$2; shift ;;
    --fifo) fifo=(chrt -f 50) ;;
    *) echo "usage: $0 [--rounds N] [--runs N] [--fsprof PATH] [--fifo]" >&2; exit 2 ;;
  esac
  shift
done
command -v hyperfine >/dev/null || { echo "needs hyperfine: apt-get install hyperfine" >&2; exit 2; }
[ -x "$fsprof" ] || { echo "$fsprof not found: cargo build --release" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/launch.c" <<'C'
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
/* launch [--preload SHIM] PROGRAM ARGS...: vfork + execve + waitpid. */
int main(int argc, char **argv) {
    int at = 1;
    if (argc > 3 && strcmp(argv[1], "--preload") == 0) {
        setenv("LD_PRELOAD", argv[2], 1);
        at = 3;
    }
    if (at >= argc) return 127;
    pid_t pid = vfork();
    if (pid == 0) {
        execve(argv[at], argv + at, environ);
        _exit(127);
    }
    int st;
    return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
C
echo 'int main(void) { return 0; }' >"$tmp/ret0.c"
cc -O2 -o "$tmp/launch" "$tmp/launch.c"
cc -O2 -static -o "$tmp/launch-static" "$tmp/launch.c"
cc -O2 -static -o "$tmp/ret0-static" "$tmp/ret0.c"
# The shim fsprof installs (and runs with) is the one to load.
(cd "$tmp" && "$fsprof" run -q -o /dev/null -- true 2>/dev/null)
shim=$(ls -t "${TMPDIR:-/tmp}/fsprof-$(id -u)"/libfsprof_shim-*.so | head -1)
true=$(type -P true)
mkdir "$tmp/cwd"
cmds=(
  "$true"
  "$tmp/ret0-static"
  "$tmp/launch $true"
  "$tmp/launch-static $true"
  "$tmp/launch-static --preload $shim $true"
  "$fsprof --version"
  "$fsprof run -q -o /dev/null -- true"
  "$fsprof run -q -- true"
)
for ((r = 1; r <= rounds; r++)); do
  (cd "$tmp/cwd" && "${fifo[@]}" hyperfine -N -i -w 3 -r "$runs" --prepare "find $tmp/cwd -name fsprof-*.json -delete" \
    --style none --export-json "$tmp/round-$r.json" "${cmds[@]}" >/dev/null 2>&1)
done
echo "# fsprof version: $("$fsprof" --version); shim $(basename "$shim")"
echo "# host: $(uname -n), kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)${fifo:+, under SCHED_FIFO}"
echo "# $rounds interleaved rounds x $runs runs per command (hyperfine -N), medians of the round medians; cpu = user + system"
python3 - "$tmp" "$rounds" <<'PY'
import json, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
res = [json.load(open(f"{tmp}/round-{k}.json"))["results"] for k in range(1, rounds + 1)]
wall = [[statistics.median(r["times"]) * 1e3 for r in rr] for rr in res]
cpu = [[(r["user"] + r["system"]) * 1e3 for r in rr] for rr in res]
names = ["true", "static return 0", "launcher -- true", "static launcher -- true",
         "static launcher, shim loaded", "fsprof --version", "fsprof run -o /dev/null",
         "fsprof run -q -- true"]
for i, n in enumerate(names):
    print(f"{n:<32} {statistics.median(w[i] for w in wall):7.3f} ms   cpu {statistics.median(c[i] for c in cpu):7.3f} ms")
print("# parts (median of the per-round differences, wall; range over rounds)")
def part(name, a, b):
    d = [w[a] - w[b] for w in wall]
    print(f"{name:<52} {statistics.median(d) * 1e3:+7.0f} us  ({min(d) * 1e3:+.0f}..{max(d) * 1e3:+.0f})")
part("fsprof run -q -- true over true (the target: +1 ms)", 7, 0)
part("  dynamic launcher over true (any launcher's floor)", 2, 0)
part("  static launcher over true", 3, 0)
part("  loading the shim, inactive (shim launcher - static)", 4, 3)
part("  fsprof's binary over a static C program (--version)", 5, 1)
part("  fsprof run (no file) over the static launcher, shim", 6, 4)
part("  creating the profile file", 7, 6)
PY
