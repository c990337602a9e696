"""A problem given in a request: a built-in suite name, or KernelBench source code."""

from __future__ import annotations

import functools
import hashlib
from typing import Any

from hercules.problems.model import Problem, ProblemFormatError, validate_problem_code


class BadRequest(ValueError):
    """The request cannot be used (answered with HTTP 400 and a one-line message)."""


@functools.lru_cache(maxsize=64)
def suite_problem(name: str) -> Problem:
    from hercules.problems.loaders import load_source
    from hercules.suite.catalog import suite_dir, suite_problem_names

    if name not in suite_problem_names():
        raise BadRequest(f"unknown built-in problem {name!r} (known: {', '.join(suite_problem_names())})")
    return load_source(suite_dir() / "problems" / f"{name}.py").problems[0]


@functools.lru_cache(maxsize=256)
def problem_from_code(code: str, name: str | None = None) -> Problem:
    """Validated without executing it (the reference worker executes it, in its own process)."""
    try:
        metadata = validate_problem_code(code, name or "problem")
    except ProblemFormatError as exc:
        raise BadRequest(str(exc)) from None
    digest = hashlib.sha256(code.encode()).hexdigest()[:12]
    return Problem(name=name or f"problem_{digest}", code=code, source="request", metadata=metadata)


def resolve_problem(spec: Any) -> Problem:
    """``"softmax_rows_fp32"``, ``{"name": ...}``, ``{"code": ..., "name": optional}``, or source text."""
    if isinstance(spec, str):
        if "\n" in spec or "class Model" in spec:
            return problem_from_code(spec)
        return suite_problem(spec)
    if isinstance(spec, dict):
        if isinstance(spec.get("code"), str):
            name = spec.get("name")
            return problem_from_code(spec["code"], str(name) if name else None)
        if isinstance(spec.get("name"), str):
            return suite_problem(spec["name"])
    raise BadRequest("problem must be a built-in name, source code, or an object with 'code' (and 'name')")
