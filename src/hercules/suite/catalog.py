"""Where the built-in suite lives on disk.

Layout (KernelBench-compatible):

    suite/problems/<name>.py               class Model, get_inputs(), get_init_inputs(), HERCULES = {...}
    suite/candidates/<name>/<impl>.py      class ModelNew (same constructor signature as Model)

Candidate file names start with the implementation language: ``torch_*``, ``triton_*`` or
``cuda_*`` (``candidate_language`` reads it).
"""

from __future__ import annotations

from pathlib import Path

LANGUAGES = ("torch", "triton", "cuda")


def suite_dir() -> Path:
    """The folder holding ``problems/`` and ``candidates/``."""
    return Path(__file__).resolve().parent


def suite_problem_paths() -> list[Path]:
    """Every built-in problem file, sorted by name."""
    return sorted(p for p in (suite_dir() / "problems").glob("*.py") if not p.name.startswith("_"))


def suite_problem_names() -> list[str]:
    return [p.stem for p in suite_problem_paths()]


def suite_candidate_paths(problem_name: str) -> list[Path]:
    """The candidate files written for one problem, sorted; empty if there are none."""
    folder = suite_dir() / "candidates" / problem_name
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))


def candidate_language(path: Path) -> str:
    """``torch``, ``triton`` or ``cuda``, from the candidate file's name prefix."""
    prefix = Path(path).stem.split("_", 1)[0]
    if prefix not in LANGUAGES:
        raise ValueError(f"{path}: candidate file names start with one of {LANGUAGES}")
    return prefix
