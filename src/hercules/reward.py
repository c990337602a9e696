"""Reward from a verdict: a function of the measured speedup, with penalties for what is not honest.

The pipeline for a scored verdict (status ``ok``):

    speedup against the chosen baseline (default eager)
      -> transform: ``log`` (natural log: 2x faster = +0.69, 2x slower = -0.69, symmetric around 1x)
                    or ``raw`` (the ratio itself)
      -> normalise (optional): (x - running mean) / running std over every scored reward seen so far
      -> clip (optional): into [clip_min, clip_max]

Everything else gets a fixed penalty that bypasses transform, normalisation and clipping (so a
hack can never be normalised into a good score):

    incorrect, build_error, runtime_error, timeout, crash, no code  -> ``incorrect_penalty`` (-1.0)
    suspicious (correct, but an anti-hacking check raised a flag)    -> ``flagged_penalty`` (-1.0)
    skipped (the candidate needs a device this machine lacks)        -> ``skipped_reward`` (0.0)

An ``ok`` verdict without a time for the chosen baseline (say ``compile`` failed to compile) is
scored as 1x, neither rewarded nor punished, and says so in ``Reward.note``. The baselines are the
names in ``harness.baselines`` and ``best``; ``Reward.interval`` is the speedup's 95% interval when
measured.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any

from hercules.harness.records import Status, Verdict, speedup_names

# The command line's choices; a config is checked against the names when it is made (the same list).
BASELINES = speedup_names()
TRANSFORMS = ("log", "raw")


@dataclass(frozen=True)
class RewardConfig:
    transform: str = "log"
    baseline: str = "eager"
    normalize: bool = False
    clip_min: float | None = None
    clip_max: float | None = None
    incorrect_penalty: float = -1.0
    flagged_penalty: float = -1.0
    skipped_reward: float = 0.0
    # Normalisation starts after this many scored rewards (before that, the running std is noise).
    normalize_warmup: int = 8

    def __post_init__(self) -> None:
        if self.transform not in TRANSFORMS:
            raise ValueError(f"reward transform must be one of {', '.join(TRANSFORMS)} (got {self.transform!r})")
        if self.baseline not in speedup_names():
            raise ValueError(f"reward baseline must be one of {', '.join(speedup_names())} (got {self.baseline!r})")
        if self.clip_min is not None and self.clip_max is not None and self.clip_min > self.clip_max:
            raise ValueError(f"clip_min {self.clip_min} is above clip_max {self.clip_max}")

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> RewardConfig:
        """From a request's ``reward`` object; unknown keys are an error, not silently ignored."""
        data = dict(data or {})
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown reward option(s): {', '.join(unknown)}")
        return cls(**data)


@dataclass(frozen=True)
class Reward:
    value: float
    speedup: float | None  # against the configured baseline; None when not scored
    scored: bool  # an ok verdict (the value came from its speedup)
    note: str = ""
    # The 95% interval of ``speedup`` where candidate and baseline were timed in the same rounds:
    # a trainer can tell a reward inside the noise from a real gain.
    interval: tuple[float, float] | None = None


@dataclass
class RunningNormalizer:
    """Welford's running mean and variance, shared by every request (hence the lock)."""

    count: int = 0
    mean: float = 0.0
    m2: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def update_and_normalize(self, x: float, warmup: int) -> float:
        with self.lock:
            self.count += 1
            delta = x - self.mean
            self.mean += delta / self.count
            self.m2 += delta * (x - self.mean)
            if self.count < max(2, warmup):
                return x - self.mean
            std = math.sqrt(self.m2 / (self.count - 1))
            return (x - self.mean) / std if std > 1e-12 else 0.0

    def state(self) -> dict[str, float]:
        with self.lock:
            std = math.sqrt(self.m2 / (self.count - 1)) if self.count > 1 else 0.0
            return {"count": self.count, "mean": self.mean, "std": std}


def compute_reward(verdict: Verdict | None, config: RewardConfig | None = None,
                   normalizer: RunningNormalizer | None = None) -> Reward:
    """The reward of one verdict (None: no code could be extracted from the completion)."""
    config = config or RewardConfig()
    if verdict is None:
        return Reward(config.incorrect_penalty, None, False, "no code")
    if verdict.status is Status.SKIPPED:
        return Reward(config.skipped_reward, None, False, "skipped: " + (verdict.error or ""))
    if verdict.status is Status.HARNESS_ERROR:  # not the completion's doing: neither reward nor penalty
        return Reward(config.skipped_reward, None, False, "harness error (not scored): " + (verdict.error or ""))
    if verdict.status is Status.SUSPICIOUS:
        return Reward(config.flagged_penalty, None, False, "flagged: " + ", ".join(verdict.flags))
    if verdict.status is not Status.OK:
        return Reward(config.incorrect_penalty, None, False, verdict.status.value)
    speedup = verdict.speedup.usable(config.baseline)
    note = "" if speedup else f"no {config.baseline} time: scored as 1x"
    x = math.log(speedup or 1.0) if config.transform == "log" else (speedup or 1.0)
    if config.normalize and normalizer is not None:
        x = normalizer.update_and_normalize(x, config.normalize_warmup)
    if config.clip_min is not None:
        x = max(config.clip_min, x)
    if config.clip_max is not None:
        x = min(config.clip_max, x)
    return Reward(x, speedup, True, note, verdict.speedup.interval(config.baseline) if speedup else None)
