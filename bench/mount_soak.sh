#!/usr/bin/env bash
# The long versions of fsprof mount's exercisers (CI runs short ones):
# fsx with 1,000,000 operations (fixed seed, printed on a mismatch) and
# 8 threads of mixed operations for 30 s. Needs root (real mounts).
#   bench/mount_soak.sh [FSX_OPS] [CONC_SECS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
ops=${1:-1000000}
secs=${2:-30}
seed=${3:-0x5eedf5c0ffee}
FSPROF_FSX_OPS=$ops FSPROF_FSX_SEED=$seed FSPROF_CONC_SECS=$secs \
  cargo nextest run -p fsprof --test mount --run-ignored all -E 'test(/^(fsx|concurrency)::/)' --no-capture \
  2>&1 | grep -E 'fsx:|concurrency:|PASS|FAIL|panicked|mismatch'
