"""Load problems (and published candidates) from wherever they live.

``load_source(SOURCE)`` detects what SOURCE is:

1. one problem ``.py`` file;
2. a folder of problem files (non-recursive; helper files without ``Model`` are skipped);
3. a KernelBench checkout: the repository root (``KernelBench/level1/...``), the ``KernelBench/``
   folder itself (``level1/ level2/ level3/ [level4/ ...]``), or a single ``levelN/`` folder.
   Files are ``<id>_<Name>.py`` (``1_Square_matrix_multiplication_.py``); the upstream loader
   (``src/kernelbench/dataset.py``) takes the id from the text before the first ``_``;
4. a Hugging Face dataset in the KernelBench layout (splits ``level_1``.., columns ``code``,
   ``level``, ``name``, ``problem_id``), either written by ``DatasetDict.save_to_disk`` or in the
   hub's file layout (``data/level_1-00000-of-00001.parquet``);
5. a CUDA-L1 release file (``optimized_cuda_code/<gpu>.json``): JSON Lines despite the suffix,
   one record per KernelBench task with ``level_id``, ``task_id``, ``ref_code``, ``custom_code``
   (``null`` where the RL found nothing faster), ``cuda_graph_code``, ``cudnn_code`` and
   ``score_*`` speedups (``null`` with a null ``custom_code``). The release's older, deprecated
   shape (one JSON object ``{"1": [{task_id, ref_code, custom_code}, ...], "2": ...}``) loads too.

Listing never executes problem code: every problem goes through ``validate_problem_code``.
Unusable input raises ``ProblemFormatError`` with a one-line message; a bad record inside a
collection is skipped and reported in ``LoadedSource.warnings``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hercules import pyparse
from hercules.problems import degenerate
from hercules.problems.model import (
    Candidate,
    Problem,
    ProblemFormatError,
    top_level_names,
    validate_problem_code,
)

DATASETS_HINT = "pip install 'hercules[datasets]'"

_LEVEL_DIR = re.compile(r"^level(\d+)$")
_LEVEL_SPLIT = re.compile(r"^level_?(\d+)$")
_ID_PREFIX = re.compile(r"^(\d+)_")
_DATA_SUFFIXES = (".parquet", ".arrow", ".jsonl", ".json", ".csv")


@dataclass(frozen=True)
class LoadedSource:
    problems: list[Problem]
    candidates: list[Candidate] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    kind: str = ""  # "file", "folder", "kernelbench", "dataset" or "cuda-l1"


def load_source(source: str | Path) -> LoadedSource:
    """Load every problem SOURCE holds; see the module docstring for the kinds of SOURCE."""
    path = Path(source).expanduser()
    if not path.exists():
        raise ProblemFormatError(f"{source}: no such file or folder")
    if path.is_file():
        if path.suffix == ".py":
            return LoadedSource(problems=[_load_single_file(path)], kind="file")
        if path.suffix in (".jsonl", ".json", ".ndjson"):
            return _load_cuda_l1(path)
        raise ProblemFormatError(
            f"{path}: unsupported file type (expected a problem .py file or a CUDA-L1 .json/.jsonl release)"
        )
    if not path.is_dir():
        raise ProblemFormatError(f"{path}: neither a file nor a folder")
    # Order matters: the real KernelBench/ folder also holds loose .parquet files next to levelN/.
    if _saved_to_disk(path):
        return _load_dataset(path)
    levels = _kernelbench_levels(path)
    if levels:
        return _load_kernelbench(path, levels)
    if _hub_layout(path):
        return _load_dataset(path)
    return _load_folder(path)


def problem_summary(p: Problem) -> dict[str, Any]:
    """A JSON-ready description of a problem, for ``hercules list --json``."""
    summary: dict[str, Any] = {
        "name": p.name,
        "level": p.level,
        "problem_id": p.problem_id,
        "source": p.source,
        "dtype": p.dtype_name,
        "hash": p.content_hash,
    }
    if "tier" in p.metadata:
        summary["tier"] = p.metadata["tier"]
    if p.source.startswith("cuda-l1:"):
        summary["has_candidate"] = bool(p.metadata.get("has_candidate", False))
    # Inputs the outputs ignore, as an evaluation on this machine found them (degenerate.py):
    # the finding, False (none), or None (never evaluated here).
    summary["degenerate_problem"] = degenerate.known(p.content_hash)
    return summary


# ----------------------------------------------------------------------------- files and folders


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ProblemFormatError(f"{path}: not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise ProblemFormatError(f"{path}: cannot read ({exc.strerror})") from exc


def _load_file(path: Path, level: int | None = None, problem_id: int | None = None) -> Problem:
    code = _read_text(path)
    metadata = validate_problem_code(code, str(path))
    if level is None:
        level = _as_int(metadata.get("level"))
    elif "expert" not in metadata:
        from hercules.experts.registry import kernelbench_op

        op = kernelbench_op(level, path.name)  # a file inside a KernelBench levelN/ folder
        if op:
            metadata = {**metadata, "expert": op}
    return Problem(
        name=path.stem,
        code=code,
        source=str(path),
        level=level,
        problem_id=problem_id,
        metadata=metadata,
    )


def _load_single_file(path: Path) -> Problem:
    """One named file; inside a KernelBench ``levelN/`` folder it keeps that level and its id."""
    level = _level_of_dir(path.parent)
    if level is None:
        return _load_file(path)
    m = _ID_PREFIX.match(path.name)
    return _load_file(path, level=level, problem_id=int(m.group(1)) if m else None)


def _is_helper(path: Path) -> bool:
    """A readable, parseable .py file that does not even try to define ``Model``."""
    try:
        tree = pyparse.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return False
    return "Model" not in top_level_names(tree)


def _problem_files(folder: Path) -> list[Path]:
    return sorted(
        (f for f in folder.glob("*.py") if f.is_file() and f.name != "__init__.py"),
        key=lambda f: f.name,
    )


def _load_folder(folder: Path) -> LoadedSource:
    problems: list[Problem] = []
    warnings: list[str] = []
    files = _problem_files(folder)
    for f in files:
        try:
            problems.append(_load_file(f))
        except ProblemFormatError as exc:
            if not _is_helper(f):  # helpers (no Model at all) are expected in a folder: no warning
                warnings.append(str(exc))
    if not problems:
        raise ProblemFormatError(_nothing_found(folder, f"{len(files)} .py files", warnings))
    return LoadedSource(problems=problems, warnings=warnings, kind="folder")


def _level_of_dir(d: Path) -> int | None:
    m = _LEVEL_DIR.match(d.name)
    return int(m.group(1)) if m else None


def _kernelbench_levels(path: Path) -> list[tuple[int, Path]]:
    """The ``levelN`` folders of a KernelBench checkout at PATH, or [] if it is not one."""
    own = _level_of_dir(path)
    if own is not None:
        return [(own, path)]
    for root in (path, path / "KernelBench"):
        if not root.is_dir():
            continue
        levels = sorted(
            (lvl, d) for d in root.iterdir() if d.is_dir() and (lvl := _level_of_dir(d)) is not None
        )
        if levels:
            return levels
    return []


def _load_kernelbench(path: Path, levels: list[tuple[int, Path]]) -> LoadedSource:
    problems: list[Problem] = []
    warnings: list[str] = []
    n_files = 0
    for level, folder in levels:
        for f in _problem_files(folder):
            n_files += 1
            m = _ID_PREFIX.match(f.name)
            try:
                problems.append(_load_file(f, level=level, problem_id=int(m.group(1)) if m else None))
            except ProblemFormatError as exc:
                warnings.append(str(exc))
    if not problems:
        where = ", ".join(d.name for _, d in levels)
        raise ProblemFormatError(_nothing_found(path, f"{n_files} .py files in {where}", warnings))
    problems.sort(key=_sort_key)
    warnings.extend(_duplicate_ids(problems))
    return LoadedSource(problems=problems, warnings=warnings, kind="kernelbench")


def _sort_key(p: Problem) -> tuple:
    return (
        p.level is None,
        p.level or 0,
        p.problem_id is None,
        p.problem_id or 0,
        p.name,
    )


def _duplicate_ids(problems: list[Problem]) -> list[str]:
    seen: dict[tuple[int | None, int], str] = {}
    out = []
    for p in problems:
        if p.problem_id is None:
            continue
        key = (p.level, p.problem_id)
        if key in seen:
            out.append(f"level {p.level} problem {p.problem_id}: both {seen[key]} and {p.name}")
        else:
            seen[key] = p.name
    return out


def _nothing_found(where: Path | str, checked: str, warnings: list[str]) -> str:
    msg = f"{where}: no KernelBench problems found ({checked} checked"
    if warnings:
        msg += f"; first rejection: {warnings[0]}"
    return msg + ")"


def _as_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# ----------------------------------------------------------------------------- Hugging Face datasets


def _saved_to_disk(folder: Path) -> bool:
    """Written by ``DatasetDict.save_to_disk`` (or ``Dataset.save_to_disk``)."""
    return (folder / "dataset_dict.json").is_file() or (
        (folder / "state.json").is_file() and (folder / "dataset_info.json").is_file()
    )


def _hub_layout(folder: Path) -> bool:
    """A dataset repository's files: ``data/<split>-00000-of-00001.parquet`` or loose parquet files."""
    data = folder / "data"
    if data.is_dir() and any(f.suffix in _DATA_SUFFIXES for f in data.rglob("*") if f.is_file()):
        return True
    files = [f for f in folder.iterdir() if f.is_file()]
    return any(f.suffix == ".parquet" for f in files) and not any(f.suffix == ".py" for f in files)


