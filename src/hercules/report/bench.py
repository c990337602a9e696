"""What ``hercules bench`` evaluates and what it writes when done."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from hercules.harness.batch import BenchItem, BenchRow
from hercules.harness.build import software_versions
from hercules.harness.records import Status
from hercules.problems.loaders import load_source
from hercules.problems.model import Candidate, Problem, ProblemFormatError
from hercules.report import formatting as fmt
from hercules.report import labels
from hercules.report.html import sol_scatter, write_html
from hercules.report.markdown import render_markdown
from hercules.report.stats import Row, summarize
from hercules.suite.catalog import suite_candidate_paths, suite_problem_paths


def _source(path: Path) -> str:
    """A candidate file's text; ProblemFormatError (one line) for one that is not UTF-8 text."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ProblemFormatError(f"{path}: not a candidate source file (not UTF-8 text: {exc.reason})") from None
    except OSError as exc:
        raise ProblemFormatError(f"{path}: cannot read the candidate file ({exc.strerror})") from None


def _candidates_in(folder: Path, problem: str) -> list[Candidate]:
    return [Candidate(name=p.stem, code=_source(p), source=str(p), problem=problem)
            for p in sorted((folder / problem).glob("*.py")) if p.is_file()]


def collect_items(sources: Sequence[str], candidates_dir: str | None, name_filter: str | None) -> list[BenchItem]:
    """Problems x candidates. No sources: the built-in suite and its example candidates."""
    items: list[BenchItem] = []
    if not sources:
        for path in suite_problem_paths():
            problem = load_source(path).problems[0]
            for file in suite_candidate_paths(problem.name):
                items.append(BenchItem(problem, Candidate(file.stem, file.read_text(), str(file), problem.name)))
    for source in sources:
        loaded = load_source(source)
        by_name: dict[str, Problem] = {p.name: p for p in loaded.problems}
        for candidate in loaded.candidates:
            if candidate.problem in by_name:
                items.append(BenchItem(by_name[candidate.problem], candidate))
        if candidates_dir:
            folder = Path(candidates_dir)
            if folder.exists() and not folder.is_dir():
                raise ProblemFormatError(f"--candidates {candidates_dir}: is a file, not a folder (one sub-folder "
                                         "of candidate files per problem name)")
            if not folder.is_dir():
                raise ProblemFormatError(f"{candidates_dir}: no such candidates folder")
            for problem in loaded.problems:
                items.extend(BenchItem(problem, c) for c in _candidates_in(folder, problem.name))
    if name_filter:
        items = [i for i in items if name_filter in i.problem.name]
    return items


def as_rows(rows: Sequence[BenchRow]) -> list[Row]:
    return [(r.item.problem.name, r.item.problem.level, r.item.candidate.name, r.verdict) for r in rows]


def scored(table: Sequence[Row]) -> list[Row]:
    """Rows that count in rates: a candidate skipped for want of a device was not evaluated, and a
    harness error says nothing of its candidate (the summary counts those rows apart)."""
    return [row for row in table if row[3].status not in (Status.SKIPPED, Status.HARNESS_ERROR)]


