"""Stagnation modes of one trajectory (the rounds of one attempt).

    duplicate_code        a round returned exactly the code of the round before
    cycle                 a round returned code seen earlier, not just the round before
    category_oscillation  the failure category went A -> B -> A
    no_progress           the same failure category for every round (two rounds or more)
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise


def stagnation_modes(code_hashes: Sequence[str], categories: Sequence[str], passed: bool) -> tuple[str, ...]:
    modes: list[str] = []
    if any(a == b for a, b in pairwise(code_hashes)):
        modes.append("duplicate_code")
    if any(h in code_hashes[:i - 1] for i, h in enumerate(code_hashes) if i >= 2):
        modes.append("cycle")
    if any(a == c and a != b for a, b, c in zip(categories, categories[1:], categories[2:])):
        modes.append("category_oscillation")
    if not passed and len(categories) >= 2 and len(set(categories)) == 1:
        modes.append("no_progress")
    return tuple(modes)
