#!/usr/bin/env bash
# References as their own candidates on the GPU machine, under one or more source trees, in one
# device call: the side-by-side speedup against eager should read 1.0 (benchmarks/self_ratio.py
# prints each side's own reports beside it). Then the GPU tests of the hand-over, then (KB_AFTER=1)
# the KernelBench sample for what is left of CALL_S.
#
#   OUT=$OUT CALL_S=540 VARIANTS="this old" bash benchmarks/self_ratio_gpu.sh
#
# A variant other than "this" is runs/NAME/src (for example `git archive be7e254 src | tar -x -C
# runs/old` for an A/B against that commit); carry runs/ with the call. Results: $OUT/self_NAME.jsonl.
set -u
cd "$(dirname "$0")/.."
START=$(date +%s)
OUT=${OUT:-/tmp/hercules-out}; mkdir -p "$OUT"
if ! command -v bwrap >/dev/null && ls .tools/bubblewrap_*.deb >/dev/null 2>&1; then
  dpkg -x .tools/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
PROBLEMS=${PROBLEMS:-"runs/kernelbench-corpus/level1/31_ELU.py benchmarks/problems/tanh_mul.py"}
for v in ${VARIANTS:-this}; do
  case $v in this) export PYTHONPATH=$PWD/src;; *) export PYTHONPATH=$PWD/runs/$v/src;; esac
  echo "=== $v $(date +%T)"
  for p in $PROBLEMS; do
    [ -f "$p" ] || { echo "no $p"; continue; }
    timeout 200 python3 benchmarks/self_ratio.py --device cuda "$p" --repeat ${REPEAT:-1} --out "$OUT/self_$v.jsonl" | cut -c1-2500
  done
done
export PYTHONPATH=$PWD/src
timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/harness/test_harness_gpu.py \
  tests/harness/test_device_pack.py -k 'reference_as_its_own or reserved or transposed' 2>&1 | tail -5
LEFT=$(( ${CALL_S:-540} - ($(date +%s) - START) - 20 ))
if [ "${KB_AFTER:-0}" = 1 ] && [ $LEFT -gt 90 ]; then
  echo "=== kernelbench sample $(date +%T), $LEFT s"
  OUT=$OUT KB_TIME_S=$LEFT bash benchmarks/kernelbench_h200.sh --eval-jobs 6 2>&1 | grep -E "^L[123] |wall|^\| all"
fi
