"""The markdown report of a bench run: summary, per-level and per-candidate tables."""

from __future__ import annotations

from collections.abc import Sequence

from hercules.report import formatting as fmt
from hercules.report.stats import Row, Summary, sort_rows


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


def render_markdown(summary: Summary, rows: Sequence[Row], title: str = "Hercules bench") -> str:
    out: list[str] = [f"# {title}", ""]

    out += ["## Summary", ""]
    statuses = ", ".join(f"{s} {n}" for s, n in summary.status_counts) or "none"
    out += _table(
        ["metric", "value"],
        [
            ["candidates", summary.n_rows],
            ["correct (status ok)", summary.n_ok],
            ["correctness rate", fmt.rate(summary.correctness_rate)],
            ["statuses", statuses],
            ["flags", ", ".join(f"{f} {n}" for f, n in summary.flag_counts) or "none"],
        ],
        "lr",
    )
    out.append("")

    speed_rows: list[list[object]] = [
        [fmt.p_label(p), fmt.rate(e), fmt.rate(b)]
        for (p, e), (_, b) in zip(summary.fast_eager, summary.fast_best)
    ]
    for name in ("mean", "median", "geomean"):
        speed_rows.append(
            [
                f"{name} speedup",
                fmt.speedup(getattr(summary.eager, name)),
                fmt.speedup(getattr(summary.best, name)),
            ]
        )
    speed_rows.append(["rows with a speedup", summary.eager.n, summary.best.n])
    out += _table(["metric", "vs eager", "vs best baseline"], speed_rows, "lrr")
    out += [
        "",
        "fast_p: share of ALL candidates that are correct and faster than p times the baseline "
        "(fast_0 is the correctness rate). Speedup averages are over correct candidates only.",
        "",
    ]

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
        ],
        level_rows,
        "lrrrrrrr",
    )
    out.append("")

    out += ["## Candidates", ""]
    cand_rows = []
    for problem, _level, candidate, v in sort_rows(rows):
        cand_rows.append(
            [
                problem,
                candidate,
                v.status.value,
                fmt.flags(v.flags),
                fmt.ms(v.cand_ms),
                *(fmt.speedup(getattr(v.speedup, attr)) for attr, _ in fmt.SPEEDUP_COLUMNS),
                fmt.rate(v.sol_fraction),
            ]
        )
    out += _table(
        [
            "problem",
            "candidate",
            "status",
            "flags",
            "cand ms",
            *(f"vs {label}" for _, label in fmt.SPEEDUP_COLUMNS),
            "SOL",
        ],
        cand_rows,
        "llll" + "r" * (2 + len(fmt.SPEEDUP_COLUMNS)),
    )
    out.append("")
    return "\n".join(out)


def _has_p(pairs: tuple[tuple[float, float | None], ...], p: float) -> bool:
    return any(key == p for key, _ in pairs)
