#!/usr/bin/env bash
# Issue 36's GPU checks inside one device call, each stage printing as it goes, under a total budget.
#
#   OUT=... CALL_S=570 bash benchmarks/issue36_h200.sh "paths honest cudal1"   (stages, in order)
#
# paths:   the GPU tests of the device pack's layouts and the honest references (PATHS_S, 150 s)
# honest:  the red team's honest matmul control through `hercules eval --json` (the side-by-side note)
# cudal1:  CUDA-L1's sample through benchmarks/cudal1_h200.sh for what is left of CALL_S (resumes
#          runs/cudal1-h200)
# zygote:  the reference worker's fork server and the worker process tests, on the GPU machine's torch
# recheck: the CUDA-L1 records in runs/cudal1-recheck/*.json through one bench (RECHECK_S, 240 s),
#          into a run folder of their own (runs/cudal1-recheck/run)
# redteam: benchmarks/redteam_classes.py --all through one bench (REDTEAM_JOBS evaluations in flight)
#          for REDTEAM_S (default: what is left of CALL_S); resumes runs/redteam-classes
#
# What comes back resumes the next call once unpacked here, each at its own level:
#   tar xzf cl1_run.tgz -C runs/cudal1-h200      tar xzf redteam_run.tgz -C runs
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/hercules-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
if ! command -v bwrap >/dev/null && ls .tools/bubblewrap_*.deb >/dev/null 2>&1; then
  dpkg -x .tools/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
START=$(date +%s)
left() { echo $(( ${CALL_S:-570} - ($(date +%s) - START) )); }
git rev-parse --short HEAD 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for stage in ${1:-paths honest}; do
  echo "=== $stage $(date +%T), $(left) s left"
  case $stage in
    paths)
      timeout ${PATHS_S:-150} python3 -m pytest -v -p no:cacheprovider -m gpu tests/harness/test_device_pack.py \
        tests/harness/test_harness_gpu.py -k "transposed or reference_as_its_own or honest_cuda" 2>&1 \
        | tee "$OUT/gpu_paths.log" | grep --line-buffered -E "PASS|FAIL|ERROR|passed|failed|Error" ;;
    honest)
      timeout 120 python3 -m hercules.cli eval --device cuda --json --problem tests/redteam/problem_matmul.py \
        --candidate tests/redteam/honest.py > "$OUT/honest_matmul.json" 2> "$OUT/honest_matmul.err"
      python3 - "$OUT/honest_matmul.json" <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))
print(v["status"], v.get("flags"), v.get("speedup"), v.get("timing", {}) and v["timing"].get("bounded_by"))
for note in v.get("notes") or []:
    print("note:", note)
EOF
      ;;
    cudal1)
      rm -f runs/cudal1/a100_sample.json
      OUT=$OUT CL1_TIME_S=$(( $(left) - 45 )) bash benchmarks/cudal1_h200.sh --eval-jobs 6 --baselines eager 2>&1 \
        | grep --line-buffered -v "^\s*$" | tail -n +1 ;;
    zygote)
      timeout 120 python3 -m pytest -q -p no:cacheprovider tests/harness/test_zygote.py tests/harness/test_ipc.py 2>&1 \
        | tee "$OUT/zygote.log" | grep --line-buffered -E "passed|failed|Error|assert" ;;
    recheck)
      timeout --signal=INT --kill-after=30 ${RECHECK_S:-240} python3 -m hercules.cli bench runs/cudal1-recheck/*.json \
        --device cuda --run-dir runs/cudal1-recheck/run --eval-jobs 4 --baselines eager 2>&1 \
        | tee "$OUT/recheck_bench.log" | grep --line-buffered -v "^\s*$"
      python3 benchmarks/cudal1_table.py runs/cudal1-recheck/run > "$OUT/recheck_table.md" 2>&1; cat "$OUT/recheck_table.md" ;;
    redteam)
      timeout --signal=INT --kill-after=20 ${REDTEAM_S:-$(( $(left) - 30 ))} python3 benchmarks/redteam_classes.py --device cuda --all \
        --bench-jobs ${REDTEAM_JOBS:-4} --run-dir runs/redteam-classes --out /tmp/redteam-verdicts \
        2> "$OUT/redteam_bench.err" | tee "$OUT/redteam_classes.md"
      tar czf "$OUT/redteam_run.tgz" --exclude=cache --exclude="*.so" --exclude="*.o" -C runs redteam-classes ;;
  esac
done
echo "=== done $(date +%T), $(left) s left"
