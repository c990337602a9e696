"""What a run leaves behind: the best honest candidate per problem as a file, ``summary.json``
(the ``--json`` answer), ``report.md`` and ``report.html`` (the bench report's HTML over every
evaluated variant, with the optimisation's own figures in its header).

Best is the fastest variant whose verdict is ``ok`` with no flag; a problem without one has no
best (``best_status`` null), whatever its suspicious or incorrect variants claim.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hercules.fileio import write_text_atomic
from hercules.optimize.loop import ProblemState
from hercules.optimize.records import REFERENCE, ProblemResult
from hercules.report import formatting as fmt
from hercules.report.html import write_html
from hercules.report.markdown import (
    _table as md_table,  # the bench report's table writer
)
from hercules.report.stats import summarize


def write_best(run_dir: Path, state: ProblemState) -> ProblemResult:
    pool = state.pool
    best = pool.best()
    evaluated = [v for v in pool.variants if v.status != REFERENCE]
    path = None
    if best is not None:
        path = run_dir / "best" / f"{pool.problem.name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(best.code)
    speedups = {name: best.verdict.speedup.ratio(name) for name, _ in fmt.speedup_columns()} if best else {}
    intervals = {name: tuple(ends) for name, _ in fmt.speedup_columns()
                 if best and (ends := best.verdict.speedup.interval(name))}
    return ProblemResult(
        name=pool.problem.name,
        best_status=best.status if best else None,
        best_speedup=pool.speedup(best) if best else None,
        best_code_path=str(path) if path else None,
        best_variant=best.name if best else None,
        best_speedups=speedups,
        best_intervals=intervals,
        rounds=state.rounds_done,
        variants=len(evaluated),
        statuses=dict(Counter(v.status for v in evaluated)),
        stop_reason=state.stop_reason,
        best_so_far=tuple(state.best_so_far),
        tags=best.tags if best else (),
    )


def _techniques(states: Mapping[str, ProblemState]) -> list[list[object]]:
    """Per tag: honest variants using it, and the best speedup among them."""
    seen: dict[str, list[float]] = {}
    for state in states.values():
        for v in state.pool.honest():
            for tag in v.tags:
                seen.setdefault(tag, []).append(state.pool.speedup(v) or 0.0)
    return [[tag, len(vals), fmt.speedup(max(vals))] for tag, vals in sorted(seen.items(), key=lambda kv: -max(kv[1]))]


def _with_interval(variant, name: str) -> str:
    """A variant's speedup with its 95% interval where one was measured ('1.32x [1.02-1.75]', a
    tie when it holds 1)."""
    interval = variant.verdict.speedup.interval(name) if variant.verdict is not None else None
    return fmt.speedup_interval(variant.speedup(name), interval)


def render_markdown(results: list[ProblemResult], states: Mapping[str, ProblemState], meta: Mapping[str, Any]) -> str:
    out = ["# Hercules optimize", ""]
    out += [f"- {k}: {v}" for k, v in meta.items()] + [""]
    out += ["## Best honest candidate per problem", ""]
    columns = fmt.speedup_columns()
    rows = [[r.name, r.best_variant or "none", r.best_status or "none",
             *(fmt.speedup_interval(r.best_speedups.get(name), r.best_intervals.get(name)) for name, _ in columns),
             r.rounds, r.variants, ", ".join(f"{k} {n}" for k, n in sorted(r.statuses.items())), r.stop_reason,
             ", ".join(r.tags)] for r in results]
    out += md_table(["problem", "best", "status", *(f"vs {label}" for _, label in columns),
                     "rounds", "variants", "statuses", "stopped", "techniques"], rows,
                    "lll" + "r" * (len(columns) + 2) + "lll")  # one mark per column, or no table
    rounds = max((len(r.best_so_far) for r in results), default=0)
    out += ["", "A speedup's brackets hold its 95% interval (candidate and baseline timed in the same rounds); "
            "one that holds 1.0 is a tie. A later variant becomes the best only when it is faster beyond both "
            "intervals (or, without intervals, beyond both timings' spread)."]
    out += ["", f"## Best-so-far speedup per round (objective: {meta.get('objective', 'eager')}; round 0: seeds)", ""]
    out += md_table(["problem", *(f"r{i}" for i in range(rounds))],
                    [[r.name, *(fmt.speedup(x) for x in r.best_so_far), *([""] * (rounds - len(r.best_so_far)))]
                     for r in results], "l" + "r" * rounds)
    out += ["", "## Techniques in honest variants (tagged from the code)", ""]
    out += md_table(["technique", "variants", "best speedup"], _techniques(states), "lrr")
    out += ["", "## Every variant", ""]
    variant_rows = []
    for state in states.values():
        for v in state.pool.variants:
            if v.status == REFERENCE:
                continue
            variant_rows.append([v.slot.problem, v.name, v.origin, v.status, ", ".join(v.flags),
                                 _with_interval(v, "eager"), _with_interval(v, "best"),
                                 ", ".join(v.tags), fmt.truncate(v.reason, 120) + (" (reused)" if v.reused else "")])
    out += md_table(["problem", "variant", "origin", "status", "flags", "vs eager", "vs best", "techniques", "reason"],
                    variant_rows, "llllrrrll")
    return "\n".join(out) + "\n"


def write_reports(run_dir: Path, states: Mapping[str, ProblemState], meta: Mapping[str, Any]) -> dict[str, Any]:
    results = [write_best(run_dir, state) for state in states.values()]
    (run_dir / "report.md").write_text(render_markdown(results, states, meta))
    rows = [(name, state.pool.problem.level, v.name, v.verdict) for name, state in states.items()
            for v in state.pool.variants if v.verdict is not None]
    best = {r.name: f"{r.best_variant} {fmt.speedup(r.best_speedup)}" if r.best_variant else "none" for r in results}
    write_html(run_dir / "report.html", summarize(rows), rows, title=f"Hercules optimize: {run_dir.name}",
               meta={**meta, **{f"best {k}": v for k, v in best.items()}})
    summary = {"run_dir": str(run_dir), "problems": [r.to_json() for r in results],
               "report_md": str(run_dir / "report.md"), "report_html": str(run_dir / "report.html"), **dict(meta)}
    write_text_atomic(run_dir / "summary.json", json.dumps(summary, indent=1, default=str))
    return summary
