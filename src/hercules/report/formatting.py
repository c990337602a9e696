"""Number formatting shared by the markdown and HTML reports (one place, so both agree)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from hercules.harness.records import Speedups, speedup_names

MISSING = "n/a"

# Column labels shorter than a baseline's name; any other baseline is labelled by its name.
SHORT_LABELS = {"compile_reduce_overhead": "compile-ro"}


def speedup_columns() -> tuple[tuple[str, str], ...]:
    """(name, label) of every speedup a report shows: each baseline in ``harness.baselines``, then best."""
    return tuple((name, SHORT_LABELS.get(name, name)) for name in speedup_names())


def _usable(value: float | None) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def rate(value: float | None) -> str:
    """A fraction as a percentage: 0.375 -> '37.5%'."""
    return f"{100.0 * value:.1f}%" if _usable(value) else MISSING


def speedup(value: float | None) -> str:
    """A speedup as a multiplier: 2.0 -> '2.00x'."""
    return f"{value:.2f}x" if _usable(value) else MISSING


TIE = "tie"


def speedup_interval(value: float | None, interval: Sequence[float] | None) -> str:
    """A speedup with its 95% interval where measured: '1.32x [1.20-1.45]'; an interval that holds
    1.0 is a difference inside the noise, marked a tie: '1.02x [0.98-1.05] tie'. Else as ``speedup``."""
    if not _usable(value) or not interval or not all(_usable(x) for x in interval):
        return speedup(value)
    low, high = interval
    return f"{value:.2f}x [{low:.2f}-{high:.2f}]" + (f" {TIE}" if low <= 1.0 <= high else "")


def against(speedups: Speedups, name: str) -> str:
    """The speedup against one baseline (or best), with its interval where measured."""
    return speedup_interval(speedups.ratio(name), speedups.interval(name))


def speedup_cells(speedups: Speedups) -> list[str]:
    """Every speedup a report shows, in ``speedup_columns`` order, each with its interval."""
    return [against(speedups, name) for name, _ in speedup_columns()]


def ms(value: float | None) -> str:
    """Milliseconds with enough digits for microsecond kernels."""
    if not _usable(value):
        return MISSING
    if value >= 100:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.3f}"
    return f"{value:.4f}"


def p_label(p: float) -> str:
    """fast_p's name: 0.0 -> 'fast_0', 1.5 -> 'fast_1.5'."""
    return f"fast_{p:g}"


def level(value: int | None) -> str:
    return "none" if value is None else str(value)


def flags(values: tuple[str, ...]) -> str:
    return ", ".join(values)


def truncate(text: str | None, limit: int = 160) -> str:
    if not text:
        return ""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def seconds(value: float | None) -> str:
    """Wall seconds: 0.84 -> '0.84 s', 73.2 -> '73.2 s'."""
    if not _usable(value):
        return MISSING
    return f"{value:.2f} s" if value < 10 else f"{value:.1f} s"


def speedup_range(low: float | None, high: float | None) -> str:
    """An interquartile range of speedups: '1.20x-2.40x'."""
    if not (_usable(low) and _usable(high)):
        return MISSING
    return f"{speedup(low)}-{speedup(high)}"


def count_rate(count: int, total: int, value: float | None) -> str:
    """'5 of 8 (62.5%)'; 'n/a' when there is nothing to count over."""
    return f"{count} of {total} ({rate(value)})" if total else MISSING


def expert_label(expert: dict | None) -> str:
    """The expert a verdict was timed against: implementation and library version, or MISSING."""
    chosen = (expert or {}).get("chosen")
    if not chosen:
        return MISSING
    version = f" {chosen['version']}" if chosen.get("version") else ""
    return f"{chosen['name']} ({chosen['distribution']}{version})"


def size(n: int | None) -> str:
    """Bytes in decimal units: 6_400_000_000 -> '6.4 GB', 4096 -> '4.1 kB'."""
    if n is None:
        return MISSING
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def flops(n: int | None) -> str:
    """A FLOP count: 8.6e9 -> '8.6 GFLOP'; 0 -> '0' (no counted matmul, convolution or attention)."""
    if n is None:
        return MISSING
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return str(n)
