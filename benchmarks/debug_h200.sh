#!/usr/bin/env bash
# The debugging benchmark's GPU check: replay, null and degenerate fixers over the whole corpus
# (builds in parallel, GPU tests and timed evaluations one at a time), then the tables
# (benchmarks/debug_tables.py: replay passes and why not; null classified-vs-label agreement by
# category; degenerate accepted at p=0 and rejected at p=0.7; pass@1/pass@k per protocol and the
# p-sweep over the reproduced instances; CUDABeaver's published figures beside) under $OUT. The whole corpus takes more than one 10-minute call, so each call does what
# fits and hands back what it finished; the next call takes that back and goes on from there.
#
# Where the GPU time goes: the reproduction stage comes first (every instance's broken file and
# reference, each built and tested once; cached). The null fixer submits the broken file and
# replay the reference, so their attempts take the reproduction's recorded runs (same file,
# instance, toolchain, device, options and attempt code: `reused_from: reproduction` in every
# round), and so does the gate's timing of each native reference; only the degenerate fixer's
# attempts are new GPU work. DEBUG_ARGS=--no-reuse runs them all, as before.
#
#   OUT=/path/to/out [CARRY=dir] bash benchmarks/debug_h200.sh [CORPUS_DIR]
#
# What comes back under $OUT (7 files, none deeper than $OUT/file):
#   repro_cache.tgz   every finished reproduction (the cache's JSON records, no workspaces or builds)
#   run_slim.tgz      the run folder without workspaces and builds: every finished attempt's code,
#                     evidence and result (enough for the tables, and to resume the run)
#   summary.json      the run's summary (partial when the time guard stopped it; "progress" says
#                     how many reproductions and attempts are done and how many are left)
#   report.md, debug_h200_tables.md, debug_h200_tables.json, run.log
# The run folder and the cache live outside $OUT (under $WORK, a fresh temporary folder).
#
# Two or three calls on a fresh machine each (the device tool's `run`, timeout_s 600):
#   call 1:  OUT=$OUT bash benchmarks/debug_h200.sh
#   between: copy run_slim.tgz and repro_cache.tgz from what came back into one ignored folder of
#            the checkout, e.g.  mkdir -p runs/h200-carry && cp FILES_AT/{run_slim,repro_cache}.tgz runs/h200-carry/
#   call 2:  carry [".tools", "runs/h200-carry"], command: CARRY=runs/h200-carry OUT=$OUT bash benchmarks/debug_h200.sh
#   call 3:  the same as call 2, after copying call 2's two tgz files over the old ones.
# The last lines printed ("debug run progress: reproductions X/65 cached (N to do); attempts Y/195
# finished (M to do)") say whether another call is needed. A reproduction is reused only on the
# same toolchain and device (nvcc, g++, CUDA folder, GPU name, driver version, sm): a machine with
# another driver (the H200s here run 580.159.03 under gVisor, 580.159.04 under Firecracker, which
# differ in what compute-sanitizer can do) reproduces again; "carried: ... reusable here" says how
# many fit. Finished attempts are reused whatever the machine; an attempt takes a carried
# reproduction's run only under the same conditions (run.log's "reuse:" lines say which not, why).
#
# The corpus: the argument, else the vendored corpora/cudabeaver, else shared/ in or beside the repo.
# Env: CARRY (folder with the last call's run_slim.tgz and repro_cache.tgz), or each on its own:
#   REPRO_CACHE=path/repro_cache.tgz, RUN_SLIM=path/run_slim.tgz; RUN_DIR, HERCULES_CACHE_DIR (default
#   under WORK); CALL_S (600: the call's limit; the run is stopped by SIGINT RESERVE_S=60 s before it,
#   leaving room for the tables and the packing), DEBUG_TIME_S (the run's own limit, instead);
#   FIXERS (default "degenerate null replay": the new GPU work of each task first, then the two that
#   take the reproduction's runs), DEBUG_ARGS (e.g. "--family kernelbench", "--no-reuse"), JOBS (16; core evaluations of
#   KernelBench instances run two at a time whatever JOBS says: hercules/debug/evaluations.py),
#   DEVICE (cuda; cpu for a local check without a GPU), BUILD_TIMEOUT_S (240), TEST_TIMEOUT_S (60;
#   KernelBench problems with multi-GB inputs need minutes).
set -u
START=$SECONDS
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/debug-h200-out}
mkdir -p "$OUT"
CORPUS=${1:-}
for c in corpora/cudabeaver shared/corpora/cudabeaver ../shared/corpora/cudabeaver; do
  [ -z "$CORPUS" ] && [ -d "$c" ] && CORPUS=$c
