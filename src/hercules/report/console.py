"""A verdict for people: one table on the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from hercules.harness.records import Status, Verdict
from hercules.report import formatting as fmt
from hercules.report import labels

STYLE = {Status.OK: "green", Status.SUSPICIOUS: "yellow", Status.SKIPPED: "dim"}


def _check_line(v: Verdict) -> str:
    """Both correctness checks, named by what they are."""
    kernelbench = getattr(v.check, "correct_kernelbench", None) if v.check is not None else None
    kb = "n/a" if kernelbench is None else ("pass" if kernelbench else "fail")
    return (f"strict (float64 truth, per-dtype tolerance): {'pass' if v.correct else 'fail'}; "
            f"upstream KernelBench (allclose 1e-2): {kb}")


def print_verdict(console: Console, v: Verdict) -> None:
    table = Table(show_header=False, title=f"{v.problem} / {v.candidate} on {v.device}")
    table.add_row("status", f"[{STYLE.get(v.status, 'red')}]{v.status.value}[/]")
    table.add_row("flags", ", ".join(v.flags) or "-")
    if v.error:
        table.add_row("error", fmt.truncate(v.error, 400))
    if note := labels.timeout_note(v):
        table.add_row("why", note)
    if labels.errors_measured(v):
        table.add_row("errors", f"max abs {v.max_abs_err}, relative {v.rel_err if v.rel_err is not None else '-'}")
        table.add_row("checks", _check_line(v))
        table.add_row("", labels.CHECKS_DIFFER)
    elif labels.SHAPE_MISMATCH_WORD in v.flags:
        table.add_row("errors", "not measured: the outputs' shape or dtype differ from the reference's")
    interpreted = labels.interpreted(v)
    if v.timing:
        table.add_row("candidate", f"{fmt.ms(v.timing.median_ms)} ms median (IQR {v.timing.iqr_ms:.4f} ms, "
                                   f"{v.timing.reps} reps, {v.timing.method}; wall {fmt.ms(v.timing.wall_ms)} ms)"
                      + (f" [bold]{labels.INTERPRETED}[/]" if interpreted else ""))
        if interpreted:
            table.add_row("", labels.INTERPRETED_NOTE)
    for name, value in v.baselines_ms.items():
        # .get: a verdict file may name a baseline this version no longer has (its speedup not read).
        ratio = fmt.speedup_interval(v.speedup.ratios.get(name), v.speedup.intervals.get(name))
        table.add_row(name, f"{fmt.ms(value)} ms, speedup {ratio}"
                      + (f" ({labels.INTERPRETED})" if interpreted and v.timing else ""))
    table.add_row("best baseline", f"speedup {fmt.against(v.speedup, 'best')}"
                  + (f" ({labels.INTERPRETED})" if interpreted and v.timing else ""))
    if v.sol:
        table.add_row("speed of light", f"{v.sol['bound']}-bound floor {fmt.ms(v.sol['floor_ms'])} ms, "
                                        f"fraction {v.sol_fraction:.3f}" if v.sol_fraction else "-")
    if v.build:
        table.add_row("build", f"{v.build.language}, {v.build.seconds:.1f} s" + (" (cached)" if v.build.cache_hit else ""))
    console.print(table)
