#!/usr/bin/env bash
# pjdfstest (POSIX file-system semantics, github.com/pjd/pjdfstest) through
# `fsprof mount --allow-other` and, for comparison, directly on the file
# system below it. pjdfstest is fetched and built here, in a scratch
# directory, and never committed.
#
#   bench/pjdfstest.sh [--src GIT-URL-OR-DIR] [--rev REV] [--fast | --passthrough] [--native]
#                      [--dir WORK] [TEST-DIR...]
#
#   --src     where to clone pjdfstest from (a URL, a clone, or a bare git
#             directory); default https://github.com/pjd/pjdfstest
#   --rev     the revision to build; default 85a8aea (docs/pjdfstest.md)
#   --fast    mount with --fast (default: observe-all)
#   --passthrough  mount with --fast --passthrough
#   --native  also run the tests on WORK/native, on LOWER's file system
#   --dir     scratch directory, on the file system to test below the
#             mount; default target/pjdfstest
#   TEST-DIR  test directories to run (chmod rename ...); default all
#
# Needs root (pjdfstest acts as other users), autoconf, automake, gcc and
# prove (perl). Prints prove's summary per run and ends with one line per
# run: files, assertions, failed; exits non-zero when a run through the
# mount failed an assertion or its profile fails `fsprof check`.
# The whole suite takes ~16 min per run on the development VM, which is
# why CI does not run it (and CI has no network to fetch it from).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

src=https://github.com/pjd/pjdfstest rev=85a8aea native=0 mode=()
work=$root/target/pjdfstest
tests=()
while (($#)); do
  case "$1" in
    --src) src=$2; shift ;;
    --rev) rev=$2; shift ;;
    --native) native=1 ;;
    --fast) mode=(--fast) ;;
    --passthrough) mode=(--fast --passthrough) ;;
    --dir) work=$2; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) echo "bench/pjdfstest.sh: unknown option $1" >&2; exit 2 ;;
    *) tests+=("$1") ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "bench/pjdfstest.sh: needs root" >&2; exit 2; }
for t in autoreconf make cc prove git; do
  command -v "$t" >/dev/null || { echo "bench/pjdfstest.sh: needs $t" >&2; exit 2; }
done

cargo build --release -q -p fsprof
fsprof=$root/target/release/fsprof

mkdir -p "$work"
pjd=$work/pjdfstest
if [ ! -x "$pjd/pjdfstest" ]; then
  rm -rf "$pjd"
  git clone -q "$src" "$pjd"
  git -C "$pjd" checkout -q "$rev"
  (cd "$pjd" && autoreconf -ifs >/dev/null 2>&1 && ./configure -q && make -s pjdfstest)
fi
echo "pjdfstest $(git -C "$pjd" rev-parse --short HEAD), kernel $(uname -r)," \
  "below: $(findmnt -no FSTYPE -T "$work")"

sel=()
if ((${#tests[@]})); then
  for t in "${tests[@]}"; do sel+=("$pjd/tests/$t"); done
else
  sel=("$pjd/tests")
fi

# One prove run in $1; prints its summary and leaves "files assertions
# failed" in $work/$2.counts.
run() {
  local dir=$1 name=$2 log=$work/$2.log
  local t0=$SECONDS
  (cd "$dir" && prove -r "${sel[@]}") >"$log" 2>&1 || true
  local files asserts failed
  files=$(sed -n 's/^Files=\([0-9]*\), Tests=\([0-9]*\),.*/\1/p' "$log")
  asserts=$(sed -n 's/^Files=\([0-9]*\), Tests=\([0-9]*\),.*/\2/p' "$log")
  # prove lists each failing file with "Failed: N" in its summary table.
  failed=$(sed -n 's/.*Failed: \([0-9]*\)).*/\1/p' "$log" |
    awk '{ s += $1 } END { print s + 0 }')
  [ -n "$files" ] || { echo "$name: prove printed no summary; see $log" >&2; return 1; }
  sed -n '/^Test Summary Report/,$p' "$log"
  echo "$files $asserts $failed" >"$work/$name.counts"
  echo "$name: $files files, $asserts assertions, $failed failed ($((SECONDS - t0)) s)"
}

lower=$work/lower mnt=$work/mnt profile=$work/mount-profile.json
rm -rf "$lower" "$work/native" "$work"/*.counts "$profile"
mkdir -p "$lower" "$mnt"
"$fsprof" mount "${mode[@]}" --allow-other "$lower" "$mnt" -o "$profile"
status=0
run "$mnt" mount || status=1
"$fsprof" umount "$mnt"
"$fsprof" check "$profile" >/dev/null || { echo "mount: profile fails fsprof check" >&2; status=1; }
read -r _ _ failed <"$work/mount.counts" || failed=1
((failed == 0)) || status=1

if ((native)); then
  mkdir -p "$work/native"
  run "$work/native" native || true
fi
for n in mount native; do
  [ -f "$work/$n.counts" ] || continue
  read -r f a x <"$work/$n.counts"
  printf '%-7s files=%s assertions=%s failed=%s\n' "$n" "$f" "$a" "$x"
done
exit $status
