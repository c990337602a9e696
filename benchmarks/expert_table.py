"""The expert baseline per problem, from a `hercules bench` run folder's verdicts.

    python benchmarks/expert_table.py RUN_DIR [--title TEXT] > table.md

One row per candidate whose verdict has an expert report: the chosen library and version, its time,
eager's, the best of the other baselines, the candidate's time and its speedup against the expert;
then every implementation the reference worker considered per operation (its brief choice timing).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def rows(run_dir: Path) -> tuple[list[str], dict[str, list[str]]]:
    table: list[str] = []
    considered: dict[str, list[str]] = {}
    for path in sorted(run_dir.glob("*/*/verdict.json")):
        verdict = json.loads(path.read_text())
        expert = verdict.get("expert") or {}
        if not expert:
            continue
        times = verdict.get("baselines_ms") or {}
        problem, candidate = path.parent.parent.name, path.parent.name
        chosen = expert.get("chosen")
        if expert.get("op") and expert["op"] not in considered:
            considered[expert["op"]] = [f"{c['name']} {c['status']}" + (f" {c['ms']:.4f}" if c.get("ms") else "")
                                        for c in expert.get("considered", [])]
        rest = {n: t for n, t in times.items() if n != "expert" and t is not None}  # the verdict's other baselines
        best = min(rest, key=rest.get) if rest else None
        cand = verdict.get("cand_ms")
        library = f"{chosen['name']} ({chosen['distribution']} {chosen['version']})" if chosen else "none correct"
        vs = (verdict.get("speedup") or {}).get("expert")
        table.append(f"| {problem} | {candidate} | {verdict['status']} | {library} | {_ms(times.get('expert'))} | "
                     f"{_ms(times.get('eager'))} | {f'{_ms(rest[best])} ({best})' if best else 'n/a'} | {_ms(cand)} | "
                     f"{'n/a' if vs is None else f'{vs:.2f}x'} |")
    return table, considered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--title", default="Expert baseline per problem")
    args = parser.parse_args()
    table, considered = rows(args.run_dir)
    if not table:
        raise SystemExit(f"no verdict with an expert report under {args.run_dir}/*/*/verdict.json")
    print(f"# {args.title}\n\nTimes in ms per call, from the verdicts.\n")
    print("| problem | candidate | status | expert (library, version) | expert ms | eager ms | best of the rest ms "
          "| candidate ms | vs expert |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|")
    print("\n".join(table))
    print("\nImplementations considered (ms in the reference worker's brief choice timing):\n")
    for op, names in considered.items():
        print(f"- {op}: " + ", ".join(names))


if __name__ == "__main__":
    main()
