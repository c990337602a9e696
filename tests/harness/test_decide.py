"""The status precedence and speedups of ``decide``, without any process."""

from __future__ import annotations

import pytest

from hercules.harness.decide import (
    BaselineOutcome,
    CheckOutcome,
    Context,
    Failure,
    Finding,
    IntegrityOutcome,
    MeasureOutcome,
    ScanOutcome,
    decide,
)
from hercules.harness.records import Cause, CheckResult, Flag, Status, TimingResult

CTX = Context(problem="p", candidate="c", device="cpu", limits={"call_s": 20.5})
GOOD = CheckOutcome(CheckResult(correct=True, trials=5, max_abs_err=1e-7, rel_err=1e-7, ref_rel_err=1e-7))
BAD = CheckOutcome(CheckResult(correct=False, trials=5, max_abs_err=1.0, rel_err=1.0, ref_rel_err=1e-7,
                               error="trial 0: values differ"))


def timing(ms: float) -> TimingResult:
    return TimingResult(method="cuda_events", reps=10, median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0.0,
                        std_ms=0.0, input_sets=2, l2_flushed=True, wall_ms=ms)


def test_clean_correct_candidate_is_ok_with_speedups_against_every_baseline():
    v = decide(CTX, ScanOutcome(), check=GOOD, measure=MeasureOutcome(timing(0.5)),
               baselines=BaselineOutcome({"eager": 1.0, "compile": 0.25}))
    assert v.status is Status.OK and v.flags == () and v.error is None and v.cause is Cause.NONE
    assert v.speedup.eager == pytest.approx(2.0) and v.speedup.compile == pytest.approx(0.5)
    assert v.speedup.best == pytest.approx(0.5) and v.cand_ms == 0.5 and v.limits == {"call_s": 20.5}


def test_failure_decides_before_everything_and_carries_its_cause():
    v = decide(CTX, ScanOutcome(findings=(Finding("side_stream", "static"),)), check=GOOD,
               failure=Failure(Status.TIMEOUT, Cause.TIMEOUT, "trial 1: no answer within 20 s"))
    assert v.status is Status.TIMEOUT and v.cause is Cause.TIMEOUT and not v.correct
    assert v.cand_ms is None and v.speedup.eager is None and v.flags == ("side_stream",)


def test_incorrect_outranks_flags():
    v = decide(CTX, ScanOutcome(findings=(Finding("monkey_patch", "x"),)), check=BAD)
    assert v.status is Status.INCORRECT and v.error == "trial 0: values differ" and v.cand_ms is None


def test_revalidation_failure_makes_a_correct_candidate_incorrect_with_its_flag():
    measure = MeasureOutcome(None, findings=(Finding(Flag.RESULT_CACHE.value, "stale"),), revalidated=False,
                             revalidation_error="outputs wrong after inputs were refreshed in place")
    v = decide(CTX, ScanOutcome(), check=GOOD, measure=measure)
    assert v.status is Status.INCORRECT and not v.correct and "refreshed" in v.error
    assert "result_cache" in v.check.flags and v.flags == ("result_cache",)


def test_any_flag_makes_a_correct_candidate_suspicious_and_it_keeps_its_times():
    v = decide(CTX, ScanOutcome(), check=GOOD, measure=MeasureOutcome(timing(1.0)),
               integrity=IntegrityOutcome(findings=(Finding("global_state", "changed settings: x"),)),
               baselines=BaselineOutcome({"eager": 1.0}))
    assert v.status is Status.SUSPICIOUS and v.flags == ("global_state",) and "changed settings" in v.error
    assert v.speedup.eager == pytest.approx(1.0)


def test_conditional_flag_counts_only_when_its_lines_ran():
    scan = ScanOutcome(conditional=(("reference_fallback", ((10, 12),)),))
    quiet = decide(CTX, scan, check=CheckOutcome(GOOD.result, executed_lines=frozenset({3, 4, 9, 13})))
    assert quiet.status is Status.OK and quiet.flags == ()
    ran = decide(CTX, scan, check=GOOD, measure=MeasureOutcome(timing(1.0), executed_lines=frozenset({11})))
    assert ran.status is Status.SUSPICIOUS and ran.flags == ("reference_fallback",)
    assert any("line 11" in n for n in ran.notes)


def test_notes_are_said_but_never_flag():
    v = decide(CTX, ScanOutcome(notes=("static: line 3: cudnn.benchmark",)), check=GOOD,
               integrity=IntegrityOutcome(notes=("process-local settings changed",)))
    assert v.status is Status.OK and v.flags == () and len(v.notes) == 2