def _import_datasets():
    try:
        import datasets  # noqa: PLC0415  (optional dependency, imported only when needed)
    except ImportError as exc:
        raise ProblemFormatError(
            f"reading a Hugging Face dataset needs the 'datasets' package: {DATASETS_HINT}"
        ) from exc
    return datasets


def _load_dataset(folder: Path) -> LoadedSource:
    datasets = _import_datasets()
    # Listing is a quiet operation: datasets' progress bars would go to the terminal per split.
    bars_were_on = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        if _saved_to_disk(folder):
            loaded = datasets.load_from_disk(str(folder))
        else:
            loaded = datasets.load_dataset(str(folder))
    except Exception as exc:  # datasets raises many kinds; all mean "not a usable dataset"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ProblemFormatError(f"{folder}: cannot load as a Hugging Face dataset ({first})") from exc
    finally:
        if bars_were_on:
            datasets.enable_progress_bars()

    if isinstance(loaded, datasets.DatasetDict):
        splits = dict(loaded.items())
    else:  # a single Dataset written by Dataset.save_to_disk
        splits = {str(loaded.split) if loaded.split else "data": loaded}

    problems: list[Problem] = []
    warnings: list[str] = []
    n_rows = 0
    for split in sorted(splits, key=lambda s: (_split_level(s) is None, _split_level(s) or 0, s)):
        ds = splits[split]
        columns = set(ds.column_names)
        if "code" not in columns:
            warnings.append(f"{folder}#{split}: no 'code' column (has {', '.join(sorted(columns))})")
            continue
        for row_index, row in enumerate(ds):
            n_rows += 1
            where = f"dataset:{folder}#{split}/{row_index}"
            code = row.get("code")
            if not isinstance(code, str) or not code.strip():
                warnings.append(f"{where}: empty code")
                continue
            try:
                metadata = validate_problem_code(code, where)
            except ProblemFormatError as exc:
                warnings.append(str(exc))
                continue
            name = row.get("name") or f"{split}_{row_index}"
            name = str(name).removesuffix(".py")
            level = _as_int(row.get("level"))
            if level is None:
                level = _split_level(split)
            if level is None:
                level = _as_int(metadata.get("level"))
            problem_id = _as_int(row.get("problem_id"))
            if problem_id is None and (m := _ID_PREFIX.match(name)):
                problem_id = int(m.group(1))
            problems.append(
                Problem(
                    name=name,
                    code=code,
                    source=where,
                    level=level,
                    problem_id=problem_id,
                    metadata=metadata,
                )
            )
    if not problems:
        raise ProblemFormatError(_nothing_found(folder, f"{n_rows} rows in {len(splits)} splits", warnings))
    problems.sort(key=_sort_key)
    warnings.extend(_duplicate_ids(problems))
    return LoadedSource(problems=problems, warnings=warnings, kind="dataset")


