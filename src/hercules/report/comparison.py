"""Per problem of a run: each candidate's time against every baseline's, with the speedup and its
95% interval, the speed-of-light fraction, status and flags (the HTML report's comparison pages).

Pure functions of the rows, like ``stats``: what a verdict measured is shown, nothing is averaged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hercules.harness import baselines
from hercules.harness.records import Verdict
from hercules.report.labels import interpreted
from hercules.report.stats import Row, sort_rows


@dataclass(frozen=True)
class Against:
    """One baseline as the candidate faced it: its time, and the candidate's speedup against it."""

    name: str
    ms: float | None  # None: requested but not measured (failed, or not on this device)
    speedup: float | None
    interval: tuple[float, float] | None  # 95%, where candidate and baseline shared rounds


@dataclass(frozen=True)
class CandidateComparison:
    candidate: str
    verdict: Verdict
    baselines: tuple[Against, ...]  # in ``harness.baselines`` order, then any name it no longer has
    best: Against | None  # the fastest baseline's figures under its own name; None: no baseline time
    interpreted: bool  # timed under Triton's CPU interpreter: not the kernel's speed

    @property
    def bound(self) -> str:
        """What the speed-of-light floor is set by ("memory", "compute"), if the verdict has one."""
        sol = self.verdict.sol
        return str(sol.get("bound") or "") if isinstance(sol, Mapping) else ""


@dataclass(frozen=True)
class ProblemComparison:
    problem: str
    level: int | None
    anchor: str  # the element id the report's links point at
    candidates: tuple[CandidateComparison, ...]


def _against(verdict: Verdict, name: str, ms: float | None) -> Against:
    # .get: a verdict file may name a baseline this version no longer has; its time is still shown.
    return Against(name, ms, verdict.speedup.ratios.get(name), verdict.speedup.intervals.get(name))


def compare(candidate: str, verdict: Verdict) -> CandidateComparison:
    times = verdict.baselines_ms
    known = [name for name in baselines.BASELINES if name in times]
    rows = tuple(_against(verdict, name, times[name]) for name in [*known, *(n for n in times if n not in known)])
    timed = [row for row in rows if row.ms and row.speedup is not None]
    fastest = min(timed, key=lambda row: row.ms or 0.0, default=None)
    best = (Against(fastest.name, fastest.ms, verdict.speedup.best, verdict.speedup.intervals.get("best"))
            if fastest else None)
    return CandidateComparison(candidate, verdict, rows, best, interpreted(verdict) and verdict.cand_ms is not None)


def anchors(problems: Iterable[str]) -> dict[str, str]:
    """An element id per problem name: readable, and distinct even where names differ only in
    characters an id leaves out."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for problem in dict.fromkeys(problems):
        base = "problem-" + (re.sub(r"[^A-Za-z0-9_.-]+", "_", problem).strip("_") or "unnamed")
        anchor, n = base, 1
        while anchor in taken:
            n += 1
            anchor = f"{base}-{n}"
        taken.add(anchor)
        out[problem] = anchor
    return out


def comparisons(rows: Sequence[Row]) -> list[ProblemComparison]:
    """One comparison per problem, in the reports' order, each with its candidates."""
    ordered = sort_rows(rows)
    ids = anchors(row[0] for row in ordered)
    grouped: dict[str, list[Row]] = {}
    for row in ordered:
        grouped.setdefault(row[0], []).append(row)
    return [ProblemComparison(problem, group[0][1], ids[problem],
                              tuple(compare(candidate, verdict) for _, _, candidate, verdict in group))
            for problem, group in grouped.items()]
