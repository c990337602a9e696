"""Statistics over evaluated rows: correctness, fast_p, speedup averages, per-level breakdowns.

A row is ``(problem name, level, candidate name, Verdict)``, the shape ``ResultStore.verdicts``
returns. Everything here is a pure function of the rows.

Definitions (what each number means, and what it is when there is nothing to measure):

- A row is *correct* when its status is ``ok``. A ``suspicious`` row has correct outputs but an
  anti-hacking flag, so it is not counted as correct (it is reported, not scored).
- ``correctness_rate`` = correct rows / all rows; ``None`` when there are no rows.
- ``fast_p`` (KernelBench) = rows that are correct *and* have speedup > p, over ALL rows (rows
  that failed to build, crashed or were skipped stay in the denominator). For p <= 0 it is the
  correctness rate: a correct row needs no timing to count as correct. For p > 0 a correct row
  without a speedup against the chosen baseline does not count. ``None`` when there are no rows.
- Speedup averages (mean, median, geometric mean) are over correct rows that have a finite,
  positive speedup against the chosen baseline; ``None`` when no row has one.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from hercules.harness.records import Status, Verdict

Row = tuple[str, int | None, str, Verdict]
Against = Literal["eager", "best"]

P_VALUES: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0)


@dataclass(frozen=True)
class SpeedupStats:
    """Averages of the speedups of correct rows against one baseline."""

    n: int  # correct rows with a usable speedup
    mean: float | None
    median: float | None
    geomean: float | None
    min: float | None
    max: float | None


@dataclass(frozen=True)
class LevelSummary:
    level: int | None
    n_rows: int
    n_ok: int
    correctness_rate: float | None
    fast_eager: tuple[tuple[float, float | None], ...]  # (p, fast_p against eager)
    fast_best: tuple[tuple[float, float | None], ...]  # (p, fast_p against the best baseline)
    eager: SpeedupStats
    best: SpeedupStats

    def fast(self, p: float, against: Against = "eager") -> float | None:
        return _lookup(self.fast_eager if against == "eager" else self.fast_best, p)


@dataclass(frozen=True)
class Summary:
    n_rows: int
    n_ok: int
    correctness_rate: float | None
    fast_eager: tuple[tuple[float, float | None], ...]
    fast_best: tuple[tuple[float, float | None], ...]
    eager: SpeedupStats
    best: SpeedupStats
    levels: tuple[LevelSummary, ...]  # ascending level, rows without a level last
    status_counts: tuple[tuple[str, int], ...]  # statuses present, in ``Status`` order
    flag_counts: tuple[tuple[str, int], ...]  # rows carrying each flag, most frequent first

    def fast(self, p: float, against: Against = "eager") -> float | None:
        return _lookup(self.fast_eager if against == "eager" else self.fast_best, p)

    def status_count(self, status: Status | str) -> int:
        key = status.value if isinstance(status, Status) else status
        return dict(self.status_counts).get(key, 0)

    def flag_count(self, flag: str) -> int:
        return dict(self.flag_counts).get(getattr(flag, "value", flag), 0)


def _lookup(pairs: tuple[tuple[float, float | None], ...], p: float) -> float | None:
    for key, value in pairs:
        if key == p:
            return value
    raise KeyError(f"fast_p for p={p} was not computed (computed: {[k for k, _ in pairs]})")


# -- row-level helpers ------------------------------------------------------------------------


def is_correct(row: Row) -> bool:
    return row[3].status == Status.OK


def speedup_of(verdict: Verdict, against: Against = "eager") -> float | None:
    """The verdict's speedup against ``eager`` or the ``best`` baseline, if finite and positive."""
    if against not in ("eager", "best"):
        raise ValueError(f"against must be 'eager' or 'best', not {against!r}")
    return verdict.speedup.usable(against)


