"""Counters and latency percentiles for ``/metrics`` (in memory; a restart starts them afresh)."""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

# Percentiles over the most recent requests: long runs keep a current picture in bounded memory.
LATENCY_WINDOW = 10_000


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in [0, 100]); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


class Metrics:
    def __init__(self) -> None:
        self.started = time.time()
        self.counts: collections.Counter[str] = collections.Counter()
        self.statuses: collections.Counter[str] = collections.Counter()
        self._latency: collections.deque[float] = collections.deque(maxlen=LATENCY_WINDOW)
        self._eval_seconds: collections.deque[float] = collections.deque(maxlen=LATENCY_WINDOW)
        self._queue_seconds: collections.deque[float] = collections.deque(maxlen=LATENCY_WINDOW)
        self._lock = threading.Lock()

    def count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counts[name] += n

    def answered(self, status: str, latency_s: float) -> None:
        with self._lock:
            self.statuses[status] += 1
            self._latency.append(latency_s)

    def evaluated(self, seconds: float) -> None:
        with self._lock:
            self._eval_seconds.append(seconds)

    def queued(self, seconds: float) -> None:
        """An evaluation's wait in the queue for a slot (the limit on timed evaluations at once)."""
        with self._lock:
            self._queue_seconds.append(seconds)

    def snapshot(self, **gauges: Any) -> dict[str, Any]:
        with self._lock:
            latency, evals, waits = list(self._latency), list(self._eval_seconds), list(self._queue_seconds)
            counts, statuses = dict(self.counts), dict(self.statuses)

        def ms(value: float | None) -> float | None:
            return None if value is None else round(value * 1e3, 2)

        return {
            "uptime_s": round(time.time() - self.started, 1),
            "counts": counts,
            "statuses": statuses,
            "latency_ms": {"p50": ms(percentile(latency, 50)), "p99": ms(percentile(latency, 99)),
                           "n": len(latency)},
            "evaluation_ms": {"p50": ms(percentile(evals, 50)), "p99": ms(percentile(evals, 99)), "n": len(evals)},
            "queue_wait_ms": {"p50": ms(percentile(waits, 50)), "p99": ms(percentile(waits, 99)), "n": len(waits)},
            **gauges,
        }
