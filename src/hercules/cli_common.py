"""What every command line of Hercules shares: the one-line error exit and evaluation options."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

if TYPE_CHECKING:
    from hercules.harness.evaluate import EvalOptions


def fail(message: str) -> NoReturn:
    """One line on stderr, exit status 2: the inputs cannot be used."""
    click.echo(f"hercules: error: {message}", err=True)
    sys.exit(2)


def baseline_list(text: str | None) -> tuple[str, ...] | None:
    """``--baselines eager,compile`` as a tuple; None (every baseline the device supports) when
    empty; a one-line error for a name that is not a baseline."""
    from hercules.harness.baselines import known_baselines

    names = tuple(b.strip() for b in text.split(",") if b.strip()) if text else ()
    try:
        return known_baselines(names) or None
    except ValueError as exc:
        fail(f"--baselines: {exc}")


def eval_options(device: str, trials: int, budget: float, baselines: str | None, no_timing: bool = False,
                 cache_dir: str | None = None, tolerance: str = "strict") -> EvalOptions:
    """The evaluation core's options from the usual flags (exits with a one-line error on bad ones)."""
    from hercules.harness.evaluate import EvalOptions

    if trials < 1:
        fail("--trials must be at least 1")
    if budget <= 0:
        fail("--budget must be a positive number of seconds")
    options = EvalOptions(device=device, trials=trials, timing_budget_s=budget, time_candidate=not no_timing,
                          baselines=baseline_list(baselines), tolerance=tolerance)
    return replace(options, cache_dir=Path(cache_dir)) if cache_dir else options
