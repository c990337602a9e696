"""Where a side-by-side speedup departs from 1 for code timed against itself: each side's per-call
time in the side-by-side rounds against its own calls' time on the device, per burst.

    python benchmarks/side_by_side_residuals.py RUN_DIR [RUN_DIR ...]   (bench run folders, or any
                                                                       folders holding verdict.json)

Reads every ``verdict.json`` below the folders, takes the side-by-side note (rounds, calls a burst,
each side's own report), and prints per problem: calls a burst, the median per-call figure of each
side in the rounds, each side's calls on the device (CUDA events around them: the side's own word,
diagnosis only), and the residual per burst, (rounds - device) x calls: what the calibrated round
trip left in each side's figure. Equal residuals cancel in the ratio; a residual difference of
0.1 ms a burst is 5% of a 2 ms call timed one call a burst. A device figure that differs between
the sides is the calls themselves (another algorithm, a host too busy to launch them).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path
from typing import NamedTuple

ROUNDS = re.compile(r"candidate/(\w+), (\d+) calls a burst: ([^;]*);")
PAIR_FIELD = r"{} ([\d.]+)/([\d.]+)"


class Residuals(NamedTuple):
    problem: str
    baseline: str
    calls: int
    rounds_ms: tuple[float, float]  # median per-call figure in the rounds, candidate / baseline
    device_ms: tuple[float, float] | None
    speedup: float | None

    def residual_ms(self, side: int) -> float | None:
        """(rounds - device) x calls for side 0 (candidate) or 1 (baseline)."""
        if self.device_ms is None:
            return None
        return (self.rounds_ms[side] - self.device_ms[side]) * self.calls


def _pair(note: str, field: str) -> tuple[float, float] | None:
    found = re.search(PAIR_FIELD.format(field), note)
    return (float(found.group(1)), float(found.group(2))) if found else None


def read(path: Path) -> Residuals | None:
    verdict = json.loads(path.read_text())
    for note in verdict.get("notes") or []:
        rounds = ROUNDS.search(note)
        if "side by side" not in note or not rounds:
            continue
        baseline, calls = rounds.group(1), int(rounds.group(2))
        pairs = [tuple(float(x) for x in pair.split("/")) for pair in rounds.group(3).split(", ")]
        medians = (statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs))
        speedup = (verdict.get("speedup") or {}).get(baseline)
        return Residuals(verdict.get("problem") or path.parent.parent.name, baseline, calls, medians,
                         _pair(note, "on the device"), speedup)
    return None


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args()
    rows = [row for folder in args.folders for path in sorted(folder.rglob("verdict.json"))
            if (row := read(path)) is not None]
    print("| problem | calls a burst | rounds ms, cand / base | device ms, cand / base | residual ms a burst, "
          "cand / base | difference | speedup |")
    print("|---|---:|---|---|---|---:|---:|")
    for row in rows:
        device = "-" if row.device_ms is None else f"{row.device_ms[0]:.4g} / {row.device_ms[1]:.4g}"
        cand, base = row.residual_ms(0), row.residual_ms(1)
        difference = None if cand is None or base is None else cand - base
        speedup = "-" if row.speedup is None else f"{row.speedup:.3f}"
        print(f"| {row.problem[:40]} | {row.calls} | {row.rounds_ms[0]:.4g} / {row.rounds_ms[1]:.4g} | {device} | "
              f"{_ms(cand)} / {_ms(base)} | {_ms(difference)} | {speedup} |")
    differences = [c - b for row in rows if (c := row.residual_ms(0)) is not None and (b := row.residual_ms(1)) is not None]
    if differences:
        print(f"\n{len(differences)} problems: residual difference (candidate - baseline) median "
              f"{statistics.median(differences):+.3f} ms a burst, [{min(differences):+.3f}, {max(differences):+.3f}]")


if __name__ == "__main__":
    main()