done
[ -z "$CORPUS" ] && { echo "no corpus found; pass its folder as the first argument" >&2; exit 2; }
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/hercules-debug-h200.XXXXXX")}
RUN_DIR=${RUN_DIR:-$WORK/run}
export HERCULES_CACHE_DIR=${HERCULES_CACHE_DIR:-$WORK/cache}
REPRO=$HERCULES_CACHE_DIR/debug-reproduction
PY=${PYTHON:-$(command -v python3 || echo python)}
[ -z "${PYTHON:-}" ] && [ -x .venv/bin/python ] && PY=.venv/bin/python
# The sandbox needs bubblewrap; the GPU machine has no package registry, so the .deb travels in
# .tools/ (carry it), as in gpu_session.sh.
if ! command -v bwrap >/dev/null && ls .tools/bubblewrap_*.deb >/dev/null 2>&1; then
  dpkg -x .tools/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
command -v bwrap >&2 || echo "bwrap not found (carry .tools/ with the bubblewrap .deb)" >&2
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

# What an earlier call finished: its reproductions into the cache, its run folder back in place.
if [ -n "${CARRY:-}" ]; then
  [ -d "$CARRY" ] || { echo "CARRY=$CARRY: no such folder" >&2; exit 2; }
  [ -f "$CARRY/repro_cache.tgz" ] && REPRO_CACHE=${REPRO_CACHE:-$CARRY/repro_cache.tgz}
  [ -f "$CARRY/run_slim.tgz" ] && RUN_SLIM=${RUN_SLIM:-$CARRY/run_slim.tgz}
fi
for f in ${REPRO_CACHE:-} ${RUN_SLIM:-}; do
  [ -f "$f" ] || { echo "$f: no such file" >&2; exit 2; }
done
mkdir -p "$REPRO" "$RUN_DIR"
[ -n "${REPRO_CACHE:-}" ] && tar xzf "$REPRO_CACHE" -C "$REPRO"
[ -n "${RUN_SLIM:-}" ] && tar xzf "$RUN_SLIM" -C "$RUN_DIR"
echo "corpus: $CORPUS  run: $RUN_DIR  cache: $HERCULES_CACHE_DIR  python: $PY" >&2
echo "carried: $(find "$REPRO" -maxdepth 1 -name '*.json' | wc -l) reproduction records," \
  "$(find "$RUN_DIR" -path '*/attempts/*' -name result.json | wc -l) stored rounds" >&2
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader >&2 || true
command -v nvcc >&2 || ls /usr/local/cuda/bin/nvcc >&2 || echo "nvcc not on PATH" >&2

# The run gets what is left of the call but RESERVE_S; SIGINT stops it in seconds (builds and tests
# in flight killed, everything finished kept, a partial summary written); SIGKILL 15 s later if not.
GUARD=${DEBUG_TIME_S:-$(( ${CALL_S:-600} - ${RESERVE_S:-60} - (SECONDS - START) ))}
echo "time guard: ${GUARD} s" >&2
timeout --preserve-status --signal=INT --kill-after=15 "$GUARD" "$PY" -m hercules.debug.cli run \
  --corpus "$CORPUS" $(for f in ${FIXERS:-degenerate null replay}; do echo --fixer "$f"; done) ${DEBUG_ARGS:-} \
  --protocol "n=1,iter=1,fb=log,p=0.7" --device "${DEVICE:-cuda}" --jobs "${JOBS:-16}" \
  --build-timeout "${BUILD_TIMEOUT_S:-240}" --test-timeout "${TEST_TIMEOUT_S:-60}" --budget 0.1 --out "$RUN_DIR" --json \
  > "$OUT/summary.json" 2> "$OUT/run.log"
echo "run exit status: $? (130: stopped by the time guard, what finished is kept; 137: killed) after $((SECONDS - START)) s" >&2
tail -n 4 "$OUT/run.log" >&2
"$PY" benchmarks/debug_tables.py --corpus "$CORPUS" "$RUN_DIR" "$OUT"
cp "$RUN_DIR/report.md" "$OUT/report.md" 2>/dev/null || true
# The run without its workspaces and builds (a few MiB), and the reproduction cache's records.
tar czf "$OUT/run_slim.tgz" -C "$RUN_DIR" --exclude='*/workspace' --exclude='*/kbbuild' \
  --exclude='*.so' --exclude='*.o' --exclude='*.tmp' . && du -h "$OUT/run_slim.tgz" >&2
(cd "$REPRO" && find . -maxdepth 1 -name '*.json' -print0 | tar czf "$OUT/repro_cache.tgz" --null -T -) \
  && du -h "$OUT/repro_cache.tgz" >&2
echo "packed: $(tar tzf "$OUT/repro_cache.tgz" | grep -c '\.json$') reproduction records," \
  "$(tar tzf "$OUT/run_slim.tgz" | grep -c '/attempts/.*/result\.json$') stored rounds; $(ls "$OUT" | wc -l) files under \$OUT" >&2
grep '^debug run progress:' "$OUT/run.log" | tail -n 1 | grep . >&2 \
  || echo "debug run progress: the run printed none (killed?); the packed counts above are what is kept" >&2
echo "next call: carry a folder holding \$OUT's run_slim.tgz and repro_cache.tgz, CARRY=that/folder ($((SECONDS - START)) s so far)" >&2
