"""Statuses, causes and flags of a CUDA-L1 bench run, with each verdict's reason, as markdown.

    python benchmarks/cudal1_table.py RUN_DIR [RELEASE.json ...]

One row per evaluation (problem, status, cause, flags, H200 speedup vs eager, the first note or
error); then counts. With the release files the run read, each speedup the release claims against
eager (``score_default``, measured on its own GPU) is set beside the H200's, with how it fared:
confirmed (ok, no flag, faster than eager here too), not faster here (ok, no flag), flagged
(suspicious: the flags say what), wrong (incorrect, shape or tolerance), or failed otherwise.
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


def outcome(verdict: dict, claimed: float) -> str:
    """How a claimed speedup fared on this run's device."""
    status, flags = verdict["status"], verdict.get("flags") or []
    eager = (verdict.get("speedup") or {}).get("eager")
    if status == "ok" and not flags:
        if claimed <= 1.0:
            return "no speedup claimed"
        return "confirmed" if eager is not None and eager > 1.0 else "not faster here"
    if status == "suspicious":
        return "flagged"
    if status in ("incorrect", "shape_mismatch"):
        rel = verdict.get("rel_err")
        return "wrong" + (f" (relative error {rel:.2g})" if isinstance(rel, (int, float)) and rel else "")
    return f"failed ({status})"


def published(verdicts: list[dict], releases: list[str]) -> None:
    from hercules.problems.loaders import load_source

    claims = {c.problem: (c.score or {}).get("score_default") for path in releases
              for c in load_source(path).candidates}
    fared = []
    print("\n## The release's speedups against the H200's\n")
    print("| problem | claimed vs eager (release's GPU) | H200 vs eager [interval] | status | flags | outcome |")
    print("|---|---:|---:|---|---|---|")
    for v in verdicts:
        claimed = claims.get(v["problem"])
        if not isinstance(claimed, (int, float)):
            continue
        speed = v.get("speedup") or {}
        eager, interval = speed.get("eager"), (speed.get("intervals") or {}).get("eager")
        here = "" if eager is None else f"{eager:.2f}x" + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "")
        fared.append(outcome(v, claimed))
        print(f"| {v['problem']} | {claimed:.2f}x | {here} | {v['status']} | {', '.join(v.get('flags') or [])} | "
              f"{fared[-1]} |")
    claimed_faster = [f.split(" (")[0] for f in fared if f != "no speedup claimed"]
    print(f"\nclaimed faster than eager: {len(claimed_faster)} of {len(fared)}; outcomes: "
          f"{dict(Counter(claimed_faster))}")


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
    if sys.argv[2:]:
        published(verdicts, sys.argv[2:])


if __name__ == "__main__":
    main()
