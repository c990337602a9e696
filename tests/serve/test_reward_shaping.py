"""Reward from verdicts: transforms, baselines, normalisation, clipping, penalties."""

from __future__ import annotations

import math

import pytest

from hercules.harness.records import Speedups, Status, Verdict
from hercules.reward import RewardConfig, RunningNormalizer, compute_reward


def verdict(status: Status = Status.OK, eager: float | None = 2.0, best: float | None = 1.5,
            flags: tuple[str, ...] = ()) -> Verdict:
    scored = status in (Status.OK, Status.SUSPICIOUS)
    return Verdict(status=status, correct=scored, flags=flags, error=None if scored else "wrong values",
                   max_abs_err=0.0, rel_err=0.0, ref_ms=1.0, cand_ms=0.5 if scored else None,
                   speedup=Speedups(eager=eager, best=best) if scored else Speedups(), sol_fraction=None)


def test_log_and_raw_against_the_chosen_baseline():
    assert compute_reward(verdict()).value == pytest.approx(math.log(2.0))
    assert compute_reward(verdict(), RewardConfig(baseline="best")).value == pytest.approx(math.log(1.5))
    assert compute_reward(verdict(eager=0.5)).value == pytest.approx(-math.log(2.0))  # slower: negative
    raw = compute_reward(verdict(), RewardConfig(transform="raw"))
    assert raw.value == 2.0 and raw.speedup == 2.0 and raw.scored


def test_penalties_for_incorrect_flagged_missing_code_and_skipped():
    config = RewardConfig(incorrect_penalty=-2.0, flagged_penalty=-3.0, skipped_reward=0.5)
    assert compute_reward(verdict(Status.INCORRECT), config).value == -2.0
    assert compute_reward(verdict(Status.CRASH), config).value == -2.0
    flagged = compute_reward(verdict(Status.SUSPICIOUS, eager=50.0, flags=("side_stream",)), config)
    assert flagged.value == -3.0 and "side_stream" in flagged.note and not flagged.scored
    assert compute_reward(None, config).value == -2.0
    assert compute_reward(verdict(Status.SKIPPED), config).value == 0.5
    # Hercules' own failure is no evidence against the completion: not penalised, not scored.
    harness = compute_reward(verdict(Status.HARNESS_ERROR), config)
    assert harness.value == 0.5 and not harness.scored and "harness error" in harness.note


def test_clipping_bypassed_by_penalties_and_missing_baseline_is_1x():
    config = RewardConfig(transform="raw", clip_min=0.0, clip_max=1.5, incorrect_penalty=-1.0)
    assert compute_reward(verdict(eager=40.0), config).value == 1.5
    assert compute_reward(verdict(Status.INCORRECT), config).value == -1.0  # not clipped to 0
    missing = compute_reward(verdict(), RewardConfig(baseline="cudagraph"))
    assert missing.value == 0.0 and "no cudagraph time" in missing.note


def test_running_normalisation():
    config = RewardConfig(normalize=True, normalize_warmup=2)
    norm = RunningNormalizer()
    values = [compute_reward(verdict(eager=s), config, norm).value for s in (1.0, 2.0, 4.0, 8.0)]
    logs = [math.log(s) for s in (1.0, 2.0, 4.0, 8.0)]
    mean = sum(logs) / 4
    std = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    assert values[-1] == pytest.approx((logs[-1] - mean) / std)
    assert norm.state()["count"] == 4
    assert compute_reward(verdict(Status.INCORRECT), config, norm).value == -1.0
    assert norm.state()["count"] == 4  # penalties never enter the statistics


def test_config_is_validated():
    with pytest.raises(ValueError, match="transform"):
        RewardConfig(transform="sqrt")
    with pytest.raises(ValueError, match="baseline"):
        RewardConfig(baseline="fastest")
    with pytest.raises(ValueError, match="clip_min"):
        RewardConfig(clip_min=2, clip_max=1)
    with pytest.raises(ValueError, match="unknown reward option"):
        RewardConfig.from_json({"scale": 2})
