"""What the static scan reports: one ``Finding`` per (flag, line), gathered by ``Findings``."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from hercules.harness.records import Flag


@dataclass(frozen=True)
class Finding:
    flag: str  # a Flag value
    line: int
    reason: str
    # A fallback that is honest as long as it never runs: a flag only if one of ``fallback_lines``
    # (inclusive ranges of the candidate's source lines, each run only when the fallback is taken)
    # executes, at import, construction or in a forward call.
    conditional: bool = False
    fallback_lines: tuple[tuple[int, int], ...] = ()
    # Reported for the record and never a flag (a setting that does not change the arithmetic).
    note: bool = False

    @property
    def decisive(self) -> bool:
        """A flag by itself: neither conditional on execution nor a note."""
        return not self.conditional and not self.note


def lines_executed(fallback_lines: Iterable[tuple[int, int]], executed: set[int]) -> bool:
    """Whether any line of the inclusive ranges ``fallback_lines`` is in ``executed``."""
    ranges = tuple(fallback_lines)
    return any(start <= line <= end for line in executed for start, end in ranges)


def _weight(finding: Finding) -> int:
    return 2 if finding.decisive else 1 if finding.conditional else 0


class Findings:
    """One finding per (flag, line): a flag outranks a conditional finding, which outranks a note;
    between equals the first reported stays (its reason is the one the verdict shows)."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, int], Finding] = {}

    def add(self, flag: Flag, where: ast.AST | int, reason: str, *, conditional: bool = False,
            fallback_lines: Iterable[tuple[int, int]] = (), note: bool = False) -> None:
        line = where if isinstance(where, int) else getattr(where, "lineno", 0)
        key = (flag.value, line)
        finding = Finding(flag.value, line, reason, conditional, tuple(sorted(set(fallback_lines))), note)
        if key not in self._found or _weight(finding) > _weight(self._found[key]):
            self._found[key] = finding

    def sorted(self) -> list[Finding]:
        return sorted(self._found.values(), key=lambda f: (f.line, f.flag))
