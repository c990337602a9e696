"""Turn a failing candidate from an optimisation run into a corpus instance (CUDABeaver layout).

The instance is KernelBench-style: ``testbench/problem.py`` is the problem, the editable file is
``solution.py`` (a ``ModelNew`` candidate). Its commands call Hercules' own evaluator, and
``load_corpus`` runs such instances on the evaluation core whatever the commands say.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from hercules.debug import classifier as cls
from hercules.debug.corpus import load_instance
from hercules.harness.records import Cause, Status
from hercules.problems.model import code_hash

BUILD_COMMAND = "python -m py_compile solution.py"
TEST_COMMAND = "hercules eval --problem problem.py --candidate solution.py --json"

# The evaluation core's status -> CUDABeaver error category. ``ok`` means correct but rejected by
# a performance gate upstream; ``suspicious`` means correct outputs that only a hack produced.
CATEGORY_BY_STATUS = {
    Status.BUILD_ERROR: "compile_error",
    Status.INCORRECT: "logic_error",
    Status.SUSPICIOUS: "logic_error",
    Status.CRASH: "memory_crash",
    Status.TIMEOUT: "timeout",
    Status.OK: "perf_broken",
}
# Failures that say nothing of the candidate: no instance can be made of them.
NOT_THE_CANDIDATE = frozenset({Cause.EXTERNAL_KILL, Cause.REFERENCE, Cause.HARNESS, Cause.DEVICE_MISSING})
# A runtime error is a memory crash when its cause says so, or when the runtime's message names a
# memory fault (the cause of a candidate's exception does not say which); else a logic error.
_MEMORY_CAUSES = frozenset({Cause.OUT_OF_MEMORY, Cause.CANDIDATE_CRASH, Cause.SANDBOX_REFUSAL})
_MEMORY_FAULTS = frozenset({cls.OOM, cls.ILLEGAL, cls.LAUNCH})
_EXPORTABLE = frozenset({*CATEGORY_BY_STATUS, Status.RUNTIME_ERROR})


def category_for(status: Status | str, cause: Cause | str = Cause.NONE, error: str = "") -> str:
    """The corpus category of a core verdict's failure; ValueError for one no instance can be made
    of (skipped, a fault of Hercules, a worker killed from outside, the problem's own failure)."""
    status, cause = Status(status.lower()), Cause(cause.lower())
    if cause in NOT_THE_CANDIDATE or status not in _EXPORTABLE:
        names = ", ".join(sorted(s.value for s in _EXPORTABLE))
        raise ValueError(f"{status.value} ({cause.value}) is not a failure of the candidate that can become an "
                         f"instance (one of {names}, caused by the candidate)")
    if status is not Status.RUNTIME_ERROR:
        return CATEGORY_BY_STATUS[status]
    if cause in _MEMORY_CAUSES:
        return "memory_crash"
    fault = cls.read_runtime_error(error or "")
    return "memory_crash" if fault is not None and fault.category in _MEMORY_FAULTS else "logic_error"


def exportable(status: Status | str, cause: Cause | str = Cause.NONE) -> bool:
    """Whether a verdict with this status and cause can become an instance (``category_for``)."""
    try:
        category_for(status, cause)
    except ValueError:
        return False
    return True


def _slug(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").lower()
    return slug[:60] or "problem"


def export_failing_candidate(corpus_dir: Path, *, problem_name: str, problem_code: str, candidate_code: str,
                             status: Status | str, error: str, prompt: str, reference_code: str | None = None,
                             family: str = "hercules", cause: Cause | str = Cause.NONE) -> Path:
    """Write one instance folder under ``corpus_dir`` and return it (idempotent per candidate);
    ``status`` and ``cause`` are the core verdict's (``category_for``)."""
    category = category_for(status, cause, error)
    status, cause = Status(status.lower()).value, Cause(cause.lower()).value
    digest = code_hash(candidate_code)
    task_base = f"{_slug(family)}_{_slug(problem_name)}"
    task_id = f"{task_base}__{category}__{digest[:8]}"
    folder = Path(corpus_dir) / task_id
    (folder / "testbench").mkdir(parents=True, exist_ok=True)
    (folder / "testbench" / "problem.py").write_text(problem_code, encoding="utf-8")
    (folder / "broken_start.py").write_text(candidate_code, encoding="utf-8")
    (folder / "prompt.txt").write_text(prompt, encoding="utf-8")
    files = {"broken_start": "broken_start.py", "prompt": "prompt.txt", "testbench": "testbench/",
             "input_meta": "input.json"}
    if reference_code is not None:
        (folder / "reference.py").write_text(reference_code, encoding="utf-8")
        files["reference"] = "reference.py"
    input_meta = {
        "task_id": task_id, "schema_version": 2, "difficulty": "unknown", "level": family,
        "tags": ["hercules", "kernelbench-format"],
        "build_command": BUILD_COMMAND, "test_command": TEST_COMMAND, "solution_file": "solution.py",
        "task_id_base": task_base,
        "source": {"status": status, "cause": cause, "error": error[-4000:]},
    }
    instance = {
        "id": task_id, "task_family": family, "error_category": category, "difficulty": "unknown",
        "upstream_library": None, "broken_start_provenance": f"Hercules optimisation run ({status})",
        "files": files, "broken_start_lines": candidate_code.count("\n") + 1,
        "broken_start_hash": digest[:16],
    }
    (folder / "input.json").write_text(json.dumps(input_meta, indent=2) + "\n", encoding="utf-8")
    (folder / "instance.json").write_text(json.dumps(instance, indent=2) + "\n", encoding="utf-8")
    load_instance(folder)  # what we write must load; a ValueError here is a bug in this function
    return folder
