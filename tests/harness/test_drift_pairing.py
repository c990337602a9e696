"""How a slow burst whose calls are judged at random is told apart from a host that slowed (it is
paired with a long burst measured right after it), and how slow passes whose every call is judged
floor the time.

The measurements are scripted (the policy is under test, not the workers): a ``Probe`` whose every
figure is what the measurement stage would have measured, in the order the policy asks."""

from pathlib import Path

import pytest

from hercules.harness.evaluate import EvalOptions
from hercules.harness.policy import (
    CHECKED_BURSTS,
    CHECKED_BURSTS_MAX,
    DRAWN_OUTPUTS_WRONG,
    JUDGED_REMEASURES,
    JudgedPasses,
    checked_burst,
    Held,
    floored,
    judge_passes,
)
from hercules.problems.model import Problem

PROBLEM = Path(__file__).resolve().parents[1] / "redteam" / "problem_matmul.py"
SETS = 3
OUT_BYTES = 384 * 384 * 4  # one float32 output of 384 x 384


class _Scripted:
    """A probe reading scripted figures: ``checked`` for bursts whose calls are judged at random,
    ``long`` for long bursts, ``passes`` for sets of judged passes; ``asked`` records the order."""

    def __init__(self, checked=(), long=(), passes=()):
        self.checked, self.long, self.passes = list(checked), list(long), list(passes)
        self.asked: list[str] = []

    def buffer_seeds(self):
        return [7, 1, 2]

    def overhead_ms(self, outputs_of):
        return 0.0

    def long_burst(self, calls, event_ms):
        self.asked.append("long")
        return self.long.pop(0)

    def checked_burst(self, calls, judged, event_ms):
        assert len(judged) == calls and judged[-1] is not None  # the last call is always judged
        self.asked.append("checked")
        return self.checked.pop(0)

    def judged_passes(self, sets, per_call_ms):
        self.asked.append("passes")
        return self.passes.pop(0)


def _checked(probe, wall_ms):
    held = checked_burst(probe, calls=301, sets=SETS, event_ms=wall_ms, wall_ms=wall_ms, out_bytes=OUT_BYTES,
                         device_type="cpu")
    return held


def test_checked_bursts_near_the_long_burst_hold_nothing():
    evaluation = _Scripted(checked=[0.11, 0.105])
    assert _checked(evaluation, 0.1) == Held()
    assert evaluation.asked == ["checked"] * CHECKED_BURSTS


def test_a_host_that_slowed_holds_the_time_to_the_long_burst_measured_beside_the_checked_one():
    # Drift: the checked bursts read 0.185-0.2 against a long burst of 0.128 measured earlier; the
    # long burst measured right after the third reads 0.16, and 0.185 is within its limit.
    evaluation = _Scripted(checked=[0.19, 0.2, 0.185], long=[0.16])
    held = _checked(evaluation, 0.128)
    assert (held.ms, held.wrong, held.beside_ms) == (0.16, None, 0.16)
    assert evaluation.asked == ["checked"] * (CHECKED_BURSTS + 1) + ["long"]
    assert "the host slowed" in held.note


def test_a_skipper_whose_long_bursts_stay_fast_is_held_to_its_fastest_checked_burst():
    # Skips half the calls wherever only the last is judged: every long burst reads half its time.
    extra = CHECKED_BURSTS_MAX - CHECKED_BURSTS
    evaluation = _Scripted(checked=[0.2, 0.21] + [0.2] * extra, long=[0.1] * extra)
    held = _checked(evaluation, 0.1)
    assert (held.ms, held.wrong) == (0.2, None) and held.note.startswith("time held to the burst")
    assert evaluation.asked.count("checked") == CHECKED_BURSTS_MAX
    assert evaluation.asked.count("long") == extra


def test_running_every_call_only_in_the_long_burst_after_a_checked_one_gains_nothing():
    # A skipper that knows the order of requests computes every call in the long burst that follows
    # a checked one: the pair passes, and the time is that honest burst's.
    evaluation = _Scripted(checked=[0.2, 0.2, 0.2], long=[0.2])
    held = _checked(evaluation, 0.1)
    assert (held.ms, held.wrong, held.beside_ms) == (0.2, None, 0.2) and "the host slowed" in held.note


def test_a_long_burst_slower_than_the_checked_ones_holds_no_more_than_the_fastest_checked():
    # On the 2-core VM a long burst right after a checked one read 0.236 where the checked read 0.183.
    evaluation = _Scripted(checked=[0.19, 0.2, 0.183], long=[0.236])
    held = _checked(evaluation, 0.052)
    assert (held.ms, held.wrong, held.beside_ms) == (0.183, None, None)


def test_wrong_drawn_outputs_are_refused():
    evaluation = _Scripted(checked=[0.1, None])
    assert _checked(evaluation, 0.1) == Held(wrong=DRAWN_OUTPUTS_WRONG)


def _passes(fresh_ms, calls=256):
    return JudgedPasses(fresh_ms=fresh_ms, seen_ms=fresh_ms, seen_fastest_ms=fresh_ms, calls=calls,
                        fresh_overhead_ms=0.0, seen_overhead_ms=0.0)


def _floored(probe, first, wall_ms):
    found = floored(probe, first, SETS, wall_ms, wall_ms)
    return found.passes, found.floor_ms, found.wrong


