#!/usr/bin/env bash
# The debugging benchmark's GPU check, in one call (< 8 minutes on one H200 with 16 cores):
# replay, null and degenerate fixers over the whole corpus (builds in parallel, GPU tests and
# timed evaluations one at a time), then the tables (replay passes and why not; null
# classified-vs-label agreement; degenerate accepted at p=0 and rejected at p=0.7) under $OUT.
#
#   OUT=/path/to/out bash benchmarks/debug_h200.sh [CORPUS_DIR]
#
# The corpus: the argument, else the vendored corpora/cudabeaver, else shared/ in or beside the repo.
# A run cut by the time guard keeps every finished attempt; run again with RUN_DIR=<its run> to resume
# (on another machine: unpack \$OUT/run_slim.tgz under runs/ and carry that folder).
# Env: FIXERS (default "replay null degenerate"), DEBUG_ARGS (e.g. "--family kernelbench"), DEBUG_TIME_S, JOBS,
# BUILD_TIMEOUT_S (240), TEST_TIMEOUT_S (60; KernelBench problems with multi-GB inputs need minutes).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/debug-h200-out}
mkdir -p "$OUT"
CORPUS=${1:-}
for c in corpora/cudabeaver shared/corpora/cudabeaver ../shared/corpora/cudabeaver; do
  [ -z "$CORPUS" ] && [ -d "$c" ] && CORPUS=$c
done
[ -z "$CORPUS" ] && { echo "no corpus found; pass its folder as the first argument" >&2; exit 2; }
RUN_DIR=${RUN_DIR:-$OUT/run}
PY=${PYTHON:-python}
[ -x .venv/bin/python ] && PY=.venv/bin/python
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export HERCULES_CACHE_DIR=${HERCULES_CACHE_DIR:-$OUT/cache}
echo "corpus: $CORPUS  run: $RUN_DIR  python: $PY" >&2
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader >&2 || true
command -v nvcc >&2 || ls /usr/local/cuda/bin/nvcc >&2 || echo "nvcc not on PATH" >&2

# 400 s for the run leaves room for start-up and the tables inside 8 minutes.
timeout --signal=INT --kill-after=20 "${DEBUG_TIME_S:-400}" "$PY" -m hercules.debug.cli run \
  --corpus "$CORPUS" $(for f in ${FIXERS:-replay null degenerate}; do echo --fixer "$f"; done) ${DEBUG_ARGS:-} \
  --protocol "n=1,iter=1,fb=log,p=0.7" --device cuda --jobs "${JOBS:-16}" \
  --build-timeout "${BUILD_TIMEOUT_S:-240}" --test-timeout "${TEST_TIMEOUT_S:-60}" --budget 0.1 --out "$RUN_DIR" --json > "$OUT/summary.json" \
  2> "$OUT/run.log"
echo "run exit status: $?" >&2
tail -n 5 "$OUT/run.log" >&2
"$PY" benchmarks/debug_tables.py "$RUN_DIR" "$OUT"
cp "$RUN_DIR/report.md" "$OUT/report.md" 2>/dev/null || true
# The run without its workspaces and builds (a few MiB): every attempt's code, evidence and result,
# enough for the tables and to resume the run elsewhere (unpack it under runs/, carry it, RUN_DIR=).
tar czf "$OUT/run_slim.tgz" -C "$RUN_DIR" --exclude='*/workspace' --exclude='*/kbbuild' \
  --exclude='*.so' --exclude='*.o' . && du -h "$OUT/run_slim.tgz" >&2
