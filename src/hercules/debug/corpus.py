"""CUDABeaver-layout corpus: load, validate and filter instances.

An instance folder holds ``input.json`` (``build_command``, ``test_command``, ``solution_file``),
``instance.json`` (``task_family``, ``error_category``, ``difficulty``, ``files``), the broken
start, an optional reference, ``prompt.txt`` and ``testbench/``. A malformed instance becomes a
``CorpusProblem`` (one line saying what is wrong) and the rest load on.

How an instance is run is decided from its layout, never from its name or label:
``kernelbench`` when the testbench holds a KernelBench ``problem.py`` and the solution is Python
(run on the evaluation core), ``defpy`` when the testbench holds a ``def.py`` task description
and no test command (run by ``defpy_driver``), ``native`` otherwise (the instance's own commands).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

CATEGORIES = ("compile_error", "logic_error", "memory_crash", "perf_broken", "timeout")
REQUIRED_INPUT_KEYS = ("build_command", "test_command", "solution_file")
DEFAULT_CORPUS_CANDIDATES = ("corpora/cudabeaver", "shared/corpora/cudabeaver", "../shared/corpora/cudabeaver")


class CorpusError(ValueError):
    """The corpus folder itself cannot be used (missing, empty)."""


@dataclass(frozen=True)
class Instance:
    task_id: str
    path: Path
    family: str
    category: str  # the corpus label (instance.json error_category); never used to classify
    difficulty: str
    build_command: str
    test_command: str
    solution_file: str  # relative to the testbench
    broken_file: Path
    reference_file: Path | None
    prompt: str
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def testbench(self) -> Path:
        return self.path / "testbench"

    @property
    def kind(self) -> str:
        if (self.testbench / "problem.py").is_file() and self.solution_file.endswith(".py"):
            return "kernelbench"
        if (self.testbench / "def.py").is_file() and not self.test_command.strip():
            return "defpy"
        return "native"

    def broken_code(self) -> str:
        return self.broken_file.read_text(encoding="utf-8", errors="replace")

    def reference_code(self) -> str | None:
        if self.reference_file is None:
            return None
        return self.reference_file.read_text(encoding="utf-8", errors="replace")


@dataclass(frozen=True)
class CorpusProblem:
    path: Path
    message: str


@dataclass(frozen=True)
class CorpusLoad:
    root: Path
    instances: tuple[Instance, ...]
    problems: tuple[CorpusProblem, ...]
    # Each filter's values over every well-formed instance, selected or not (family, category,
    # difficulty, task_id): a filter value outside them names nothing in the corpus.
    known: dict[str, frozenset[str]] = field(default_factory=dict)


def default_corpus_dir() -> Path | None:
    """The vendored copy (repo root), else ``shared/`` beside or above it; ``HERCULES_DEBUG_CORPUS`` wins."""
    env = os.environ.get("HERCULES_DEBUG_CORPUS")
    if env:
        return Path(env)
    bases = [Path.cwd(), Path(__file__).resolve().parents[3]]
    for base in bases:
        for rel in DEFAULT_CORPUS_CANDIDATES:
            if (base / rel).is_dir():
                return (base / rel).resolve()
    return None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"missing {path.name}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path.name} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise TypeError(f"{path.name} is not a JSON object")
    return data


def _inside(folder: Path, rel: str, what: str) -> Path:
    pure = PurePosixPath(rel)
    if not rel or pure.is_absolute() or ".." in pure.parts:
        raise ValueError(f"{what} {rel!r} must be a relative path inside the instance")
    return folder / pure


def _find_file(folder: Path, declared: str | None, stem: str) -> Path | None:
    if declared:
        path = _inside(folder, declared, stem)
        return path if path.is_file() else None
    matches = sorted(folder.glob(f"{stem}.*"))
    return matches[0] if matches else None


def load_instance(folder: Path) -> Instance:
    """One instance; ValueError (TypeError for a non-object JSON) with a one-line reason when malformed."""
    meta = _read_json(folder / "input.json")
    info = _read_json(folder / "instance.json")
    missing = [k for k in REQUIRED_INPUT_KEYS if not isinstance(meta.get(k), str)]
    if missing:
        raise ValueError(f"input.json lacks {', '.join(missing)}")
    category = info.get("error_category")
    if category not in CATEGORIES:
        raise ValueError(f"instance.json error_category {category!r} is not one of {', '.join(CATEGORIES)}")
    files = info.get("files") if isinstance(info.get("files"), dict) else {}
    broken = _find_file(folder, files.get("broken_start"), "broken_start")
    if broken is None:
        raise ValueError("no broken_start file")
    if not (folder / "testbench").is_dir():
        raise ValueError("no testbench/ folder")
    _inside(folder / "testbench", meta["solution_file"], "solution_file")
    prompt_path = _find_file(folder, files.get("prompt"), "prompt")
    return Instance(
        task_id=str(info.get("id") or meta.get("task_id") or folder.name),
        path=folder,
        family=str(info.get("task_family") or "unknown"),
        category=category,
        difficulty=str(info.get("difficulty") or meta.get("difficulty") or "unknown"),
        build_command=meta["build_command"],
        test_command=meta["test_command"],
        solution_file=meta["solution_file"],
        broken_file=broken,
        reference_file=_find_file(folder, files.get("reference"), "reference"),
        prompt=prompt_path.read_text(encoding="utf-8", errors="replace") if prompt_path else "",
        meta=meta,
    )


def _matches(value: str, wanted: tuple[str, ...]) -> bool:
    return not wanted or value in wanted


def load_corpus(root: Path, *, families: tuple[str, ...] = (), categories: tuple[str, ...] = (),
                difficulties: tuple[str, ...] = (), task_ids: tuple[str, ...] = ()) -> CorpusLoad:
    """Every instance folder under ``root`` (a folder holding ``input.json``), filtered."""
    root = Path(root)
    if not root.is_dir():
        raise CorpusError(f"corpus folder {root} does not exist")
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
    if not folders:
        raise CorpusError(f"corpus folder {root} holds no instance folders")
    instances: list[Instance] = []
    problems: list[CorpusProblem] = []
    known: dict[str, set[str]] = {"family": set(), "category": set(), "difficulty": set(), "task_id": set()}
    for folder in folders:
        try:
            inst = load_instance(folder)
        except (ValueError, TypeError, OSError) as exc:
            problems.append(CorpusProblem(folder, str(exc)))
            continue
        for name, values in known.items():
            values.add(getattr(inst, name))
        if (_matches(inst.family, families) and _matches(inst.category, categories)
                and _matches(inst.difficulty, difficulties) and _matches(inst.task_id, task_ids)):
            instances.append(inst)
    return CorpusLoad(root=root, instances=tuple(instances), problems=tuple(problems),
                      known={name: frozenset(values) for name, values in known.items()})


def reference_timing(instance: Instance) -> dict[str, Any] | None:
    """The authors' measured reference timing (``_reference_timings/<gpu>/<task>.json``), if any."""
    timings = instance.path.parent / "_reference_timings"
    if not timings.is_dir():
        return None
    for gpu in sorted(timings.iterdir()):
        path = gpu / f"{instance.task_id}.json"
        if path.is_file():
            try:
                data = json.loads(path.read_text())
            except json.JSONDecodeError:
                return None
            data.setdefault("gpu_signature", gpu.name)
            return data
    return None