def test_passes_fast_when_measured_again_change_nothing():
    evaluation = _Scripted(passes=[_passes(0.11)])
    passes, bound, wrong = _floored(evaluation, _passes(0.2), 0.107)
    assert (bound, wrong) == (0.107, None)
    assert passes.fresh_ms == 0.11
    assert evaluation.asked == ["passes"]


def test_passes_slow_every_time_floor_the_time_by_the_fastest_set():
    # A candidate that skips half the calls wherever only the last is judged: its fresh passes run
    # every call (0.2) and its long bursts half (0.1), measured again and again.
    evaluation = _Scripted(passes=[_passes(0.21), _passes(0.19)][:JUDGED_REMEASURES])
    passes, bound, wrong = _floored(evaluation, _passes(0.2), 0.1)
    assert wrong is None and passes.fresh_ms == 0.19
    assert bound == pytest.approx(passes.floor_ms()) and bound > 0.15
    assert "long" not in evaluation.asked


def _judge(probe, first, wall_ms):
    return judge_passes(probe, first, SETS, wall_ms, wall_ms, calls=301, device_type="cpu")


def test_passes_slowed_by_load_that_set_in_after_the_long_burst_are_not_taken_for_reuse():
    # A CI run: 8.84 ms per call on new values, 9.04 on values just seen, 0.56 in a long burst
    # measured before the host filled up; the passes measured again read the same, and the long
    # burst measured right after them reads 9.0: the host slowed, nothing was reused or skipped.
    slowed = JudgedPasses(fresh_ms=8.84, seen_ms=9.04, seen_fastest_ms=9.04, calls=32, fresh_overhead_ms=0.0,
                          seen_overhead_ms=0.0)
    evaluation = _Scripted(passes=[slowed], long=[9.0])
    judged = _judge(evaluation, slowed, 0.56)
    assert (judged.passes, judged.caught) == (slowed, False)
    assert evaluation.asked == ["passes", "long"]
    assert "the host slowed" in judged.note


def test_reuse_or_skipping_keeps_the_long_burst_fast_beside_the_slow_passes_and_is_caught():
    # A content cache (or a skipper) is fast wherever values repeat, the long burst measured right
    # after the passes included: measured again and again, it stays caught.
    cached = JudgedPasses(fresh_ms=9.0, seen_ms=0.5, seen_fastest_ms=0.5, calls=32, fresh_overhead_ms=0.0,
                          seen_overhead_ms=0.0)
    evaluation = _Scripted(passes=[cached] * JUDGED_REMEASURES, long=[0.55] * JUDGED_REMEASURES)
    judged = _judge(evaluation, cached, 0.56)
    assert judged.caught and judged.passes == cached
    assert evaluation.asked == ["passes", "long"] * JUDGED_REMEASURES


def test_a_slow_set_of_passes_fast_when_measured_again_needs_no_long_burst():
    evaluation = _Scripted(passes=[_passes(0.6)])
    judged = _judge(evaluation, _passes(9.0), 0.56)
    assert not judged.caught and judged.passes.fresh_ms == 0.6 and "measured again" in judged.note
    assert evaluation.asked == ["passes"]


@pytest.mark.slow
def test_an_honest_candidate_slow_on_new_values_is_held_above_its_long_burst_with_no_flag(tmp_path):
    """A real evaluation whose passes over never-seen values are slow (honest_slow_on_new_values.py):
    the candidate is ok with no flag, and a check that judges calls on values it has not met may
    hold the time above its long burst. Usually the floor of the passes with every call
    judged; where the burst whose calls are judged at random (drawn afresh each evaluation) happened
    to read slower still, that burst already held the time above the floor and the floor had nothing
    to raise (one fresh-clone CI run: 0.3996 ms per call against 0.1013 in the long burst)."""
    from hercules.harness.evaluate import evaluate
    from hercules.problems.model import Candidate

    source = PROBLEM.parent / "honest_slow_on_new_values.py"
    problem = PROBLEM.parents[1] / "adversarial" / "problems" / "scale_add.py"
    verdict = evaluate(Problem(problem.stem, problem.read_text(), str(problem)),
                       Candidate(source.stem, source.read_text(), str(source)),
                       EvalOptions(device="cpu", trials=3, timing_budget_s=0.1, cache_dir=tmp_path / "cache",
                                   baselines=("eager",)))
    assert verdict.status.value == "ok" and not verdict.flags, (verdict.status, verdict.error, verdict.notes)
    # Which check holds the time, if any, depends on the host: under load the long burst slows
    # 40x (3.8 ms against 0.09), passes shrink below JUDGED_MIN_CALLS and no floor applies (3 of 3
    # runs beside a CI run). The floor itself is tested deterministically above
    # (test_passes_slow_every_time_floor_the_time_by_the_fastest_set); here, that whichever held
    # it is a judged figure.
    if verdict.timing.bounded_by == "judged":
        # policy.judged_hold's and the floor's three notes: the fastest checked burst; a checked
        # burst beside a long burst that slowed with it (the host slowed, held to the lesser, here
        # the checked one); the passes' floor.
        held_by = ("time floored by the passes with every call judged",
                   "time held to the burst whose calls were judged at random",
                   "the burst whose calls were judged at random read")
        assert any(note.startswith(held_by) for note in verdict.notes), verdict.notes
        assert verdict.cand_ms >= verdict.timing.wall_ms  # a judged figure held it above the long burst