def write_reports(rows: Sequence[BenchRow], run_dir: Path) -> dict[str, Any]:
    table = as_rows(rows)
    summary = summarize(scored(table))
    devices = sorted({r.verdict.device for r in rows})
    meta = {"run folder": str(run_dir), "device": ", ".join(devices), **software_versions()}
    # The markdown report's one image, beside it (markdown viewers do not show data URIs).
    (run_dir / "sol_scatter.png").write_bytes(sol_scatter(table).png_bytes())
    (run_dir / "summary.md").write_text(render_markdown(summary, table, title=f"Hercules bench: {run_dir.name}",
                                                        sol_plot="sol_scatter.png"))
    write_html(run_dir / "report.html", summary, table, title=f"Hercules bench: {run_dir.name}", meta=meta)
    data = {
        "run_dir": str(run_dir),
        "evaluations": summary.n_rows,
        "skipped": sum(1 for row in table if row[3].status is Status.SKIPPED),
        # Rows where Hercules' own code failed: out of every rate and speedup above, counted here.
        "harness_errors": sum(1 for row in table if row[3].status is Status.HARNESS_ERROR),
        "ok": summary.n_ok,
        "correctness_rate": summary.correctness_rate,
        "correct_outputs": {"strict": summary.correctness.strict_rate,
                            "kernelbench": summary.correctness.kernelbench_rate,
                            "kernelbench_known": summary.correctness.kernelbench_known},
        "seconds_per_evaluation": summary.seconds.__dict__,
        "fast_p_eager": {str(p): v for p, v in summary.fast_eager},
        "fast_p_best": {str(p): v for p, v in summary.fast_best},
        "fast_p_expert": {str(p): v for p, v in summary.fast_expert},
        "speedup_eager": summary.eager.__dict__,
        "speedup_best": summary.best.__dict__,
        "speedup_expert": summary.expert.__dict__ if summary.expert else None,
        # Timed under Triton's CPU interpreter: out of fast_p (p > 0) and the speedups above.
        "interpreted": ({"evaluations": summary.interpreted.n_rows, "ok": summary.interpreted.n_ok,
                         "speedup_eager": summary.interpreted.eager.__dict__} if summary.interpreted else None),
        "statuses": dict(summary.status_counts),
        "flags": dict(summary.flag_counts),
        "report_html": str(run_dir / "report.html"),
        "summary_md": str(run_dir / "summary.md"),
        "sol_scatter_png": str(run_dir / "sol_scatter.png"),
    }
    (run_dir / "summary.json").write_text(json.dumps(data, indent=1))
    return data


def print_summary(console: Console, rows: Sequence[BenchRow], run_dir: Path) -> None:
    table = Table(title="Hercules bench")
    speedups = fmt.speedup_columns()
    for column in ("problem", "candidate", "status", "ms", *(f"vs {label}" for _, label in speedups), "expert",
                   "SOL", "flags"):
        table.add_column(column, overflow="fold")
    for r in rows:
        v = r.verdict
        ms = fmt.ms(v.cand_ms) + (f" ({labels.INTERPRETED})" if v.cand_ms is not None and labels.interpreted(v) else "")
        table.add_row(r.item.problem.name, r.item.candidate.name, labels.status_text(v), ms,
                      *fmt.speedup_cells(v.speedup),
                      fmt.expert_label(v.expert), f"{v.sol_fraction:.2f}" if v.sol_fraction is not None else "-",
                      ", ".join(v.flags))
    console.print(table)
    if any(labels.timeout_note(r.verdict) for r in rows):
        console.print(f"timeout (Triton CPU {labels.INTERPRETED}): {labels.INTERPRETED_TIMEOUT_NOTE}")
    table = as_rows(rows)
    summary = summarize(scored(table))
    skipped = len(table) - summary.n_rows
    if skipped:
        console.print(f"{skipped} candidates skipped (they need a device that is not present); rates are over the other {summary.n_rows}")
    console.print(f"correct: {fmt.rate(summary.correctness_rate)}   "
                  + "   ".join(f"{fmt.p_label(p)}: {fmt.rate(e)} (eager) {fmt.rate(b)} (best) {fmt.rate(x)} (expert)"
                             for (p, e), (_, b), (_, x) in zip(summary.fast_eager, summary.fast_best,
                                                               summary.fast_expert)))
    console.print(f"speedup vs eager: mean {fmt.speedup(summary.eager.mean)}, median {fmt.speedup(summary.eager.median)}, "
                  f"geomean {fmt.speedup(summary.eager.geomean)};  vs best: geomean {fmt.speedup(summary.best.geomean)}")
    if summary.interpreted:
        apart = summary.interpreted
        console.print(f"{apart.n_rows} candidates {labels.INTERPRETED_NOTE}: their geomean vs eager "
                      f"{fmt.speedup(apart.eager.geomean)} (n={apart.eager.n})")
    c = summary.correctness
    console.print(f"correct outputs: {labels.STRICT_CHECK}: {fmt.count_rate(c.strict, c.n_rows, c.strict_rate)}; "
                  f"{labels.KERNELBENCH_CHECK}: {fmt.count_rate(c.kernelbench, c.kernelbench_known, c.kernelbench_rate)}. "
                  f"{labels.CHECKS_DIFFER}")
    console.print(f"reports: {run_dir / 'report.html'}  {run_dir / 'summary.md'}  store: {run_dir / 'results.sqlite'}")
