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
  positive speedup against the chosen baseline; ``None`` when no row has one. Their spread is the
  interquartile range (``q1`` to ``q3``) of the same values.
- Correct outputs under two tolerances (``Correctness``): *strict* is Hercules' own check (per-dtype
  elementwise tolerance plus the relative-norm bound), ``Verdict.correct``, over all rows;
  *kernelbench* is upstream KernelBench's ``allclose(atol=rtol=1e-2)``, read from
  ``check.correct_kernelbench``, over the rows where it is known (a row that produced no output is
  known to be incorrect; a verdict written before the field existed is unknown). Both count
  suspicious rows: they are about outputs, not about flags.
- Against ``expert`` (the fastest correct maintained kernel for the problem's operation),
  ``fast_p`` counts only the rows of problems that have an expert time in these rows: a problem
  no library implements has nothing to be compared with, so it is neither a hit nor a miss.
- Seconds per evaluation: ``Verdict.seconds`` (wall, build included), over rows that recorded it.
- Rows timed under Triton's CPU interpreter (``labels.interpreted``) have no kernel time: they
  count in correctness and fast_0, but not in fast_p for p > 0 (neither numerator nor denominator)
  nor in the speedup averages; ``Summary.interpreted`` shows them apart.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from hercules.harness.records import Status, Verdict
from hercules.report.labels import interpreted

Row = tuple[str, int | None, str, Verdict]
Against = Literal["eager", "best", "expert"]

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
    q1: float | None = None  # first quartile
    q3: float | None = None  # third quartile


@dataclass(frozen=True)
class Correctness:
    """Correct outputs under the strict tolerance and under KernelBench's atol = rtol = 1e-2."""

    n_rows: int
    strict: int  # rows with Verdict.correct
    strict_rate: float | None  # strict / n_rows
    kernelbench: int  # rows with check.correct_kernelbench true
    kernelbench_known: int  # rows whose KernelBench correctness is known
    kernelbench_rate: float | None  # kernelbench / kernelbench_known


@dataclass(frozen=True)
class SecondsStats:
    """Wall seconds per evaluation."""

    n: int  # rows that recorded their seconds
    median: float | None
    total: float


@dataclass(frozen=True)
class Interpreted:
    """Rows timed under Triton's CPU interpreter, apart from every speedup aggregate."""

    n_rows: int
    n_ok: int
    eager: SpeedupStats  # their speedups against eager, for what they are


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
    status_counts: tuple[tuple[str, int], ...]
    flag_counts: tuple[tuple[str, int], ...]
    correctness: Correctness
    seconds: SecondsStats
    fast_expert: tuple[tuple[float, float | None], ...] = ()  # (p, fast_p against expert)
    expert: SpeedupStats | None = None

    def fast(self, p: float, against: Against = "eager") -> float | None:
        return _lookup(_fast_pairs(self, against), p)


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
    correctness: Correctness
    seconds: SecondsStats
    fast_expert: tuple[tuple[float, float | None], ...] = ()
    expert: SpeedupStats | None = None
    interpreted: Interpreted | None = None  # None: no row ran under the interpreter

    def fast(self, p: float, against: Against = "eager") -> float | None:
        return _lookup(_fast_pairs(self, against), p)

    def status_count(self, status: Status | str) -> int:
        key = status.value if isinstance(status, Status) else status
        return dict(self.status_counts).get(key, 0)

    def flag_count(self, flag: str) -> int:
        return dict(self.flag_counts).get(getattr(flag, "value", flag), 0)


def _fast_pairs(summary: "Summary | LevelSummary", against: Against) -> tuple[tuple[float, float | None], ...]:
    return {"eager": summary.fast_eager, "best": summary.fast_best, "expert": summary.fast_expert}[against]


def _lookup(pairs: tuple[tuple[float, float | None], ...], p: float) -> float | None:
    for key, value in pairs:
        if key == p:
            return value
    raise KeyError(f"fast_p for p={p} was not computed (computed: {[k for k, _ in pairs]})")


# -- row-level helpers ------------------------------------------------------------------------


def is_correct(row: Row) -> bool:
    return row[3].status == Status.OK


def speedup_of(verdict: Verdict, against: Against | str = "eager") -> float | None:
    """The verdict's speedup against a baseline by name (or the ``best`` one), if finite and
    positive; ValueError for a name that is neither."""
    return verdict.speedup.usable(against)


def ok_speedups(rows: Iterable[Row], against: Against = "eager", of_interpreted: bool = False) -> list[float]:
    """Usable speedups of the correct rows, in row order: those timed as kernels, or with
    ``of_interpreted`` those timed under Triton's CPU interpreter."""
    out = []
    for row in rows:
        if is_correct(row) and interpreted(row[3]) == of_interpreted:
            value = speedup_of(row[3], against)
            if value is not None:
                out.append(value)
    return out


# Statuses of rows that produced no output: incorrect under any tolerance.
_NO_OUTPUT = frozenset({Status.BUILD_ERROR, Status.RUNTIME_ERROR, Status.TIMEOUT, Status.CRASH, Status.SKIPPED,
                        Status.HARNESS_ERROR})


def kernelbench_correct(verdict: Verdict) -> bool | None:
    """Correct under upstream KernelBench's tolerance, or None when the verdict does not say.

    Read with getattr / dict.get: ``check.correct_kernelbench`` is newer than many stored verdicts.
    """
    check = verdict.check
    value = check.get("correct_kernelbench") if isinstance(check, Mapping) else getattr(check, "correct_kernelbench", None)
    if isinstance(value, bool):
        return value
    return False if Status(verdict.status) in _NO_OUTPUT else None


# -- the statistics ---------------------------------------------------------------------------


def correctness_rate(rows: Sequence[Row]) -> float | None:
    if not rows:
        return None
    return sum(1 for row in rows if is_correct(row)) / len(rows)


def with_expert(rows: Sequence[Row]) -> list[Row]:
    """The rows of problems that have an expert time somewhere in ``rows``."""
    problems = {row[0] for row in rows if row[3].baselines_ms.get("expert")}
    return [row for row in rows if row[0] in problems]


def fast_p(rows: Sequence[Row], p: float, against: Against = "eager") -> float | None:
    """Fraction of ALL rows that are correct and faster than ``p`` times the baseline (against
    ``expert``: of the rows of problems with an expert time)."""
    if against == "expert":
        rows = with_expert(rows)
    if not rows:
        return None
    if p <= 0:
        return correctness_rate(rows)
    rows = [row for row in rows if not interpreted(row[3])]  # no kernel time: neither hit nor miss
    if not rows:
        return None
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


def speedup_stats(rows: Sequence[Row], against: Against = "eager", of_interpreted: bool = False) -> SpeedupStats:
    values = ok_speedups(rows, against, of_interpreted)
    if not values:
        return SpeedupStats(n=0, mean=None, median=None, geomean=None, min=None, max=None)
    # "inclusive": quartiles within the data's range (1 and 3 of 1, 2, 3, 4, 5 are 2 and 4).
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
    return SpeedupStats(
        n=len(values),
        mean=math.fsum(values) / len(values),
        median=float(statistics.median(values)),
        geomean=geometric_mean(values),
        min=min(values),
        max=max(values),
        q1=float(q1),
        q3=float(q3),
    )


def correctness(rows: Sequence[Row]) -> Correctness:
    kb = [kernelbench_correct(row[3]) for row in rows]
    known = [value for value in kb if value is not None]
    strict = sum(1 for row in rows if row[3].correct)
    return Correctness(
        n_rows=len(rows),
        strict=strict,
        strict_rate=strict / len(rows) if rows else None,
        kernelbench=sum(known),
        kernelbench_known=len(known),
        kernelbench_rate=sum(known) / len(known) if known else None,
    )


def seconds_stats(rows: Sequence[Row]) -> SecondsStats:
    values = [float(row[3].seconds) for row in rows if row[3].seconds and row[3].seconds > 0]
    return SecondsStats(n=len(values), median=float(statistics.median(values)) if values else None,
                        total=math.fsum(values))


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
        fast_expert=tuple((float(p), fast_p(rows, p, "expert")) for p in ps),
        eager=speedup_stats(rows, "eager"),
        best=speedup_stats(rows, "best"),
        expert=speedup_stats(rows, "expert"),
        status_counts=status_counts(rows),
        flag_counts=flag_counts(rows),
        correctness=correctness(rows),
        seconds=seconds_stats(rows),
    )


