"""Problems in requests: built-in names, source code, objects; cache keys of submissions."""

from __future__ import annotations

import pytest
from serve_helpers import PROBLEM, candidate_code

from hercules.harness.evaluate import EvalOptions
from hercules.serve.cache import submission_key
from hercules.serve.problems import BadRequest, resolve_problem


def test_problems_by_name_code_or_object():
    by_name = resolve_problem("mish_fp32")
    assert by_name.name == "mish_fp32" and "class Model" in by_name.code
    assert resolve_problem({"name": "mish_fp32"}) == by_name
    by_code = resolve_problem(PROBLEM["code"])
    assert by_code.name.startswith("problem_") and by_code.metadata["level"] == 2
    named = resolve_problem(PROBLEM)
    assert named.name == PROBLEM["name"] and named.code == by_code.code
    for bad in (None, 3, {"nothing": 1}, "import torch\nx = 1\n"):
        with pytest.raises(BadRequest):
            resolve_problem(bad)


def test_submission_keys_follow_content_not_names_or_folders(tmp_path):
    problem = resolve_problem(PROBLEM)
    options = EvalOptions(device="cpu", baselines=("eager",))
    key = submission_key(problem, candidate_code(), options)
    assert submission_key(resolve_problem(PROBLEM["code"]), "\n" + candidate_code() + "\n\n", options) == key
    assert submission_key(problem, candidate_code(), EvalOptions(device="cpu", baselines=("eager",),
                                                                 cache_dir=tmp_path)) == key
    assert submission_key(problem, candidate_code(forward="x"), options) != key
    assert submission_key(problem, candidate_code(), EvalOptions(device="cpu", baselines=("eager",),
                                                                 trials=3)) != key
