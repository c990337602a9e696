"""Many ``hercules`` command lines run one after another in ONE fresh Python process.

A ``python -m hercules.cli eval`` subprocess spends ~2-2.5 s on the 2-core CI machine starting and
importing torch and Hercules before its evaluation (~6.5 s); the adversarial corpus and the red team
ran 50 of them. Here each command line still goes through ``hercules.cli.main`` as the installed
command does (standalone mode: its exit status comes from ``sys.exit``), with file descriptors 1
and 2 pointed at files of its own for its duration, so what a command writes to stdout is checked
at the descriptor level, as a pipe from a subprocess would be. The evaluations run in sequence
(nothing times beside them); only the start-up is shared. Commands that attack the process that
runs them (killing it, forging its output from a process left behind) keep a process of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_DRIVER = r"""
import json, os, sys, time
from hercules.cli import main

with open(sys.argv[1]) as f:
    runs = json.load(f)
for run in runs:
    started = time.monotonic()
    os.chdir(run["cwd"])
    os.environ.clear()
    os.environ.update(run["env"])
    sys.stdout.flush(); sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(run["stdout"], "wb") as out, open(run["stderr"], "wb") as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            main(run["argv"], prog_name="hercules")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException as exc:  # what would end a real process with a traceback
            import traceback
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os.dup2(saved[0], 1); os.dup2(saved[1], 2)
            os.close(saved[0]); os.close(saved[1])
    with open(run["status"], "w") as f:
        f.write(f"{code} {time.monotonic() - started}")
"""


@dataclass(frozen=True)
class Run:
    """One command line: its arguments after ``hercules``, working directory and the environment's
    changes (a None value removes the variable)."""

    argv: tuple[str, ...]
    cwd: Path
    env: dict[str, str | None]


@dataclass(frozen=True)
class Result:
    returncode: int | None  # None: the driver ended before this command did
    stdout: str
    stderr: str
    seconds: float  # the command's own wall time (its process's start-up excluded)


@dataclass(frozen=True)
class Batch:
    results: dict[str, Result]
    # What the driver process itself wrote outside every run (its imports of torch and Hercules):
    # a warning printed there would have been on each command's own stderr in a process of its own.
    stdout: str
    stderr: str


def run_all(runs: dict[str, Run], folder: Path, timeout: float) -> dict[str, Result]:
    """Every run, in order, in one ``python`` process (PYTHONPATH=src, as the subprocesses had)."""
    return run_batch(runs, folder, timeout).results


def run_batch(runs: dict[str, Run], folder: Path, timeout: float) -> Batch:
    """``run_all``'s results, with what the driver wrote outside the runs."""
    folder.mkdir(parents=True, exist_ok=True)
    specs = []
    for i, (key, run) in enumerate(runs.items()):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
        for name, value in run.env.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        specs.append(dict(key=key, argv=list(run.argv), cwd=str(run.cwd), env=env, stdout=str(folder / f"{i}.out"),
                          stderr=str(folder / f"{i}.err"), status=str(folder / f"{i}.status")))
    env = dict(os.environ)
    env["PYTHONPATH"] = specs[0]["env"]["PYTHONPATH"] if specs else env.get("PYTHONPATH", "")
    # The runs in a file, not an argument: each carries its whole environment, and past ~80 runs
    # on a CI host the one argument outgrew Linux's 128 KiB (E2BIG: "Argument list too long").
    listing = folder / "runs.json"
    listing.write_text(json.dumps(specs))
    proc = subprocess.run([sys.executable, "-c", _DRIVER, str(listing)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    results = {}
    for spec in specs:
        status = Path(spec["status"])
        read = lambda p: Path(p).read_text(errors="replace") if Path(p).exists() else ""  # noqa: E731
        code, seconds = status.read_text().split() if status.exists() else (None, "nan")
        stderr = read(spec["stderr"])
        if code is None:
            stderr += f"\n--- the driver ended first (exit {proc.returncode}) ---\n{proc.stderr[-3000:]}"
        results[spec["key"]] = Result(None if code is None else int(code), read(spec["stdout"]), stderr, float(seconds))
    return Batch(results, proc.stdout, proc.stderr)
