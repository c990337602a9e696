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
