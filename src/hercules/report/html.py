"""The HTML report of a bench run: one self-contained file that opens offline.

Plots are drawn with matplotlib's Agg renderer (``Figure`` objects, never pyplot, so no global
backend is touched and this is safe in a worker thread) and embedded as base64 PNG data URIs.
There are no external stylesheets, scripts, fonts or images: the file can be mailed or archived
as is.
"""

from __future__ import annotations

import base64
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from hercules.fileio import write_text_atomic
from hercules.harness.records import Status
from hercules.report import formatting as fmt
from hercules.report import labels
from hercules.report.comparison import comparisons
from hercules.report.stats import Row, Summary, has_levels, ok_speedups, rows_of_level, sort_rows

TEMPLATES = Path(__file__).parent / "templates"

# One colour per status, shared by the scatter plot and the table's CSS.
STATUS_COLOURS: dict[str, str] = {
    Status.OK.value: "#2e7d32",
    Status.SUSPICIOUS.value: "#ef6c00",
    Status.INCORRECT.value: "#c62828",
    Status.RUNTIME_ERROR.value: "#8e24aa",
    Status.CRASH.value: "#4e342e",
    Status.TIMEOUT.value: "#5d4037",
    Status.BUILD_ERROR.value: "#6d4c41",
    Status.SKIPPED.value: "#757575",
    Status.HARNESS_ERROR.value: "#37474f",
}

# One marker per level in the SOL scatter (colour is the status); levels beyond these reuse them.
LEVEL_MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X")

_DPI = 110


@dataclass(frozen=True)
class Plot:
    data_uri: str  # "data:image/png;base64,..."
    n_points: int  # values drawn; 0 means the image only says "no data"

    def png_bytes(self) -> bytes:
        """The image itself, to write beside a markdown report."""
        return base64.b64decode(self.data_uri.split(",", 1)[1])


