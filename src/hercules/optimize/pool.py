"""The pool of one problem: every variant with its verdict, in the order it was made.

Nothing leaves the pool: incorrect, flagged and code-less variants stay as negative exemplars
with their reason. Only an honest variant (status ``ok``, no flag) can be the best.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hercules.optimize.records import REFERENCE, Objective, Variant
from hercules.problems.model import Problem


def reference_variant(problem: Problem) -> Variant:
    """The reference as the pool's 1.0x anchor (its ``Model`` is what every baseline times)."""
    from hercules.optimize.records import Slot

    return Variant(slot=Slot(problem.name, 0, 0), origin="reference", code=problem.code, status=REFERENCE)


@dataclass
class Pool:
    problem: Problem
    objective: Objective = "eager"
    variants: list[Variant] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not any(v.status == REFERENCE for v in self.variants):
            self.variants.insert(0, reference_variant(self.problem))

    def add(self, variant: Variant) -> None:
        self.variants = [v for v in self.variants if v.slot != variant.slot] + [variant]

    def by_hash(self, code_hash: str) -> Variant | None:
        """An evaluated variant with exactly this code (its verdict can be reused)."""
        for v in self.variants:
            if v.verdict is not None and v.code_hash == code_hash:
                return v
        return None

    def speedup(self, variant: Variant) -> float | None:
        """Against the objective; the reference against the best baseline is eager over the
        fastest measured baseline (1.0 until a baseline has been measured)."""
        if variant.status == REFERENCE and self.objective == "best":
            times = self.baselines_ms()
            return times["eager"] / min(times.values()) if times.get("eager") else 1.0
        return variant.speedup(self.objective)

    def honest(self) -> list[Variant]:
        return [v for v in self.variants if v.honest and v.speedup(self.objective) is not None]

    def best(self, max_round: int | None = None) -> Variant | None:
        """The best honest variant (up to a round); None when there is none.

        In the order the variants were made, a later one takes the place of the best only when
        it is faster beyond the noise of both measurements (``beats``): the same computation
        scored 0.65x-1.85x across runs on a loaded CPU, and naming the luckiest draw "best"
        would report noise as progress. A difference inside the noise is a tie, kept by the
        earlier variant."""
        pool = sorted((v for v in self.honest() if max_round is None or v.slot.round <= max_round),
                      key=lambda v: (v.slot.round, v.slot.sample))
        best: Variant | None = None
        for variant in pool:
            if best is None or beats(variant, best, self.objective):
                best = variant
        return best

    def best_speedup(self, max_round: int | None = None) -> float | None:
        best = self.best(max_round)
        return best.speedup(self.objective) if best else None

    def baselines_ms(self) -> dict[str, float]:
        """The latest measured baseline times (eager measured beside each candidate)."""
        for v in reversed(self.variants):
            if v.verdict is not None and v.verdict.baselines_ms:
                return {k: t for k, t in v.verdict.baselines_ms.items() if t}
        return {}


def noise(variant: Variant) -> float:
    """The relative noise of a variant's time: its timing samples' interquartile range over their
    median (0 when not measured)."""
    timing = variant.verdict.timing if variant.verdict is not None else None
    return max(0.0, timing.spread) if timing is not None else 0.0


def beats(new: Variant, old: Variant, objective: Objective = "eager") -> bool:
    """Whether ``new`` is faster than ``old`` beyond their measured noise. Where both speedups were
    measured side by side with their baseline (each with a 95% interval), their intervals must not
    overlap; otherwise the ratio of the speedups must exceed 1 by more than the two relative IQRs
    of their times together (the errors of a ratio add)."""
    new_speedup, old_speedup = new.speedup(objective), old.speedup(objective)
    if new_speedup is None:
        return False
    if old_speedup is None:
        return True
    new_interval, old_interval = interval(new, objective), interval(old, objective)
    if new_interval is not None and old_interval is not None:
        return new_interval[0] > old_interval[1]
    return new_speedup > old_speedup * (1.0 + noise(new) + noise(old))


def interval(variant: Variant, objective: Objective) -> tuple[float, float] | None:
    """The 95% interval of a variant's speedup against ``objective``, where one was measured."""
    return variant.verdict.speedup.interval(objective) if variant.verdict is not None else None
