"""A verdict for people: one table on the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from hercules.harness.records import Status, Verdict
from hercules.report import formatting as fmt

STYLE = {Status.OK: "green", Status.SUSPICIOUS: "yellow", Status.SKIPPED: "dim"}


def print_verdict(console: Console, v: Verdict) -> None:
    table = Table(show_header=False, title=f"{v.problem} / {v.candidate} on {v.device}")
    table.add_row("status", f"[{STYLE.get(v.status, 'red')}]{v.status.value}[/]")
    table.add_row("flags", ", ".join(v.flags) or "-")
    if v.error:
        table.add_row("error", fmt.truncate(v.error, 400))
    table.add_row("errors", f"max abs {v.max_abs_err if v.max_abs_err is not None else '-'}, "
                            f"relative {v.rel_err if v.rel_err is not None else '-'}")
    if v.timing:
        table.add_row("candidate", f"{fmt.ms(v.timing.median_ms)} ms median (IQR {v.timing.iqr_ms:.4f} ms, "
                                   f"{v.timing.reps} reps, {v.timing.method}; wall {fmt.ms(v.timing.wall_ms)} ms)")
    for name, value in v.baselines_ms.items():
        table.add_row(name, f"{fmt.ms(value)} ms, speedup {fmt.speedup(getattr(v.speedup, name, None))}")
    table.add_row("best baseline", f"speedup {fmt.speedup(v.speedup.best)}")
    if v.sol:
        table.add_row("speed of light", f"{v.sol['bound']}-bound floor {fmt.ms(v.sol['floor_ms'])} ms, "
                                        f"fraction {v.sol_fraction:.3f}" if v.sol_fraction else "-")
    if v.build:
        table.add_row("build", f"{v.build.language}, {v.build.seconds:.1f} s" + (" (cached)" if v.build.cache_hit else ""))
    console.print(table)