def test_missing_check_result_is_never_ok():
    assert decide(CTX, ScanOutcome()).status is Status.INCORRECT


# ---- static findings are hints where a dynamic check judges the same threat ----------------------

def _on(device: str) -> Context:
    return Context(problem="p", candidate="c", device=device)


def test_a_static_precision_finding_alone_is_a_note_and_the_measured_error_decides():
    scan = ScanOutcome(findings=(Finding("precision_downcast", "static: line 9: .bfloat16() in a float32 problem"),))
    for device in ("cpu", "cuda:0"):
        v = decide(_on(device), scan, check=GOOD, measure=MeasureOutcome(timing(1.0)))
        assert v.status is Status.OK and v.flags == () and v.error is None, device
        (hint,) = [n for n in v.notes if ".bfloat16()" in n]
        assert "a hint, not a flag" in hint and "float64 truth" in hint
    measured = CheckOutcome(GOOD.result, findings=(Finding("precision_downcast", "relative error 3.1e-03 ..."),))
    v = decide(_on("cpu"), scan, check=measured)
    assert v.status is Status.SUSPICIOUS and v.flags == ("precision_downcast",)


def test_a_static_result_cache_finding_is_a_hint_on_a_gpu_and_a_flag_on_a_cpu():
    # On a CPU a cache keyed by content escapes the fresh-value passes (no timed single calls there).
    scan = ScanOutcome(findings=(Finding("result_cache", "static: line 4: stores outputs ... keyed by shape"),))
    on_gpu = decide(_on("cuda"), scan, check=GOOD, measure=MeasureOutcome(timing(1.0)))
    assert on_gpu.status is Status.OK and on_gpu.flags == () and any("fresh values" in n for n in on_gpu.notes)
    on_cpu = decide(_on("cpu"), scan, check=GOOD, measure=MeasureOutcome(timing(1.0)))
    assert on_cpu.status is Status.SUSPICIOUS and on_cpu.flags == ("result_cache",)


def test_a_static_side_stream_is_a_hint_on_a_gpu_and_a_flag_where_no_stream_is_checked():
    scan = ScanOutcome(findings=(Finding("side_stream", "static: line 7: uses torch.cuda.Stream"),))
    on_gpu = decide(_on("cuda:0"), scan, check=GOOD, measure=MeasureOutcome(timing(1.0)))
    assert on_gpu.status is Status.OK and on_gpu.flags == () and any("wall clock" in n for n in on_gpu.notes)
    on_cpu = decide(_on("cpu"), scan, check=GOOD, measure=MeasureOutcome(timing(1.0)))
    assert on_cpu.status is Status.SUSPICIOUS and on_cpu.flags == ("side_stream",)
    caught = decide(_on("cuda:0"), scan, check=GOOD,
                    measure=MeasureOutcome(timing(1.0), findings=(Finding("side_stream", "timed 0.01 ms ..."),)))
    assert caught.status is Status.SUSPICIOUS and caught.flags == ("side_stream",)


def test_static_only_flags_stay_flags_on_every_device():
    for flag in ("monkey_patch", "problem_edit", "background_thread", "global_state", "tensor_subclass",
                 "input_mutated", "output_aliases_input", "swallowed_exception", "reference_fallback"):
        for device in ("cpu", "cuda:0"):
            v = decide(_on(device), ScanOutcome(findings=(Finding(flag, f"static: line 1: {flag}"),)), check=GOOD)
            assert v.status is Status.SUSPICIOUS and v.flags == (flag,), (flag, device)


def test_a_harness_fault_in_the_candidates_process_is_the_candidates_where_its_code_reaches_into_other_modules():
    fault = Failure(Status.HARNESS_ERROR, Cause.HARNESS, "harness error in the candidate process: trial 0: "
                    "TypeError: _unsealed() got an unexpected keyword argument", role="candidate")
    tampering = ScanOutcome(findings=(Finding(Flag.PROBLEM_EDIT.value, "reads sys.modules"),))
    v = decide(CTX, tampering, check=GOOD, failure=fault)
    assert v.status is Status.RUNTIME_ERROR and v.cause is Cause.CANDIDATE_ERROR and v.flags == ("problem_edit",)
    assert any("the candidate's, not Hercules'" in note for note in v.notes)
    # Without such code, or in another process, the fault stays Hercules' own.
    for scan, role in ((ScanOutcome(), "candidate"), (tampering, "reference"), (tampering, "")):
        v = decide(CTX, scan, check=GOOD, failure=Failure(fault.status, fault.cause, fault.error, role=role))
        assert v.status is Status.HARNESS_ERROR and v.cause is Cause.HARNESS
