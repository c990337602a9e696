"""Exemplars drawn from the pool by speedup bucket.

Variants are grouped into buckets by their speedup (failures and flagged variants share one
bucket of their own). A bucket's weight is ``softmax(score / temperature)`` with score the log of
its members' median speedup (the failure bucket scores as a 0.5x variant), so a low temperature
prefers the fastest buckets and a high one spreads over all of them. Buckets are drawn without
replacement, one exemplar per bucket: the model always sees contrasting speeds, never N copies
of the same idea (the contrastive prompting of CUDA-L1).
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

from hercules.optimize.pool import Pool
from hercules.optimize.records import REFERENCE, Variant

# Speedup boundaries between buckets: <0.9, 0.9-1.1 (reference-like), 1.1-1.5, 1.5-2, 2-3, >3.
BUCKET_EDGES: tuple[float, ...] = (0.9, 1.1, 1.5, 2.0, 3.0)
FAILED = -1
FAILED_SCORE = math.log(0.5)


@dataclass(frozen=True)
class Bucket:
    index: int  # FAILED or 0..len(BUCKET_EDGES)
    members: tuple[Variant, ...]
    score: float


def bucket_index(speedup: float | None, honest: bool) -> int:
    if not honest or speedup is None:
        return FAILED
    return sum(1 for edge in BUCKET_EDGES if speedup >= edge)


def buckets(pool: Pool) -> list[Bucket]:
    groups: dict[int, list[Variant]] = {}
    for v in pool.variants:
        s = pool.speedup(v)
        honest = v.status == REFERENCE or v.honest
        groups.setdefault(bucket_index(s if honest else None, honest), []).append(v)
    out = []
    for index, members in sorted(groups.items()):
        if index == FAILED:
            score = FAILED_SCORE
        else:
            score = math.log(statistics.median(pool.speedup(v) or 1.0 for v in members))
        out.append(Bucket(index, tuple(members), score))
    return out


def softmax(scores: list[float], temperature: float) -> list[float]:
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    top = max(scores)
    weights = [math.exp((s - top) / temperature) for s in scores]
    total = sum(weights)
    return [w / total for w in weights]


def sample_exemplars(pool: Pool, n: int, temperature: float, rng: random.Random) -> list[Variant]:
    """Up to ``n`` exemplars from distinct buckets, slowest first (the best one last, nearest
    the question), failures before everything else."""
    remaining = buckets(pool)
    chosen: list[Variant] = []
    while remaining and len(chosen) < n:
        probs = softmax([b.score for b in remaining], temperature)
        bucket = rng.choices(remaining, weights=probs, k=1)[0]
        remaining.remove(bucket)
        chosen.append(rng.choice(bucket.members))
    failures = [v for v in chosen if v.status != REFERENCE and not v.honest]
    ranked = sorted((v for v in chosen if v not in failures), key=lambda v: pool.speedup(v) or 0.0)
    return failures + ranked
