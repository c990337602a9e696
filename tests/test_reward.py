"""The reward's speedup carries its 95% interval, and its baselines are the names in
``harness.baselines`` (a new one is a reward baseline without touching ``reward.py``)."""

from __future__ import annotations

import math

import pytest

from hercules.harness import baselines
from hercules.harness.decide import BaselineOutcome, CheckOutcome, Context, MeasureOutcome, ScanOutcome, decide
from hercules.harness.records import CheckResult, TimingResult
from hercules.reward import RewardConfig, compute_reward

GOOD = CheckOutcome(CheckResult(correct=True, trials=5, max_abs_err=0.0, rel_err=0.0, ref_rel_err=0.0))


def verdict(times: dict[str, float], intervals: dict[str, tuple[float, float]], cand_ms: float = 0.5):
    timing = TimingResult(method="cuda_events", reps=10, median_ms=cand_ms, mean_ms=cand_ms, min_ms=cand_ms,
                          max_ms=cand_ms, iqr_ms=0.0, std_ms=0.0, input_sets=2, l2_flushed=True)
    return decide(Context("p", "c", "cuda:0"), ScanOutcome(), check=GOOD, measure=MeasureOutcome(timing),
                  baselines=BaselineOutcome(times, intervals=intervals))


def test_the_reward_carries_the_interval_of_the_speedup_it_came_from():
    v = verdict({"eager": 1.0, "compile": 0.4}, {"eager": (1.9, 2.1), "compile": (0.7, 0.9)})
    eager = compute_reward(v)
    assert eager.value == pytest.approx(math.log(2.0)) and eager.interval == (1.9, 2.1)
    best = compute_reward(v, RewardConfig(baseline="best"))
    assert best.speedup == pytest.approx(0.8) and best.interval == (0.7, 0.9)
    # No interval measured, or no speedup to carry one: None.
    assert compute_reward(v, RewardConfig(baseline="expert")).interval is None
    assert compute_reward(verdict({"eager": 1.0}, {})).interval is None


def test_a_new_baseline_is_a_reward_baseline(monkeypatch):
    with pytest.raises(ValueError, match="tensorrt"):
        RewardConfig(baseline="tensorrt")
    monkeypatch.setattr(baselines, "BASELINES", (*baselines.BASELINES, "tensorrt"))
    reward = compute_reward(verdict({"eager": 1.0, "tensorrt": 0.25}, {"tensorrt": (0.45, 0.55)}),
                            RewardConfig(baseline="tensorrt", transform="raw"))
    assert reward.value == pytest.approx(0.5) and reward.interval == (0.45, 0.55) and reward.scored
