"""The markdown report of a bench run: summary, per-level and per-candidate tables."""

from __future__ import annotations

from collections.abc import Sequence

from hercules.harness.records import Status
from hercules.report import formatting as fmt
from hercules.report import labels
from hercules.report.stats import LevelSummary, Row, Summary, has_levels, rows_of_level, sort_rows


def _cell(text: object) -> str:
    """A table cell: one line, pipes escaped, and no raw HTML (a name like ``<b>`` stays text)."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;")


def _table(header: Sequence[str], rows: Sequence[Sequence[object]], align: str) -> list[str]:
    """``align`` holds one character per column: 'l' or 'r'."""
    marks = {"l": ":---", "r": "---:"}
    lines = [
        "| " + " | ".join(_cell(h) for h in header) + " |",
        "| " + " | ".join(marks[a] for a in align) + " |",
    ]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _ms(v) -> str:
    """The candidate's time, labelled when it was taken under Triton's CPU interpreter."""
    return fmt.ms(v.cand_ms) + (f" ({labels.INTERPRETED})" if v.cand_ms is not None and labels.interpreted(v) else "")


def _level_section(lv: LevelSummary, rows: Sequence[Row]) -> list[str]:
    c = lv.correctness
    statuses = ", ".join(f"{s} {n}" for s, n in lv.status_counts) or "none"
    flags = ", ".join(f"{f} {n}" for f, n in lv.flag_counts) or "none"
    out = [
        f"### Level {fmt.level(lv.level)}",
        "",
        f"{lv.n_rows} candidates: {statuses}; flags: {flags}. Speedup vs eager: median "
        f"{fmt.speedup(lv.eager.median)}, IQR {fmt.speedup_range(lv.eager.q1, lv.eager.q3)} (n={lv.eager.n}). "
        f"Correct outputs: strict {fmt.count_rate(c.strict, c.n_rows, c.strict_rate)}, kernelbench "
        f"{fmt.count_rate(c.kernelbench, c.kernelbench_known, c.kernelbench_rate)}. Seconds per evaluation: "
        f"median {fmt.seconds(lv.seconds.median)}, total {fmt.seconds(lv.seconds.total)}.",
        "",
    ]
    table = []
    for problem, _level, candidate, v in rows:
        spread = v.timing.spread if v.timing is not None and v.cand_ms is not None else None
        sol = v.sol if isinstance(v.sol, dict) else {}
        table.append([problem, candidate, labels.status_text(v), fmt.flags(v.flags), _ms(v), fmt.rate(spread),
                      fmt.against(v.speedup, "eager"), fmt.rate(v.sol_fraction),
                      fmt.rate(sol.get("compute_fraction_of_reference_work")), sol.get("bound") or "",
                      fmt.seconds(v.seconds or None)])
    out += _table(["problem", "candidate", "status", "flags", "cand ms", "spread", "vs eager", "SOL",
                   "of ref FLOPs", "bound", "s / eval"], table, "llllrrrrrlr")
    out.append("")
    return out


def render_markdown(summary: Summary, rows: Sequence[Row], title: str = "Hercules bench",
                    sol_plot: str | None = None) -> str:
    """``sol_plot``: where the SOL scatter's PNG lies, relative to the markdown file (none: no image)."""
    out: list[str] = [f"# {title}", ""]

    out += ["## Summary", ""]
    statuses = ", ".join(f"{s} {n}" for s, n in summary.status_counts) or "none"
    out += _table(
        ["metric", "value"],
        [
            ["candidates", summary.n_rows],
            ["left out: harness errors (Hercules' own fault, not the candidates')",
             sum(1 for row in rows if row[3].status is Status.HARNESS_ERROR)],
            ["correct (status ok)", summary.n_ok],
            ["correctness rate", fmt.rate(summary.correctness_rate)],
            ["statuses", statuses],
            ["flags", ", ".join(f"{f} {n}" for f, n in summary.flag_counts) or "none"],
            ["seconds per evaluation (median, total)",
             f"{fmt.seconds(summary.seconds.median)}, {fmt.seconds(summary.seconds.total)}"],
        ],
        "lr",
    )
    out.append("")

    c = summary.correctness
    out += _table(
        ["tolerance", "correct outputs"],
        [
            [labels.STRICT_CHECK, fmt.count_rate(c.strict, c.n_rows, c.strict_rate)],
            [labels.KERNELBENCH_CHECK, fmt.count_rate(c.kernelbench, c.kernelbench_known, c.kernelbench_rate)],
        ],
        "lr",
    )
    out += [
        "",
        f"{labels.CHECKS_DIFFER} Correct outputs count suspicious candidates too; the correctness rate above "
        f"does not. The KernelBench rate is over the candidates whose verdict records it ({c.kernelbench_known} "
        f"of {c.n_rows}).",
        "",
    ]

    expert = summary.expert
    speed_rows: list[list[object]] = [
        [fmt.p_label(p), fmt.rate(e), fmt.rate(b), fmt.rate(x)]
        for (p, e), (_, b), (_, x) in zip(summary.fast_eager, summary.fast_best, summary.fast_expert)
    ]
    for name in ("mean", "median", "geomean"):
        speed_rows.append(
            [
                f"{name} speedup",
                fmt.speedup(getattr(summary.eager, name)),
                fmt.speedup(getattr(summary.best, name)),
                fmt.speedup(getattr(expert, name) if expert else None),
            ]
        )
    speed_rows.append(["rows with a speedup", summary.eager.n, summary.best.n, expert.n if expert else 0])
    out += _table(["metric", "vs eager", "vs best baseline", "vs expert"], speed_rows, "lrrr")
    out += [
        "",
        "fast_p: share of ALL candidates that are correct and faster than p times the baseline "
        "(fast_0 is the correctness rate). Speedup averages are over correct candidates only.",
        "",
    ]
    out += _interpreted_section(summary)

    out += ["## Per level", ""]
    level_rows = [
        [
            fmt.level(lv.level),
            lv.n_rows,
            lv.n_ok,
            fmt.rate(lv.correctness_rate),
            fmt.rate(lv.fast(1.0, "eager")) if _has_p(lv.fast_eager, 1.0) else fmt.MISSING,
            fmt.rate(lv.fast(1.0, "best")) if _has_p(lv.fast_best, 1.0) else fmt.MISSING,
            fmt.speedup(lv.eager.geomean),
            fmt.speedup(lv.best.geomean),
            fmt.speedup(lv.eager.median),
            fmt.speedup_range(lv.eager.q1, lv.eager.q3),
            fmt.rate(lv.correctness.strict_rate),
            fmt.rate(lv.correctness.kernelbench_rate),
            fmt.seconds(lv.seconds.median),
        ]
        for lv in summary.levels
    ]
    out += _table(
        [
            "level",
            "candidates",
            "ok",
            "correctness",
            "fast_1 eager",
            "fast_1 best",
            "geomean eager",
            "geomean best",
            "median eager",
            "IQR eager",
            "strict",
            "kernelbench",
            "s / eval",
        ],
        level_rows,
        "lrrrrrrrrrrrr",
    )
    out.append("")
    if has_levels(rows):
        for lv in summary.levels:
            out += _level_section(lv, rows_of_level(rows, lv.level))
    if sol_plot:
        out += ["## Speed of light", "", f"![candidate time vs fraction of the speed of light]({sol_plot})", "",
                "SOL: the fewest bytes at the device's bandwidth (or a declared minimum FLOP count at its "
                "peak) over the candidate's time; the reference's FLOPs never enter it (a candidate may "
                "skip their zeros). \"of ref FLOPs\": the reference's FLOPs at the device's peak over the "
                "candidate's time; above 100% when the candidate does less arithmetic than the reference.", ""]

    out += ["## Candidates", ""]
    columns = fmt.speedup_columns()
    cand_rows = []
    for problem, _level, candidate, v in sort_rows(rows):
        cand_rows.append(
            [
                problem,
                candidate,
                labels.status_text(v),
                fmt.flags(v.flags),
                _ms(v),
                *fmt.speedup_cells(v.speedup),
                fmt.rate(v.sol_fraction),
                fmt.expert_label(v.expert),
            ]
        )
    out += _table(
        [
            "problem",
            "candidate",
            "status",
            "flags",
            "cand ms",
            *(f"vs {label}" for _, label in columns),
            "SOL",
            "expert kernel",
        ],
        cand_rows,
        "llll" + "r" * (2 + len(columns)) + "l",
    )
    out.append("")
    if any(labels.timeout_note(v) for *_, v in rows):
        out += [f"timeout (Triton CPU {labels.INTERPRETED}): {labels.INTERPRETED_TIMEOUT_NOTE}.", ""]
    return "\n".join(out)


def _interpreted_section(summary: Summary) -> list[str]:
    """The rows timed under Triton's CPU interpreter, apart from the aggregates above."""
    apart = summary.interpreted
    if apart is None:
        return []
    return ["### Timed under Triton's CPU interpreter (apart)", "",
            f"{apart.n_rows} candidates ({apart.n_ok} ok) were {labels.INTERPRETED_NOTE} (fast_p for p > 0 and "
            f"the averages above). Their own speedups vs eager: geomean {fmt.speedup(apart.eager.geomean)}, "
            f"median {fmt.speedup(apart.eager.median)} (n={apart.eager.n}).", ""]


def _has_p(pairs: tuple[tuple[float, float | None], ...], p: float) -> bool:
    return any(key == p for key, _ in pairs)
