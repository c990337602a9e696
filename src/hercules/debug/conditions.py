"""What decides an attempt's outcome besides the file and the instance: the conditions of a run.

A recorded run (the reproduction's run of the broken file or of the reference) can stand for an
attempt only if everything that shapes the outcome was the same. The file is compared by its hash
and the instance by ``reproduce.instance_hash`` (every file of the instance folder: commands,
testbench, files); this record holds the rest:

    rules            the reproduction's judging rules version
    toolchain        nvcc release, g++, CUDA folder, target architecture
    device           the GPU (name, driver) or "cpu: no GPU"
    runtime          the Python and torch versions (KernelBench evaluations, def.py drivers, kbbuild)
    libraries        the CUDA library wheels whose headers and libraries the builds see
    code             a hash of the source files that run and classify an attempt of this kind
                     (a classifier or evaluation-core change makes a new outcome)
    build/test timeouts and the core's timing budget: a timeout or a timing depends on them

Performance-gate thresholds (the protocol's p, the p-sweep) are not here: they are applied to
the outcome afterwards, the same way for a recorded outcome and a new one.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from hercules.debug.attempt import RunOptions
from hercules.debug.toolchain import Toolchain, toolchain_identity

_PACKAGE = Path(__file__).resolve().parents[1]  # src/hercules
# The source files each kind of attempt runs through (attempt.RUNNERS and what they call).
_COMMON = ("debug/attempt.py", "debug/classifier.py", "debug/workspace.py", "debug/toolchain.py",
           "debug/corpus.py", "debug/gate.py", "debug/region_timer.py", "debug/nvtx_region_timer.c")
_CODE = {
    "native": _COMMON,
    "defpy": (*_COMMON, "debug/defpy_driver.py"),
    # the evaluation core and what it imports, and the compile-only check used without a GPU
    "kernelbench": (*_COMMON, "debug/core_verdict.py", "debug/kbbuild.py", "harness", "problems", "experts",
                    "fileio.py", "store.py"),
}


@functools.lru_cache(maxsize=8)
def code_fingerprint(kind: str) -> str:
    """sha256 (short) over the source files that make an attempt's outcome for ``kind``."""
    h = hashlib.sha256()
    for rel in _CODE[kind]:
        path = _PACKAGE / rel
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for f in files:
            h.update(f.relative_to(_PACKAGE).as_posix().encode() + b"\0")
            h.update(f.read_bytes() if f.is_file() else b"absent")
            h.update(b"\0")
    return h.hexdigest()[:16]


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _wheel_libraries(tc: Toolchain) -> tuple[str, ...]:
    """Names of the CUDA library wheels the toolchain adds to the include path (``nvidia/<name>``),
    without their install location (which differs between machines holding the same wheels)."""
    cpath = dict(tc.env).get("CPATH", "")
    return tuple(sorted({Path(p).parent.name for p in cpath.split(os.pathsep) if p and Path(p).name == "include"}))


@dataclass(frozen=True)
class Conditions:
    rules: int
    toolchain: str
    device: str
    runtime: str
    libraries: tuple[str, ...]
    code: str
    build_timeout_s: float
    test_timeout_s: float
    timing_budget_s: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"libraries": list(self.libraries)}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Conditions | None:
        if not data or {f.name for f in fields(cls)} - set(data):
            return None  # recorded before conditions were kept, or by another version: unknown
        return cls(**{f.name: data[f.name] for f in fields(cls)} | {"libraries": tuple(data["libraries"])})

    def differences(self, other: Conditions) -> list[str]:
        """What differs from ``other``, one 'name: this vs other' per field."""
        return [f"{f.name}: {getattr(self, f.name)!r} vs {getattr(other, f.name)!r}"
                for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]


def run_conditions(tc: Toolchain, opts: RunOptions, kind: str, rules: int) -> Conditions:
    identity, device, _ = toolchain_identity(tc)
    runtime = f"python {sys.version.split()[0]}; torch {_version('torch')}"
    return Conditions(rules=rules, toolchain=identity, device=device, runtime=runtime, libraries=_wheel_libraries(tc),
                      code=code_fingerprint(kind), build_timeout_s=float(opts.build_timeout_s),
                      test_timeout_s=float(opts.test_timeout_s), timing_budget_s=float(opts.timing_budget_s))