def per_level(rows: Sequence[Row], ps: Sequence[float] = P_VALUES) -> tuple[LevelSummary, ...]:
    groups: dict[int | None, list[Row]] = {}
    for row in rows:
        groups.setdefault(row[1], []).append(row)
    return tuple(summarize_level(groups[lvl], lvl, ps) for lvl in sorted(groups, key=_level_key))


def interpreted_summary(rows: Sequence[Row]) -> Interpreted | None:
    apart = [row for row in rows if interpreted(row[3])]
    if not apart:
        return None
    return Interpreted(n_rows=len(apart), n_ok=sum(1 for row in apart if is_correct(row)),
                       eager=speedup_stats(apart, "eager", of_interpreted=True))


def summarize(rows: Sequence[Row], ps: Sequence[float] = P_VALUES) -> Summary:
    rows = list(rows)
    return Summary(
        interpreted=interpreted_summary(rows),
        n_rows=len(rows),
        n_ok=sum(1 for row in rows if is_correct(row)),
        correctness_rate=correctness_rate(rows),
        fast_eager=tuple((float(p), fast_p(rows, p, "eager")) for p in ps),
        fast_best=tuple((float(p), fast_p(rows, p, "best")) for p in ps),
        fast_expert=tuple((float(p), fast_p(rows, p, "expert")) for p in ps),
        eager=speedup_stats(rows, "eager"),
        best=speedup_stats(rows, "best"),
        expert=speedup_stats(rows, "expert"),
        levels=per_level(rows, ps),
        status_counts=status_counts(rows),
        flag_counts=flag_counts(rows),
        correctness=correctness(rows),
        seconds=seconds_stats(rows),
    )


def has_levels(rows: Iterable[Row]) -> bool:
    """Whether any row has a level (problems from a KernelBench layout): reports then break down by it."""
    return any(row[1] is not None for row in rows)


def rows_of_level(rows: Iterable[Row], level: int | None) -> list[Row]:
    return [row for row in sort_rows(rows) if row[1] == level]


def _natural(text: str) -> tuple[tuple[int, int | str], ...]:
    """Numbers in names compare as numbers: level1_2_... before level1_10_..."""
    return tuple((0, int(part)) if part.isdecimal() else (1, part) for part in re.split(r"(\d+)", text) if part)


def sort_rows(rows: Iterable[Row]) -> list[Row]:
    """Rows by level (none last), then problem, then candidate: the order reports list them in."""
    return sorted(rows, key=lambda r: (_level_key(r[1]), _natural(r[0]), _natural(r[2])))