def _split_level(split: str) -> int | None:
    m = _LEVEL_SPLIT.match(split)
    return int(m.group(1)) if m else None


# ----------------------------------------------------------------------------- CUDA-L1 releases


def _load_cuda_l1(path: Path) -> LoadedSource:
    text = _read_text(path)
    records: list[tuple[str, dict[str, Any] | None, str | None]] = []  # (locator, record, error)
    stripped = text.lstrip()
    whole: Any = None
    if stripped.startswith("{"):
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None  # JSON Lines (the usual case): more than one document
    if isinstance(whole, dict) and whole and all(isinstance(v, list) for v in whole.values()):
        # Deprecated release shape: {"<level>": [{task_id, ref_code, custom_code}, ...], ...}
        for level_key, items in whole.items():
            for i, item in enumerate(items):
                loc = f"level{level_key}[{i}]"
                if isinstance(item, dict):
                    records.append((loc, {"level_id": _as_int(level_key), **item}, None))
                else:
                    records.append((loc, None, "not a JSON object"))
    elif isinstance(whole, dict):
        records.append(("1", whole, None))  # a one-record JSON Lines file
    else:
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                records.append((str(lineno), None, f"not JSON ({exc.msg})"))
                continue
            if not isinstance(record, dict):
                records.append((str(lineno), None, "not a JSON object"))
                continue
            records.append((str(lineno), record, None))

    good = [r for _, r, _ in records if r is not None]
    if not good or not any("ref_code" in r for r in good):
        raise ProblemFormatError(
            f"{path}: not a CUDA-L1 release file (expected JSON Lines records with level_id, task_id, ref_code)"
        )

    problems: list[Problem] = []
    candidates: list[Candidate] = []
    warnings: list[str] = []
    for loc, record, error in records:
        where = f"cuda-l1:{path}#{loc}"
        if record is None:
            warnings.append(f"{where}: {error}")
            continue
        level, task = _as_int(record.get("level_id")), _as_int(record.get("task_id"))
        ref_code = record.get("ref_code")
        if level is None or task is None:
            warnings.append(f"{where}: missing level_id or task_id")
            continue
        if not isinstance(ref_code, str) or not ref_code.strip():
            warnings.append(f"{where}: empty ref_code")
            continue
        try:
            metadata = validate_problem_code(ref_code, where)
        except ProblemFormatError as exc:
            warnings.append(str(exc))
            continue
        name = f"level{level}_task{task}"
        custom = record.get("custom_code")
        # The releases write a missing kernel as JSON null, "" or the text "None" (16 of a100.json, 17 of l40.json).
        has_candidate = isinstance(custom, str) and custom.strip() not in ("", "None", "null")
        problems.append(
            Problem(
                name=name,
                code=ref_code,
                source=where,
                level=level,
                problem_id=task,
                metadata={**metadata, "has_candidate": has_candidate},
            )
        )
        if has_candidate:
            candidates.append(
                Candidate(
                    name=f"{name}_cuda_l1",
                    code=custom,
                    source=where,
                    problem=name,
                    score={k: v for k, v in record.items() if k.startswith("score_")},
                )
            )
    if not problems:
        raise ProblemFormatError(_nothing_found(path, f"{len(records)} records", warnings))
    problems.sort(key=_sort_key)
    warnings.extend(_duplicate_ids(problems))
    return LoadedSource(problems=problems, candidates=candidates, warnings=warnings, kind="cuda-l1")
