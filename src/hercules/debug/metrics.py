"""pass@k with the unbiased estimator, the p sweep, and breakdowns.

pass@k = 1 - C(n-c, k) / C(n, k) over n >= k samples with c correct (Chen et al. 2021), computed
as the product 1 - prod_{i=n-c+1}^{n} (1 - k/i), which never forms the huge binomials. Every
figure is labelled pass@k(M=fixer, C=corpus, A=protocol, p=gate) so no axis goes unstated.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def pass_at_k(n: int, c: int, k: int) -> float:
    if not 0 <= c <= n or k < 1:
        raise ValueError(f"need 0 <= c <= n and k >= 1 (n={n}, c={c}, k={k})")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per task, got n={n}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def mean_pass_at_k(per_task: Sequence[tuple[int, int]], k: int) -> float:
    """Mean over tasks of pass@k, each task given as (n samples, c passing)."""
    if not per_task:
        return 0.0
    return sum(pass_at_k(n, c, k) for n, c in per_task) / len(per_task)


@dataclass(frozen=True)
class PassAtK:
    k: int
    fixer: str
    corpus: str
    protocol: str
    p: float
    value: float
    tasks: int

    @property
    def label(self) -> str:
        return f"pass@{self.k}(M={self.fixer}, C={self.corpus}, A={self.protocol}, p={self.p:g})"


def breakdown(items: Iterable[tuple[str, bool]]) -> dict[str, dict[str, int]]:
    """{group: {"tasks": n, "passed": m}} from (group, passed) pairs."""
    tasks: Counter[str] = Counter()
    passed: Counter[str] = Counter()
    for group, ok in items:
        tasks[group] += 1
        passed[group] += int(ok)
    return {g: {"tasks": tasks[g], "passed": passed[g]} for g in sorted(tasks)}
