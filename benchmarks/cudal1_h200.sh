#!/usr/bin/env bash
# CUDA-L1's released kernels through `hercules bench` on the GPU machine, inside one call.
#
#   OUT=/path/to/out CL1_TIME_S=480 bash benchmarks/cudal1_h200.sh [bench options]
#
# The records: runs/cudal1/*.json (carry the folder; shared/ does not travel), e.g. a sample made
# here by benchmarks/cudal1_sample.py. The run folder runs/cudal1-h200 resumes across calls (carry
# it back unpacked from $OUT/cl1_run.tgz). When CL1_TIME_S runs out, SIGINT stops the bench, which
# keeps and reports what finished.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/hercules-out}
RUN_DIR=${CL1_RUN_DIR:-runs/cudal1-h200}
mkdir -p "$OUT" "$RUN_DIR"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
if ! command -v bwrap >/dev/null && ls .tools/bubblewrap_*.deb >/dev/null 2>&1; then
  dpkg -x .tools/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
timeout --signal=INT --kill-after=30 "${CL1_TIME_S:-480}" python3 -m hercules.cli bench runs/cudal1/*.json \
  --device cuda --run-dir "$RUN_DIR" "$@" 2>&1 | tee "$OUT/cudal1_bench.log" | grep --line-buffered -v "^\s*$"
python3 benchmarks/cudal1_table.py "$RUN_DIR" > "$OUT/cudal1_table.md" 2>&1; cat "$OUT/cudal1_table.md"
cp "$RUN_DIR"/summary.md "$OUT/cudal1_summary.md" 2>/dev/null
tar czf "$OUT/cl1_run.tgz" -C "$RUN_DIR" --exclude=cache --exclude='*.so' --exclude='*.o' . && du -h "$OUT/cl1_run.tgz"
