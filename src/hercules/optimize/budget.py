"""When to stop: rounds, tokens, evaluation (GPU) minutes, and a plateau of the best speedup.

Rounds and the plateau are per problem; tokens and evaluation minutes are shared by the whole
run (they are what costs money or device time). Evaluation minutes are the evaluations' own wall
time (``Verdict.seconds``), summed: the device time the run has taken. A resumed run counts what
its stored trajectory already spent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    rounds: int = 3
    max_tokens: int | None = None  # prompt + completion tokens over the whole run
    gpu_minutes: float | None = None  # evaluation wall time over the whole run
    patience: int | None = None  # stop a problem after this many rounds without a new best
    min_gain: float = 0.01  # a "new best" must beat the old one by this fraction


@dataclass(frozen=True)
class Spend:
    tokens: int = 0
    eval_seconds: float = 0.0

    def add(self, tokens: int = 0, eval_seconds: float = 0.0) -> Spend:
        return Spend(self.tokens + tokens, self.eval_seconds + eval_seconds)


def run_exhausted(budget: Budget, spend: Spend) -> str | None:
    """Why the whole run must stop, or None."""
    if budget.max_tokens is not None and spend.tokens >= budget.max_tokens:
        return f"token budget spent ({spend.tokens} >= {budget.max_tokens})"
    if budget.gpu_minutes is not None and spend.eval_seconds >= 60.0 * budget.gpu_minutes:
        return f"evaluation budget spent ({spend.eval_seconds / 60:.1f} >= {budget.gpu_minutes:g} min)"
    return None


def plateaued(budget: Budget, best_so_far: Sequence[float | None]) -> bool:
    """No new best (by ``min_gain``) in the last ``patience`` rounds. ``best_so_far[r]`` is the
    best honest speedup after round r (index 0: the seeds)."""
    if not budget.patience or len(best_so_far) <= budget.patience:
        return False
    def value(x: float | None) -> float:
        return x if x is not None else -math.inf
    before = value(best_so_far[-budget.patience - 1])
    latest = value(best_so_far[-1])
    if before == -math.inf:
        return latest == -math.inf
    return latest < before * (1.0 + budget.min_gain)


def problem_stop(budget: Budget, completed_rounds: int, best_so_far: Sequence[float | None]) -> str | None:
    if completed_rounds >= budget.rounds:
        return f"{budget.rounds} rounds done"
    if plateaued(budget, best_so_far):
        return f"plateau: no gain over {budget.patience} rounds"
    return None
