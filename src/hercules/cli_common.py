"""What every command line of Hercules shares: the one-line error exit, the evaluation option group
(``eval``, ``bench``, ``optimize``, ``serve`` and ``debug`` take the same flags from one place, so a
new evaluation option is added here once), and reading the user's files with a one-line refusal."""

from __future__ import annotations

import functools
import math
import re
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from hercules.harness.baselines import BASELINES

if TYPE_CHECKING:
    from hercules.harness.evaluate import EvalOptions

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str) -> NoReturn:
    """One line on stderr, exit status 2: the inputs cannot be used."""
    click.echo(f"hercules: error: {' '.join(str(message).split())}", err=True)
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


_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")


def check_device(device: str, flag: str = "--device") -> str:
    """``device`` when this machine has it: a one-line refusal for a malformed name or a GPU that is
    not here (instead of torch's assertion deep inside the first evaluation)."""
    if not _DEVICE.fullmatch(device):
        fail(f"{flag} {device!r}: use auto, cpu, cuda or cuda:N")
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            fail(f"{flag} {device}: no CUDA device on this machine (torch {torch.__version__}); use --device cpu "
                 "or auto")
        index = int(device.split(":")[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            fail(f"{flag} {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device


def check_base_url(given: str | None, flag: str = "--base-url") -> None:
    """An OpenAI-compatible server's URL (given, or HERCULES_LLM_BASE_URL) that the client can
    call: anything else would end the first model call, minutes into a run, in urllib's traceback."""
    import os
    from urllib.parse import urlsplit

    url = given or os.environ.get("HERCULES_LLM_BASE_URL")
    parts = urlsplit(url) if url else None
    if parts and (parts.scheme not in ("http", "https") or not parts.netloc):
        source = flag if given else "HERCULES_LLM_BASE_URL"
        fail(f"{source} {url!r}: not an http(s) URL (e.g. http://127.0.0.1:8000/v1)")


def writable_folder(path: str | Path, flag: str) -> Path:
    """A folder that exists or can be made (a one-line refusal for a file in the way)."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        fail(f"{flag} {path}: is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"{flag} {path}: cannot create the folder ({exc.strerror})")
    return folder


def output_console(stderr: bool = False, piped_width: int = 4096):
    """A rich console for a command's tables: the terminal's width on a terminal; piped or
    redirected, wide enough for the whole table (rich cuts at 80 columns off a terminal, folding
    every cell of a ``hercules ... | cat`` or a log into unreadable slivers)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else piped_width)


def read_source(path: str | Path, what: str) -> str:
    """A user's Python source file as text: one line for a missing file, a folder, or a file that is
    not UTF-8 text (a binary)."""
    file = Path(path)
    if file.is_dir():
        fail(f"{path}: is a folder; give the {what} file")
    if not file.is_file():
        fail(f"{path}: no such {what} file")
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        fail(f"{path}: not a {what} source file (not UTF-8 text: {exc.reason} at byte {exc.start})")
    except OSError as exc:
        fail(f"{path}: cannot read the {what} file ({exc.strerror})")


def eval_options(device: str = "auto", trials: int = 5, budget: float = 0.3, baselines: str | None = None,
                 no_timing: bool = False, cache_dir: str | None = None, tolerance: str = "strict",
                 check_present: bool = True) -> EvalOptions:
    """The evaluation core's options from the group's flags (exits with a one-line error on bad
    ones). ``check_present=False`` leaves the device to be found elsewhere (a Ray cluster's)."""
    from hercules.harness.evaluate import EvalOptions

    if check_present:
        check_device(device)
    elif not _DEVICE.fullmatch(device):
        fail(f"--device {device!r}: use auto, cpu, cuda or cuda:N")
    if trials < 1:
        fail("--trials must be at least 1")
    if not (budget > 0 and math.isfinite(budget)):  # inf would time one call forever
        fail("--budget must be a positive, finite number of seconds")
    options = EvalOptions(device=device, trials=trials, timing_budget_s=budget, time_candidate=not no_timing,
                          baselines=baseline_list(baselines), tolerance=tolerance)
    return replace(options, cache_dir=writable_folder(cache_dir, "--cache-dir")) if cache_dir else options


# The group, in the order --help lists it. Each entry: the parameter's name and its click option.
EVALUATION_FLAGS: tuple[tuple[str, Callable[[F], F]], ...] = (
    ("device", click.option("--device", default="auto", show_default=True, metavar="auto|cpu|cuda|cuda:N",
                            help="Where evaluations run; auto picks cuda when a GPU is present.")),
    ("trials", click.option("--trials", type=int, default=5, show_default=True,
                            help="Correctness trials on fresh inputs per evaluation.")),
    ("budget", click.option("--budget", type=float, default=0.3, show_default=True,
                            help="Seconds of timed repetitions per measurement.")),
    ("baselines", click.option("--baselines", default=None, metavar="NAMES",
                               help=f"Comma list of {','.join(BASELINES)} "
                                    "(default: all the device supports; expert where the problem names its "
                                    "operation; serve on a CPU: eager).")),
    ("no_timing", click.option("--no-timing", is_flag=True, help="Check correctness only.")),
    ("cache_dir", click.option("--cache-dir", default=None, metavar="DIR",
                               help="Build and baseline cache (default $HERCULES_CACHE_DIR or ~/.cache/hercules).")),
    ("tolerance", click.option(
        "--tolerance", type=click.Choice(["strict", "kernelbench"]), default="strict", show_default=True,
        help="strict: Hercules' per-dtype tolerances against a float64 truth, precision below the problem's dtype "
             "flagged; kernelbench: upstream KernelBench's allclose at atol = rtol = 1e-2 against the problem's "
             "own-dtype output decides, to reproduce published results (every verdict reports both).")),
)


def evaluation_options(*, exclude: tuple[str, ...] = (), check_present: bool | str = True) -> Callable[[F], F]:
    """Add the evaluation option group to a command; the command receives one ``evaluation:
    EvalOptions`` instead of the separate flags, validated with one-line refusals.

    ``exclude`` names flags a command cannot honour (say why where it is used): any flag added to
    the group reaches every other command. ``check_present``: a parameter name (``ray_address``)
    whose value, when given, means the device is elsewhere and is not looked for here."""
    names = tuple(name for name, _ in EVALUATION_FLAGS if name not in exclude)
    unknown = set(exclude) - {name for name, _ in EVALUATION_FLAGS}
    if unknown:
        raise ValueError(f"not evaluation flags: {', '.join(sorted(unknown))}")

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def with_evaluation(*args: Any, **kwargs: Any) -> Any:
            values = {name: kwargs.pop(name) for name in names}
            present = check_present if isinstance(check_present, bool) else not kwargs.get(check_present)
            kwargs["evaluation"] = eval_options(**values, check_present=present)
            return command(*args, **kwargs)

        for name, option in reversed(EVALUATION_FLAGS):
            if name in names:
                with_evaluation = option(with_evaluation)
        return with_evaluation  # type: ignore[return-value]

    return decorate
