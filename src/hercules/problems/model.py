"""The Problem and Candidate records, and the metadata a problem file may declare.

A problem is a KernelBench-format Python source: ``class Model(nn.Module)``, ``get_inputs()``,
``get_init_inputs()``. It may also declare a module-level literal dict ``HERCULES`` with any of:

    HERCULES = {
        "level": 1,                 # KernelBench-style level (1 single op, 2 fused, 3 model block)
        "tier": "single_op",        # free-form grouping for reports
        "dtype": "bfloat16",        # the harness casts floating parameters of both models to it
        "atol": 1e-2, "rtol": 1e-2, # elementwise tolerance (defaults per dtype)
        "rel_tol": 1e-2,            # bound on ||out - ref|| / ||ref||
        "inputs_per_timing": 4,     # input sets rotated during timing (default: enough to exceed L2)
    }

Metadata is read with ``ast.literal_eval``: listing problems never executes their code.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field
from typing import Any

from hercules import pyparse

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")


class ProblemFormatError(ValueError):
    """The source cannot be used as a problem (missing ``Model`` or an input factory)."""


def code_hash(code: str) -> str:
    """The short content hash that names a source (problems, candidates, variants, attempts)."""
    return hashlib.sha256(code.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Problem:
    name: str
    code: str
    source: str  # where it came from: a path, "dataset:<path>#<split>/<row>", "cuda-l1:<file>#<line>"
    level: int | None = None
    problem_id: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def content_hash(self) -> str:
        return code_hash(self.code)

    @property
    def dtype_name(self) -> str:
        return str(self.metadata.get("dtype", "float32"))


@dataclass(frozen=True)
class Candidate:
    name: str
    code: str
    source: str
    problem: str = ""  # name of the problem it targets, where known
    score: dict[str, Any] = field(default_factory=dict)  # published figures (e.g. CUDA-L1 score_*)

    @property
    def content_hash(self) -> str:
        return code_hash(self.code)


def top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def read_metadata(tree: ast.Module) -> dict[str, Any]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "HERCULES" for t in node.targets
        ):
            try:
                value = ast.literal_eval(node.value)
            except ValueError as exc:
                raise ProblemFormatError(f"HERCULES metadata must be a literal dict: {exc}") from exc
            if not isinstance(value, dict):
                raise ProblemFormatError("HERCULES metadata must be a dict")
            if "expert" in value:
                from hercules.experts.registry import OPS

                if value["expert"] not in OPS:
                    raise ProblemFormatError(f"HERCULES expert {value['expert']!r} is no known operation "
                                             f"(known: {', '.join(sorted(OPS))})")
            return value
    return {}


def validate_problem_code(code: str, where: str) -> dict[str, Any]:
    """Check the KernelBench interface without running the code; return its metadata."""
    try:
        tree = pyparse.parse(code)
    except SyntaxError as exc:
        raise ProblemFormatError(f"{where}: not valid Python ({exc.msg}, line {exc.lineno})") from exc
    missing = [n for n in REQUIRED_NAMES if n not in top_level_names(tree)]
    if missing:
        raise ProblemFormatError(f"{where}: not a KernelBench problem (missing {', '.join(missing)})")
    return read_metadata(tree)

