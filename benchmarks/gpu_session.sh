#!/usr/bin/env bash
# One call on the GPU machine: environment, GPU tests, the built-in suite, fidelity, throughput,
# and the debugging benchmark, optimiser replay, reward-service load test, compiler checks and decode benchmark.
# Usage: bash benchmarks/gpu_session.sh "tests suite fidelity throughput"   (stages to run)
# Stages: tests cputests redteam redteam_gpu trace spread adversarial suite fidelity debug optimize serve
# compile decode throughput.
# Env: GPU_TESTS (test path), REDTEAM_K (a -k expression after "cuda and"), TRACE_REPEAT, SUITE_ARGS (extra bench options), THROUGHPUT_COUNT, COMPILE_CHECKS
# ("lang:dtype ...", empty for none), COMPILE_TESTS=0, COMPILE_PYTEST_K (a -k expression), DECODE_ARGS.
# Writes logs and reports under $OUT (at most 8 files come back).
set -uo pipefail
STAGES=${1:-"tests suite"}
OUT=${OUT:-/tmp/hercules-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 HERCULES_CACHE_DIR=${HERCULES_LANE_CACHE:-/tmp/hercules-cache}
# The sandbox needs bubblewrap; the GPU machine has no package registry, so the .deb travels in
# .tools/ (carry it) and is unpacked here.
if ! command -v bwrap >/dev/null && ls .tools/bubblewrap_*.deb >/dev/null 2>&1; then
  dpkg -x .tools/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
# Expert libraries (hercules.experts) travel as wheels in .whl/ (carry it): liger-kernel is pure Python.
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
python3 -c "from hercules.harness.sandbox import probe; print('sandbox:', probe())"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
for stage in $STAGES; do
  echo "=== $stage $(date +%T)"
  case $stage in
    tests)
      python3 -m pytest ${GPU_PYTEST_ARGS:--q -x} -m gpu ${GPU_TESTS:-tests} 2>&1 | tee "$OUT/gpu_tests.log" | tail -40 ;;
    cputests)
      python3 -m pytest -q tests/harness tests/test_cli_commands.py 2>&1 | tee "$OUT/harness_tests.log" | tail -15 ;;
    redteam)
      python3 -m pytest -q tests/harness/test_redteam.py 2>&1 | tee "$OUT/redteam_cpu.log" | tail -15 ;;
    trace)
      # The honest red-team control, request by request: bounded_by should be wall or events.
      python3 benchmarks/timing_trace.py --problem tests/redteam/problem_matmul.py --candidate tests/redteam/honest.py \
        --repeat ${TRACE_REPEAT:-3} 2>&1 | tee "$OUT/trace.log" | grep -v "^reference" ;;
    spread)
      # The same host-bound call alternately in two processes (plain, like the candidate worker, pinned).
      python3 benchmarks/process_spread.py --device cuda --out "$OUT/process_spread.json" 2>&1 | tee "$OUT/process_spread.log" | tail -8 ;;
    redteam_gpu)
      python3 -m pytest -v -s -p no:cacheprovider tests/harness/test_redteam.py -k "cuda and (${REDTEAM_K:-not bombs})" 2>&1 \
        | tee "$OUT/redteam_cuda.log" | grep --line-buffered -E "REDTEAM|FAILED|Error|passed|failed" ;;
    adversarial)
      python3 -m pytest -q tests/test_adversarial_corpus.py 2>&1 | tee "$OUT/adversarial.log" | tail -15 ;;
    suite)
      python3 -m hercules.cli bench --run-dir /tmp/suite-run --device cuda ${SUITE_ARGS:-} > "$OUT/suite.log" 2>&1
      tail -45 "$OUT/suite.log"
      cp /tmp/suite-run/summary.md /tmp/suite-run/report.html /tmp/suite-run/summary.json "$OUT/" 2>/dev/null
      tar czf "$OUT/suite-logs.tgz" -C /tmp/suite-run --exclude '*.so' --exclude '*.o' . 2>/dev/null ;;
    fidelity)
      python3 benchmarks/fidelity.py --problem src/hercules/suite/problems/${FIDELITY_PROBLEM:-mish_fp32}.py \
        --candidate ${FIDELITY_CANDIDATE:-src/hercules/suite/candidates/mish_fp32/triton_fused.py} --device cuda 2>&1 | tee "$OUT/fidelity.log" ;;
    debug)
      OUT=$OUT/debug bash benchmarks/debug_h200.sh 2>&1 | tail -40 ;;
    optimize)
      python3 benchmarks/optimize_replay_h200.py 2>&1 | tail -30 ;;
    serve)
      python3 benchmarks/serve_load.py --device cuda 2>&1 | tail -30 ;;
    compile)
      for check in ${COMPILE_CHECKS-cuda:bfloat16 triton:bfloat16}; do
        lang=${check%%:*}; dtype=${check##*:}; name=selfcheck_${lang}_$dtype
        python3 -m hercules.compile.selfcheck --lang $lang --device cuda --dtype $dtype --batches 1,2,8 --per-template 3 \
          > "$OUT/$name.json" 2> "$OUT/$name.err"
        echo "$name exit $?"; tail -5 "$OUT/$name.err"
        python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('checked', d['checked'], 'failed', d['failed']); [print(json.dumps(r)) for r in d['results'] if r['ok'] is False]" "$OUT/$name.json"
      done
      [ "${COMPILE_TESTS:-1}" = 1 ] && python3 -m pytest -q -x -m gpu ${COMPILE_PYTEST_K:+-k "$COMPILE_PYTEST_K"} tests/compile 2>&1 | tee "$OUT/compile_tests.log" | tail -30 ;;
    decode)
      python3 benchmarks/decode.py --out "$OUT/decode.json" ${DECODE_ARGS:-} 2>&1 | tee "$OUT/decode.log" | tail -40 ;;
    throughput)
      python3 benchmarks/throughput.py --count ${THROUGHPUT_COUNT:-50} --run-dir /tmp/throughput ${THROUGHPUT_ARGS:-} 2>&1 | tee "$OUT/throughput.log" | tail -5
      # Verdicts and build records, for reading stage by stage (the build steps are in the log).
      (cd /tmp/throughput && find . -name verdict.json -o -name prebuild.json) \
        | tar czf "$OUT/throughput-details.tgz" -C /tmp/throughput -T - 2>/dev/null ;;
  esac
done
echo "=== done $(date +%T)"
