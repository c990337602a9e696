"""Shared test set-up: GPU tests are skipped where no CUDA device is present."""

from __future__ import annotations

import os

# One compute thread a process (torch's intra-op pool, OpenMP), set before torch is imported here
# and inherited by every process a test starts (the evaluation workers, CLI runs, the cli_batch
# driver, xdist's workers). CI runs two xdist workers on 2 cores, and each evaluation's two worker
# processes take turns: at torch's default (one thread a core) two evaluations at once put four
# spinning threads on the 2 cores, and the red team's honest control took 19-22 s beside another
# evaluation instead of 9 s (its side-by-side rounds 7 -> 17 as the interval widened); at one
# thread both read 9 s and 7 rounds. What the tests assert does not depend on the thread count
# (integrity's thread check sees Python threads, not OpenMP's). A value set outside is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402


# The README runs the suite on two pytest-xdist workers, a test file to a worker (--dist loadfile:
# module fixtures such as the red team's batched runs are built once). Files are handed out in
# collection order; these, the longest (seconds in one process on the 2-core CI machine), go first
# so that no long file is left to run alone at the end.
_LONGEST_FIRST = (
    "tests/harness/test_evaluate.py",  # ~210 s
    "tests/harness/test_redteam.py",  # ~195 s
    "tests/test_adversarial_corpus.py",  # ~105 s
    "tests/compile/test_triton_templates.py",  # ~95 s
    "tests/optimize/test_optimize_run.py",  # ~80 s
    "tests/test_interrupts.py",  # ~60 s
    "tests/debug/test_debug_reproduce.py",  # ~60 s
    "tests/test_cli_commands.py",  # ~60 s
    "tests/harness/test_batch.py",  # ~50 s
    "tests/debug/test_debug_cli.py",  # ~45 s
    "tests/debug/test_debug_fixers.py",  # ~40 s
    "tests/serve/test_executor.py",  # ~35 s
)


def pytest_configure(config):
    # xdist hands out its scopes sorted by their test count unless told not to: it would start with
    # test_suite_reference (93 quick tests) and leave the long files to the end.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker collects, and must order, the same way
        rank = {path: i for i, path in enumerate(_LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


SUITE_PROBLEMS = __import__("pathlib").Path(__file__).resolve().parents[1] / "src" / "hercules" / "suite" / "problems"


def _suite_problem_at(folder, name: str, replacements: dict[str, str], new_name: str):
    """A built-in problem with its sizes (or computation) replaced, as a file in ``folder``: small
    enough for the CPU and Triton's interpreter, and still the suite's own code."""
    text = (SUITE_PROBLEMS / f"{name}.py").read_text()
    for old, new in replacements.items():
        assert old in text, (name, old)
        text = text.replace(old, new)
    path = folder / f"{new_name}.py"
    path.write_text(text)
    return path


@pytest.fixture
def expert_problems(tmp_path):
    """Small built-in problems that name their expert operation, and one that names rms_norm but
    computes RMSNorm plus one (every rms_norm kernel is wrong for it)."""
    folder = tmp_path / "expert_problems"
    folder.mkdir()
    small = {"HIDDEN = 2048": "HIDDEN = 256", "torch.randn(2, 2048, HIDDEN)": "torch.randn(64, HIDDEN)"}
    return {
        "rmsnorm": _suite_problem_at(folder, "rmsnorm_fp32", small, "rmsnorm_small"),
        "mismatch": _suite_problem_at(folder, "rmsnorm_fp32", {**small, "* self.weight\n": "* self.weight + 1.0\n"},
                                      "rmsnorm_plus_one"),
        "softmax": _suite_problem_at(folder, "softmax_rows_fp32", {"torch.randn(4096, 4096)": "torch.randn(16, 128)"},
                                     "softmax_small"),
    }
