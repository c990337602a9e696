"""Corpus loader and export: the vendored CUDABeaver copy loads whole; a malformed instance is
reported on one line while the rest load; what ``export_failing_candidate`` writes loads back."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hercules.debug.corpus import (
    CorpusError,
    load_corpus,
    load_instance,
    reference_timing,
)
from hercules.debug.export import category_for, export_failing_candidate, exportable
from hercules.harness.records import Cause, Status

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "corpora" / "cudabeaver"

PROBLEM = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(64)]

def get_init_inputs():
    return []
"""
BROKEN = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def test_vendored_corpus_loads_every_instance():
    load = load_corpus(CORPUS)
    assert load.problems == ()
    assert len(load.instances) == 65
    kinds = {i.kind for i in load.instances}
    assert kinds == {"native", "kernelbench", "defpy"}
    assert sum(i.category == "compile_error" for i in load.instances) == 35
    kb = [i for i in load.instances if i.family == "kernelbench"]
    assert kb and all(i.kind == "kernelbench" for i in kb)
    assert reference_timing(kb[0])["timing"]["mean_ms"] > 0


def test_filters_by_family_category_and_difficulty():
    load = load_corpus(CORPUS, families=("cuda",), categories=("compile_error",), difficulties=("hard",))
    assert load.instances
    assert all(i.family == "cuda" and i.category == "compile_error" and i.difficulty == "hard"
               for i in load.instances)


def test_malformed_instance_is_reported_and_the_rest_load(tmp_path):
    for name in ("cuda_104__compile_error__f8160fc8", "cuda_110__logic_error__957be815"):
        shutil.copytree(CORPUS / name, tmp_path / name)
    bad = tmp_path / "cuda_110__logic_error__957be815"
    (bad / "input.json").write_text("{not json")
    escaping = tmp_path / "escape"
    shutil.copytree(CORPUS / "cuda_104__compile_error__f8160fc8", escaping)
    meta = json.loads((escaping / "input.json").read_text())
    meta["solution_file"] = "../../etc/passwd"
    (escaping / "input.json").write_text(json.dumps(meta))
    load = load_corpus(tmp_path)
    assert [i.task_id for i in load.instances] == ["cuda_104__compile_error__f8160fc8"]
    messages = {p.path.name: p.message for p in load.problems}
    assert "not valid JSON" in messages["cuda_110__logic_error__957be815"]
    assert "relative path inside" in messages["escape"]
    with pytest.raises(CorpusError):
        load_corpus(tmp_path / "missing")


@pytest.mark.parametrize("status,cause,error,category", [
    ("build_error", "candidate_error", "nvcc failed", "compile_error"), ("incorrect", "none", "", "logic_error"),
    ("crash", "candidate_crash", "", "memory_crash"), ("timeout", "timeout", "", "timeout"),
    ("ok", "none", "", "perf_broken"),
    (Status.RUNTIME_ERROR, Cause.OUT_OF_MEMORY, "", "memory_crash"),
    # the cause of a candidate's exception does not say which: the runtime's message does
    ("runtime_error", "candidate_error", "CUDA error: an illegal memory access was encountered", "memory_crash"),
    ("runtime_error", "candidate_error", "invalid configuration argument", "memory_crash"),
    ("runtime_error", "candidate_error", "TypeError: forward() takes 2 positional arguments", "logic_error"),
    # records without a cause (an older optimisation run): decided the same way
    ("runtime_error", "none", "CUDA error: an illegal memory access was encountered", "memory_crash"),
])
def test_status_and_cause_map_to_category(status, cause, error, category):
    assert category_for(status, cause, error) == category


@pytest.mark.parametrize("status,cause", [
    ("skipped", "device_missing"), ("harness_error", "harness"), ("crash", "external_kill"),
    ("runtime_error", "reference"), ("runtime_error", "external_kill"),
])
def test_failures_not_of_the_candidate_make_no_instance(status, cause):
    """A worker killed from outside, the problem's own failure or Hercules' fault would be labelled
    as the candidate's crash: refused, whatever the error text says."""
    assert not exportable(status, cause)
    with pytest.raises(ValueError, match="not a failure of the candidate"):
        category_for(status, cause, "CUDA error: an illegal memory access was encountered")


def test_exported_candidate_loads_back(tmp_path):
    folder = export_failing_candidate(
        tmp_path, problem_name="Relu 64", problem_code=PROBLEM, candidate_code=BROKEN, status="incorrect",
        error="max_abs_err 2.1", prompt="Write a fast relu.", reference_code=PROBLEM)
    inst = load_instance(folder)
    assert inst.kind == "kernelbench" and inst.category == "logic_error" and inst.family == "hercules"
    assert inst.broken_code() == BROKEN and inst.reference_code() == PROBLEM
    assert (folder / "testbench" / "problem.py").read_text() == PROBLEM
    assert "hercules eval" in inst.test_command
    load = load_corpus(tmp_path)
    assert [i.task_id for i in load.instances] == [folder.name] and load.problems == ()
    with pytest.raises(ValueError):
        export_failing_candidate(tmp_path, problem_name="x", problem_code=PROBLEM, candidate_code=BROKEN,
                                 status="skipped", error="", prompt="")
