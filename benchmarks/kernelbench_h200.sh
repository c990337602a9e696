#!/usr/bin/env bash
# The KernelBench sample (or --full) on the GPU machine inside one call, resumable across calls.
#
#   OUT=/path/to/out KB_TIME_S=500 bash benchmarks/kernelbench_h200.sh [kernelbench.py options]
#
# The corpus: runs/kernelbench-corpus (carry it: shared/ does not travel). The run folder:
# runs/kernelbench-h200 (carry it to resume; finished verdicts are read back, not re-run). At the end
# (or when KB_TIME_S runs out: SIGINT writes the summary of what finished) the run folder, without
# its caches and builds, goes to $OUT/kb_run.tgz; unpack it into runs/kernelbench-h200 here.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/hercules-out}
RUN_DIR=${KB_RUN_DIR:-runs/kernelbench-h200}
mkdir -p "$OUT" "$RUN_DIR"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
if ! command -v bwrap >/dev/null && ls .tools/bubblewrap_*.deb >/dev/null 2>&1; then
  dpkg -x .tools/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
timeout --signal=INT --kill-after=30 "${KB_TIME_S:-500}" python3 benchmarks/kernelbench.py \
  --corpus runs/kernelbench-corpus --device cuda --run-dir "$RUN_DIR" "$@" 2>&1 | tee "$OUT/kernelbench.log"
cp "$RUN_DIR"/kernelbench_summary.md "$OUT/" 2>/dev/null
tar czf "$OUT/kb_run.tgz" -C "$RUN_DIR" --exclude=cache --exclude='*.so' --exclude='*.o' . && du -h "$OUT/kb_run.tgz"