def ok_speedups(rows: Iterable[Row], against: Against = "eager") -> list[float]:
    """Usable speedups of the correct rows, in row order."""
    out = []
    for row in rows:
        if is_correct(row):
            value = speedup_of(row[3], against)
            if value is not None:
                out.append(value)
    return out


# -- the statistics ---------------------------------------------------------------------------


def correctness_rate(rows: Sequence[Row]) -> float | None:
    if not rows:
        return None
    return sum(1 for row in rows if is_correct(row)) / len(rows)


def fast_p(rows: Sequence[Row], p: float, against: Against = "eager") -> float | None:
    """Fraction of ALL rows that are correct and faster than ``p`` times the baseline."""
    if not rows:
        return None
    if p <= 0:
        return correctness_rate(rows)
    hits = 0
    for row in rows:
        if is_correct(row):
            value = speedup_of(row[3], against)
            if value is not None and value > p:
                hits += 1
    return hits / len(rows)


def geometric_mean(values: Sequence[float]) -> float | None:
    if not values:
        return None
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


def speedup_stats(rows: Sequence[Row], against: Against = "eager") -> SpeedupStats:
    values = ok_speedups(rows, against)
    if not values:
        return SpeedupStats(n=0, mean=None, median=None, geomean=None, min=None, max=None)
    return SpeedupStats(
        n=len(values),
        mean=math.fsum(values) / len(values),
        median=float(statistics.median(values)),
        geomean=geometric_mean(values),
        min=min(values),
        max=max(values),
    )


def status_counts(rows: Iterable[Row]) -> tuple[tuple[str, int], ...]:
    counts = Counter(Status(row[3].status).value for row in rows)
    return tuple((s.value, counts[s.value]) for s in Status if counts[s.value])


def flag_counts(rows: Iterable[Row]) -> tuple[tuple[str, int], ...]:
    """How many rows carry each flag (a flag repeated within one row counts once)."""
    counts: Counter[str] = Counter()
    for row in rows:
        counts.update({getattr(f, "value", f) for f in row[3].flags})
    return tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _level_key(level: int | None) -> tuple[int, int]:
    return (1, 0) if level is None else (0, int(level))


def summarize_level(
    rows: Sequence[Row], level: int | None, ps: Sequence[float] = P_VALUES
) -> LevelSummary:
    return LevelSummary(
        level=level,
        n_rows=len(rows),
        n_ok=sum(1 for row in rows if is_correct(row)),
        correctness_rate=correctness_rate(rows),
        fast_eager=tuple((float(p), fast_p(rows, p, "eager")) for p in ps),
        fast_best=tuple((float(p), fast_p(rows, p, "best")) for p in ps),
        eager=speedup_stats(rows, "eager"),
        best=speedup_stats(rows, "best"),
    )


def per_level(rows: Sequence[Row], ps: Sequence[float] = P_VALUES) -> tuple[LevelSummary, ...]:
    groups: dict[int | None, list[Row]] = {}
    for row in rows:
        groups.setdefault(row[1], []).append(row)
    return tuple(summarize_level(groups[lvl], lvl, ps) for lvl in sorted(groups, key=_level_key))


def summarize(rows: Sequence[Row], ps: Sequence[float] = P_VALUES) -> Summary:
    rows = list(rows)
    return Summary(
        n_rows=len(rows),
        n_ok=sum(1 for row in rows if is_correct(row)),
        correctness_rate=correctness_rate(rows),
        fast_eager=tuple((float(p), fast_p(rows, p, "eager")) for p in ps),
        fast_best=tuple((float(p), fast_p(rows, p, "best")) for p in ps),
        eager=speedup_stats(rows, "eager"),
        best=speedup_stats(rows, "best"),
        levels=per_level(rows, ps),
        status_counts=status_counts(rows),
        flag_counts=flag_counts(rows),
    )


def sort_rows(rows: Iterable[Row]) -> list[Row]:
    """Rows by level (none last), then problem, then candidate: the order reports list them in."""
    return sorted(rows, key=lambda r: (_level_key(r[1]), r[0], r[2]))
