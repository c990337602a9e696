"""Statuses, causes and flags of a CUDA-L1 bench run, with each verdict's reason, as markdown.

    python benchmarks/cudal1_table.py RUN_DIR

One row per evaluation (problem, status, cause, flags, H200 speedup vs eager, the release's own
speedup where the problem name carries the task, and the first note or error); then counts.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def rows(run_dir: Path):
    for path in sorted(run_dir.rglob("verdict.json")):
        v = json.loads(path.read_text())
        yield v


def main() -> None:
    run_dir = Path(sys.argv[1])
    verdicts = list(rows(run_dir))
    print(f"# CUDA-L1 through hercules bench: {run_dir}\n")
    print("| problem | status | cause | flags | speedup vs eager | sol_fraction | why |")
    print("|---|---|---|---|---:|---:|---|")
    for v in verdicts:
        eager = (v.get("speedup") or {}).get("eager")
        why = v.get("error") or next(iter(v.get("notes") or []), "")
        print(f"| {v['problem']} | {v['status']} | {v.get('cause', '')} | {', '.join(v.get('flags') or [])} | "
              f"{'' if eager is None else f'{eager:.2f}x'} | "
              f"{'' if v.get('sol_fraction') is None else format(v['sol_fraction'], '.3f')} | "
              f"{str(why)[:160].replace('|', '/')} |")
    print()
    print("statuses:", dict(Counter(v["status"] for v in verdicts)))
    print("causes:", dict(Counter(v.get("cause") for v in verdicts if v["status"] not in ("ok", "suspicious"))))
    print("flags:", dict(Counter(f for v in verdicts for f in v.get("flags") or [])))
    over = [v["problem"] for v in verdicts if (v.get("sol_fraction") or 0) > 1]
    print("sol_fraction > 1:", over or "none")


if __name__ == "__main__":
    main()
