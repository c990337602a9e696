#!/usr/bin/env bash
# Two lanes of gpu_session.sh at once on a two-GPU machine: each lane gets one GPU, half the CPU
# cores (taskset) and its own cache, so neither lane's builds or measurements touch the other's.
# Usage: bash benchmarks/gpu_pair.sh "STAGES FOR GPU 0" "STAGES FOR GPU 1" [SECONDS]
# Env as for gpu_session.sh; LANE0_ENV / LANE1_ENV: extra 'NAME="value" ...' for one lane only.
# Everything the lanes write comes back as $OUT/lanes.tgz (lane0/, lane1/).
set -uo pipefail
OUT=${OUT:-/tmp/hercules-out}
LIMIT=${3:-570}
cores=$(nproc)
half=$((cores / 2))
run_lane() {  # lane stages first_core last_core
  mkdir -p "$OUT/lane$1"
  ( [ -n "${4:-}" ] && eval "export $4"  # shell words: NAME="a value with spaces" works
    CUDA_VISIBLE_DEVICES=$1 OUT=$OUT/lane$1 HERCULES_LANE_CACHE=/tmp/hercules-cache-$1 \
      timeout "$LIMIT" taskset -c "$3" bash benchmarks/gpu_session.sh "$2" > "$OUT/lane$1/session.log" 2>&1 )
  echo "lane $1 ($2) exit $?" >> "$OUT/lane$1/session.log"
}
run_lane 0 "$1" "0-$((half - 1))" "${LANE0_ENV:-}" &
run_lane 1 "$2" "$half-$((cores - 1))" "${LANE1_ENV:-}" &
wait
for lane in 0 1; do echo "##### lane $lane"; tail -60 "$OUT/lane$lane/session.log"; done
# Both lanes ran the debugging benchmark (e.g. split by family): one table over both runs.
if [ -d "$OUT/lane0/debug/run" ] && [ -d "$OUT/lane1/debug/run" ]; then
  echo "##### both lanes' debugging runs"
  PYTHONPATH=$PWD/src python3 benchmarks/debug_tables.py "$OUT/lane0/debug/run" "$OUT/lane1/debug/run" "$OUT/debug_merged"
fi
# A call brings back at most 8 files: both lanes' outputs travel as one archive.
# (without the debugging benchmark's run folders and caches: their builds put it over 16 MiB)
tar czf "$OUT/lanes.tgz" -C "$OUT" --exclude='lane*/debug/run' --exclude='lane*/debug/cache' lane0 lane1 \
  && rm -rf "$OUT/lane0" "$OUT/lane1"