def _png_data_uri(fig: Figure) -> str:
    buf = io.BytesIO()
    # Software=None: no tool name or web address written into the image.
    fig.savefig(buf, format="png", dpi=_DPI, bbox_inches="tight", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _no_data(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#666")
    ax.set_xticks([])
    ax.set_yticks([])


def speedup_histogram(rows: Sequence[Row]) -> Plot:
    """Distribution of the correct rows' speedups vs eager and vs the best baseline (log x)."""
    fig = Figure(figsize=(7.5, 3.6))
    ax = fig.add_subplot()
    series = {
        "vs eager": ok_speedups(rows, "eager"),
        "vs best baseline": ok_speedups(rows, "best"),
    }
    values = [v for vs in series.values() for v in vs]
    if not values:
        _no_data(ax, "no data: no correct candidate has a speedup")
        ax.set_title("Speedup distribution")
        return Plot(_png_data_uri(fig), 0)
    lo, hi = min(values), max(values)
    lo, hi = min(lo, 1.0) / 1.25, max(hi, 1.0) * 1.25  # always show the 1x line with a margin
    n_bins = int(min(40, max(10, 2 * math.sqrt(len(values)))))
    bins = np.geomspace(lo, hi, n_bins + 1)
    for (label, vs), colour in zip(series.items(), ("#1565c0", "#ef6c00")):
        if vs:
            ax.hist(vs, bins=bins, histtype="step", linewidth=2, color=colour, label=f"{label} (n={len(vs)})")
    ax.axvline(1.0, color="#444", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}x"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("speedup (x, log scale; > 1 is faster than the baseline)")
    ax.set_ylabel("candidates")
    ax.set_title("Speedup distribution (correct candidates)")
    ax.legend(frameon=False)
    return Plot(_png_data_uri(fig), len(values))


def _level_marker(levels: Sequence[int | None], level: int | None) -> str:
    return LEVEL_MARKERS[levels.index(level) % len(LEVEL_MARKERS)]


def sol_scatter(rows: Sequence[Row]) -> Plot:
    """Candidate time against fraction of the hardware's speed of light: colour by status, marker
    by level (when the rows have levels)."""
    fig = Figure(figsize=(7.5, 3.8))
    ax = fig.add_subplot()
    groups: dict[tuple[str, int | None], tuple[list[float], list[float]]] = {}
    for _p, level, _c, v in rows:
        if v.cand_ms is None or v.sol_fraction is None:
            continue
        x, y = float(v.cand_ms), float(v.sol_fraction)
        if not (math.isfinite(x) and math.isfinite(y)) or x <= 0:
            continue
        xs, ys = groups.setdefault((v.status.value, level), ([], []))
        xs.append(x)
        ys.append(y)
    ax.set_title("Speed of light: candidate time vs fraction of peak")
    if not groups:
        _no_data(ax, "no data: no candidate has both a time and a SOL fraction")
        return Plot(_png_data_uri(fig), 0)
    order = [s.value for s in Status]
    levels = sorted({level for _, level in groups}, key=lambda lv: (lv is None, lv or 0))
    by_level = len(levels) > 1 or levels != [None]
    counts: dict[str, int] = {}
    for (status, level), (xs, ys) in groups.items():
        counts[status] = counts.get(status, 0) + len(xs)
        ax.scatter(xs, ys, s=28, alpha=0.85, color=STATUS_COLOURS.get(status, "#000"),
                   marker=_level_marker(levels, level) if by_level else "o")
    handles = [Line2D([], [], linestyle="", marker="o", color=STATUS_COLOURS.get(status, "#000"),
                      label=f"{status} ({counts[status]})")
               for status in sorted(counts, key=lambda s: order.index(s) if s in order else len(order))]
    if by_level:
        handles += [Line2D([], [], linestyle="", marker=_level_marker(levels, level), color="#777",
                           label=f"level {fmt.level(level)}") for level in levels]
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.set_xlabel("candidate time (ms, log scale)")
    ax.set_ylabel("fraction of speed of light")
    top = max(max(ys) for _, ys in groups.values())
    ax.set_ylim(0, max(1.0, top * 1.05))
    ax.axhline(1.0, color="#444", linestyle=":", linewidth=1)
    ax.legend(handles=handles, frameon=False, fontsize="small")
    return Plot(_png_data_uri(fig), sum(len(xs) for xs, _ in groups.values()))


def _meta_value(value: Any) -> str:
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=jinja2.select_autoescape(["html", "j2"], default=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        rate=fmt.rate, speedup=fmt.speedup, speedup_interval=fmt.speedup_interval, ms=fmt.ms, p_label=fmt.p_label, level=fmt.level,
        seconds=fmt.seconds, speedup_range=fmt.speedup_range, count_rate=fmt.count_rate,
        truncate_text=fmt.truncate, meta_value=_meta_value, zip=lambda a, b: list(zip(a, b)),
    )
    return env


def _sort_key(value: float | None) -> str:
    """A numeric sort key for the table's inline sorter (missing values sort last)."""
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else repr(float(value))


def _candidate(anchors: Mapping[str, str], problem: str, level: int | None, candidate: str, v: Any) -> dict[str, Any]:
    speedups = [(fmt.against(v.speedup, name), _sort_key(v.speedup.ratio(name))) for name, _ in fmt.speedup_columns()]
    apart = labels.interpreted(v)
    note = labels.timeout_note(v)
    spread = v.timing.spread if v.timing is not None and v.cand_ms is not None else None
    sol = v.sol if isinstance(v.sol, Mapping) else {}
    return {
        "problem": problem,
        "anchor": anchors[problem],  # its comparison section
        "level": level,
        "candidate": candidate,
        "status": v.status.value,
        "flags": list(v.flags),
        "cand_ms": v.cand_ms,
        "cand_ms_key": _sort_key(v.cand_ms),
        "ref_ms": v.ref_ms,
        "ref_ms_key": _sort_key(v.ref_ms),
        "speedups": speedups,
        "eager": fmt.against(v.speedup, "eager"),
        "eager_key": _sort_key(v.speedup.ratio("eager")),
        "spread": spread,
        "spread_key": _sort_key(spread),
        "sol": v.sol_fraction,
        "sol_key": _sort_key(v.sol_fraction),
        "bound": sol.get("bound") or "",
        "ref_work": sol.get("compute_fraction_of_reference_work"),
        "ref_work_key": _sort_key(sol.get("compute_fraction_of_reference_work")),
        "sol_note": sol.get("note") or "",
        "seconds": v.seconds or None,
        "seconds_key": _sort_key(v.seconds or None),
        "error": f"{v.error or 'timeout'} ({note})" if note else v.error,
        # Timed under Triton's CPU interpreter: labelled in the row, out of the aggregates.
        "interpreted": apart and v.cand_ms is not None,
    }


def render_html(
    summary: Summary,
    rows: Sequence[Row],
    title: str = "Hercules bench",
    meta: Mapping[str, Any] | None = None,
) -> str:
    problems = comparisons(rows)
    anchors = {p.problem: p.anchor for p in problems}
    candidates = [_candidate(anchors, *row) for row in sort_rows(rows)]
    # Problems from a KernelBench layout carry a level: one section per level, as KernelBench
    # results are read. A run without levels (the built-in suite) has only the table of all.
    sections = [
        {"summary": lv, "candidates": [_candidate(anchors, *row) for row in rows_of_level(rows, lv.level)]}
        for lv in summary.levels
    ] if has_levels(rows) else []
    template = _environment().get_template("report.html.j2")
    return template.render(
        title=title,
        meta=dict(meta or {}),
        summary=summary,
        fast_rows=list(zip(summary.fast_eager, summary.fast_best)),
        candidates=candidates,
        level_sections=sections,
        problems=problems,
        speedup_headers=[label for _, label in fmt.speedup_columns()],
        speedup_plot=speedup_histogram(rows),
        sol_plot=sol_scatter(rows),
        status_colours=STATUS_COLOURS,
        labels=labels,
    )


def write_html(
    path: str | Path,
    summary: Summary,
    rows: Sequence[Row],
    title: str = "Hercules bench",
    meta: Mapping[str, Any] | None = None,
) -> Path:
    """Write the report to ``path`` (parent folders created) and return the path."""
    return write_text_atomic(path, render_html(summary, rows, title, meta))  # never half a report
