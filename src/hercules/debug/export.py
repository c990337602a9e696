"""Turn a failing candidate from an optimisation run into a corpus instance (CUDABeaver layout).

The instance is KernelBench-style: ``testbench/problem.py`` is the problem, the editable file is
``solution.py`` (a ``ModelNew`` candidate). Its commands call Hercules' own evaluator, and
``load_corpus`` runs such instances on the evaluation core whatever the commands say.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from hercules.debug.corpus import load_instance
from hercules.problems.model import code_hash

BUILD_COMMAND = "python -m py_compile solution.py"
TEST_COMMAND = "hercules eval --problem problem.py --candidate solution.py --json"

# The evaluation core's status -> CUDABeaver error category. ``ok`` means correct but rejected by
# a performance gate upstream; ``suspicious`` means correct outputs that only a hack produced.
CATEGORY_BY_STATUS = {
    "build_error": "compile_error",
    "incorrect": "logic_error",
    "suspicious": "logic_error",
    "crash": "memory_crash",
    "timeout": "timeout",
    "ok": "perf_broken",
}
_MEMORY_WORDS = re.compile(r"illegal memory|misaligned|out of memory|cuda error|cudaerror|segmentation|"
                           r"invalid (device|argument|configuration)|launch failure", re.IGNORECASE)


def category_for(status: str, error: str) -> str:
    status = status.lower()
    if status == "runtime_error":
        return "memory_crash" if _MEMORY_WORDS.search(error or "") else "logic_error"
    if status not in CATEGORY_BY_STATUS:
        raise ValueError(f"status {status!r} is not a failure that can become an instance "
                         f"(one of {', '.join(sorted([*CATEGORY_BY_STATUS, 'runtime_error']))})")
    return CATEGORY_BY_STATUS[status]


def _slug(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").lower()
    return slug[:60] or "problem"


def export_failing_candidate(corpus_dir: Path, *, problem_name: str, problem_code: str, candidate_code: str,
                             status: str, error: str, prompt: str, reference_code: str | None = None,
                             family: str = "hercules") -> Path:
    """Write one instance folder under ``corpus_dir`` and return it (idempotent per candidate)."""
    category = category_for(status, error)
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
        "source": {"status": status, "error": error[-4000:]},
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
