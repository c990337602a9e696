"""Tests for hercules.problems.loaders: every kind of SOURCE, built in tmp_path."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from hercules.problems.loaders import LoadedSource, load_source, problem_summary
from hercules.problems.model import ProblemFormatError


def problem_code(op: str = "x + 1", metadata: dict | None = None) -> str:
    meta = f"HERCULES = {metadata!r}\n\n" if metadata is not None else ""
    return (
        "import torch\nimport torch.nn as nn\n\n"
        f"{meta}"
        "class Model(nn.Module):\n"
        "    def forward(self, x):\n"
        f"        return {op}\n\n"
        "def get_inputs():\n    return [torch.randn(4, 4)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )


NOT_A_PROBLEM = "import torch\n\nclass Model(torch.nn.Module):\n    pass\n"  # no input factories
HELPER = "def shared_helper():\n    return 42\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ----------------------------------------------------------------------------- single file


def test_single_file_reads_name_level_and_dtype_from_metadata(tmp_path):
    f = write(tmp_path / "my_gemm.py", problem_code("x @ x", {"level": 2, "dtype": "bfloat16"}))
    loaded = load_source(f)
    assert isinstance(loaded, LoadedSource)
    assert loaded.kind == "file"
    assert loaded.candidates == [] and loaded.warnings == []
    [p] = loaded.problems
    assert (p.name, p.level, p.problem_id, p.source) == ("my_gemm", 2, None, str(f))
    assert p.dtype_name == "bfloat16"
    assert "x @ x" in p.code


def test_single_file_accepts_a_string_path_without_metadata(tmp_path):
    f = write(tmp_path / "relu.py", problem_code("x.relu()"))
    [p] = load_source(str(f)).problems
    assert p.level is None and p.metadata == {} and p.dtype_name == "float32"


def test_single_invalid_file_raises_one_line_error(tmp_path):
    f = write(tmp_path / "broken.py", NOT_A_PROBLEM)
    with pytest.raises(ProblemFormatError) as err:
        load_source(f)
    msg = str(err.value)
    assert "\n" not in msg and "broken.py" in msg and "get_inputs" in msg


def test_single_file_with_syntax_error_raises(tmp_path):
    f = write(tmp_path / "bad.py", "class Model(:\n")
    with pytest.raises(ProblemFormatError, match="not valid Python"):
        load_source(f)


# ----------------------------------------------------------------------------- plain folder


def test_folder_skips_helpers_silently_and_warns_about_broken_problems(tmp_path):
    write(tmp_path / "b_softmax.py", problem_code("x.softmax(-1)", {"level": 1}))
    write(tmp_path / "a_add.py", problem_code())
    write(tmp_path / "__init__.py", "")
    write(tmp_path / "utils.py", HELPER)
    write(tmp_path / "half_done.py", NOT_A_PROBLEM)
    write(tmp_path / "notes.txt", "not python")
    write(tmp_path / "sub" / "nested.py", problem_code())  # not recursive

    loaded = load_source(tmp_path)
    assert loaded.kind == "folder"
    assert [p.name for p in loaded.problems] == ["a_add", "b_softmax"]
    assert [p.level for p in loaded.problems] == [None, 1]
    assert len(loaded.warnings) == 1 and "half_done.py" in loaded.warnings[0]


def test_folder_with_only_helpers_raises(tmp_path):
    write(tmp_path / "utils.py", HELPER)
    write(tmp_path / "__init__.py", "")
    with pytest.raises(ProblemFormatError, match="no KernelBench problems found"):
        load_source(tmp_path)


def test_empty_folder_raises(tmp_path):
    with pytest.raises(ProblemFormatError, match="no KernelBench problems found"):
        load_source(tmp_path)


def test_missing_path_raises(tmp_path):
    with pytest.raises(ProblemFormatError, match="no such file or folder"):
        load_source(tmp_path / "nope")


def test_unsupported_file_type_raises(tmp_path):
    f = write(tmp_path / "problems.txt", "hello")
    with pytest.raises(ProblemFormatError, match="unsupported file type"):
        load_source(f)


# ----------------------------------------------------------------------------- KernelBench checkout


@pytest.fixture
def kernelbench_repo(tmp_path) -> Path:
    """The upstream layout: <repo>/KernelBench/level{1,2,3}/<id>_<Name>.py, loose data files beside."""
    kb = tmp_path / "repo" / "KernelBench"
    write(kb / "level1" / "1_Square_matrix_multiplication_.py", problem_code("x @ x"))
    write(kb / "level1" / "2_Standard_matrix_multiplication_.py", problem_code("x @ x.T"))
    write(kb / "level1" / "10_3D_tensor_matrix_multiplication.py", problem_code("x * 2"))
    write(kb / "level1" / "11_broken.py", NOT_A_PROBLEM)
    write(kb / "level2" / "1_Conv2D_ReLU_BiasAdd.py", problem_code("x.relu() + 1"))
    write(kb / "level3" / "1_MLP.py", problem_code("x.tanh()"))
    write(kb / "level3" / "2_ShallowWideMLP.py", problem_code("x.sigmoid()"))
    # the real KernelBench/ folder also holds parquet and json files next to the level folders
    write(kb / "eval_dataset.parquet", "not really parquet: never read")
    write(kb / "best_k_kernels_level1.json", "{}")
    write(tmp_path / "repo" / "README.md", "# KernelBench")
    return tmp_path / "repo"


def _names_levels_ids(loaded: LoadedSource):
    return [(p.level, p.problem_id, p.name) for p in loaded.problems]


EXPECTED_KB = [
    (1, 1, "1_Square_matrix_multiplication_"),
    (1, 2, "2_Standard_matrix_multiplication_"),
    (1, 10, "10_3D_tensor_matrix_multiplication"),
    (2, 1, "1_Conv2D_ReLU_BiasAdd"),
    (3, 1, "1_MLP"),
    (3, 2, "2_ShallowWideMLP"),
]


def test_kernelbench_repo_root(kernelbench_repo):
    loaded = load_source(kernelbench_repo)
    assert loaded.kind == "kernelbench"
    # numeric order within a level (10 after 2), levels in order
    assert _names_levels_ids(loaded) == EXPECTED_KB
    assert len(loaded.warnings) == 1 and "11_broken.py" in loaded.warnings[0]
    first = loaded.problems[0]
    assert first.source == str(kernelbench_repo / "KernelBench" / "level1" / "1_Square_matrix_multiplication_.py")


def test_kernelbench_folder_itself(kernelbench_repo):
    loaded = load_source(kernelbench_repo / "KernelBench")
    assert loaded.kind == "kernelbench"
    assert _names_levels_ids(loaded) == EXPECTED_KB


def test_kernelbench_single_level_folder(kernelbench_repo):
    loaded = load_source(kernelbench_repo / "KernelBench" / "level3")
    assert _names_levels_ids(loaded) == [(3, 1, "1_MLP"), (3, 2, "2_ShallowWideMLP")]
    assert loaded.warnings == []


def test_single_kernelbench_file_keeps_level_and_id(kernelbench_repo):
    f = kernelbench_repo / "KernelBench" / "level1" / "10_3D_tensor_matrix_multiplication.py"
    loaded = load_source(f)
    assert loaded.kind == "file"
    assert _names_levels_ids(loaded) == [(1, 10, "10_3D_tensor_matrix_multiplication")]


def test_kernelbench_extra_levels_and_unnumbered_files(kernelbench_repo):
    # upstream also has level5/ and level9/ (files like rotary_reference.py without an id prefix)
    kb = kernelbench_repo / "KernelBench"
    write(kb / "level9" / "rotary_reference.py", problem_code("x.cos()"))
    write(kb / "level4" / "1_some_model.py", problem_code("x.exp()"))
    loaded = load_source(kernelbench_repo)
    tail = _names_levels_ids(loaded)[-2:]
    assert tail == [(4, 1, "1_some_model"), (9, None, "rotary_reference")]


def test_kernelbench_level_overrides_metadata_and_duplicate_ids_warn(tmp_path):
    level = tmp_path / "level2"
    write(level / "23_Conv3d_GroupNorm_Mean.py", problem_code(metadata={"level": 7}))
    write(level / "23_Conv3d_GroupNorm_Mean_OLD.py", problem_code("x - 1"))
    loaded = load_source(level)
    assert [p.level for p in loaded.problems] == [2, 2]
    assert loaded.problems[0].metadata == {"level": 7}
    assert any("problem 23" in w for w in loaded.warnings)


def test_kernelbench_with_no_valid_problem_raises(tmp_path):
    write(tmp_path / "KernelBench" / "level1" / "1_bad.py", NOT_A_PROBLEM)
    with pytest.raises(ProblemFormatError) as err:
        load_source(tmp_path)
    assert "no KernelBench problems found" in str(err.value) and "1_bad.py" in str(err.value)


# ----------------------------------------------------------------------------- Hugging Face datasets


@pytest.fixture
def datasets_mod(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    # load_dataset caches what it converts: keep that cache out of the user's home
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf_cache")
    return datasets


def _kernelbench_dataset_dict(datasets):
    rows = {
        1: [(2, "2_Standard_matrix_multiplication_", problem_code("x @ x.T")),
            (1, "1_Square_matrix_multiplication_", problem_code("x @ x"))],
        2: [(1, "1_Conv2D_ReLU_BiasAdd", problem_code("x.relu()")),
            (2, "2_not_a_problem", NOT_A_PROBLEM)],
        3: [(1, "1_MLP.py", problem_code("x.tanh()", {"dtype": "float16"}))],
    }
    return datasets.DatasetDict({
        f"level_{level}": datasets.Dataset.from_dict({
            "code": [r[2] for r in rs],
            "level": [level] * len(rs),
            "name": [r[1] for r in rs],
            "problem_id": [r[0] for r in rs],
        })
        for level, rs in rows.items()
    })


def _check_dataset(loaded: LoadedSource, path: Path):
    assert loaded.kind == "dataset"
    assert _names_levels_ids(loaded) == [
        (1, 1, "1_Square_matrix_multiplication_"),
        (1, 2, "2_Standard_matrix_multiplication_"),
        (2, 1, "1_Conv2D_ReLU_BiasAdd"),
        (3, 1, "1_MLP"),  # a ".py" in the name column is dropped
    ]
    by_name = {p.name: p for p in loaded.problems}
    assert by_name["1_Square_matrix_multiplication_"].source == f"dataset:{path}#level_1/1"
    assert by_name["1_MLP"].source == f"dataset:{path}#level_3/0"
    assert by_name["1_MLP"].dtype_name == "float16"
    assert len(loaded.warnings) == 1 and "#level_2/1" in loaded.warnings[0]


def test_dataset_saved_to_disk(tmp_path, datasets_mod):
    out = tmp_path / "kb_disk"
    _kernelbench_dataset_dict(datasets_mod).save_to_disk(str(out))
    assert (out / "dataset_dict.json").is_file()
    _check_dataset(load_source(out), out)


def test_dataset_in_hub_file_layout(tmp_path, datasets_mod):
    out = tmp_path / "kb_hub"
    (out / "data").mkdir(parents=True)
    for split, ds in _kernelbench_dataset_dict(datasets_mod).items():
        ds.to_parquet(str(out / "data" / f"{split}-00000-of-00001.parquet"))
    _check_dataset(load_source(out), out)


def test_dataset_without_level_column_takes_level_from_split(tmp_path, datasets_mod):
    out = tmp_path / "kb_min"
    datasets_mod.DatasetDict({
        "level_4": datasets_mod.Dataset.from_dict({"code": [problem_code()], "name": ["7_Thing"]}),
    }).save_to_disk(str(out))
    [p] = load_source(out).problems
    assert (p.level, p.problem_id, p.name) == (4, 7, "7_Thing")


def test_dataset_with_no_valid_rows_raises(tmp_path, datasets_mod):
    out = tmp_path / "kb_bad"
    datasets_mod.DatasetDict({
        "level_1": datasets_mod.Dataset.from_dict({"code": [NOT_A_PROBLEM], "name": ["1_x"]}),
    }).save_to_disk(str(out))
    with pytest.raises(ProblemFormatError, match="no KernelBench problems found"):
        load_source(out)


def test_dataset_without_datasets_package_says_how_to_install(tmp_path, monkeypatch):
    out = tmp_path / "kb_disk"
    write(out / "dataset_dict.json", json.dumps({"splits": ["level_1"]}))
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` fail
    with pytest.raises(ProblemFormatError) as err:
        load_source(out)
    assert "pip install 'hercules[datasets]'" in str(err.value)


# ----------------------------------------------------------------------------- CUDA-L1 release


def _cuda_l1_record(level, task, ref, custom, score=None):
    # field set of optimized_cuda_code/<gpu>.json in deepreinforce-ai/CUDA-L1
    return {
        "level_id": level,
        "task_id": task,
        "ref_code": ref,
        "custom_code": custom,
        "cuda_graph_code": ref,
        "cudnn_code": ref,
        "score_default": score,
        "score_torch_compile_default": score,
        "score_torch_compile_reduce_overhead": score,
        "score_cuda_graph": score,
        "score_cudnn": score,
    }


CUSTOM = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"


@pytest.fixture
def cuda_l1_file(tmp_path) -> Path:
    records = [
        _cuda_l1_record(1, 2, problem_code("x @ x.T"), None),  # no candidate, null scores
        _cuda_l1_record(1, 1, problem_code("x @ x"), CUSTOM, 2.75),
        _cuda_l1_record(2, 1, problem_code("x.relu()"), "", None),  # empty: no candidate
        _cuda_l1_record(3, 5, NOT_A_PROBLEM, CUSTOM, 1.5),  # invalid reference: skipped
        _cuda_l1_record(2, 8, problem_code("x.relu()"), "None", None),  # the releases' text "None": no candidate
    ]
    lines = [json.dumps(r) for r in records]
    lines.insert(2, "")  # blank lines are ignored
    lines.append("{not json")
    # the real release files are named .json although they are JSON Lines
    return write(tmp_path / "h100.json", "\n".join(lines) + "\n")


def test_cuda_l1_problems_and_candidates(cuda_l1_file):
    loaded = load_source(cuda_l1_file)
    assert loaded.kind == "cuda-l1"
    assert _names_levels_ids(loaded) == [
        (1, 1, "level1_task1"),
        (1, 2, "level1_task2"),
        (2, 1, "level2_task1"),
        (2, 8, "level2_task8"),
    ]
    by_name = {p.name: p for p in loaded.problems}
    assert by_name["level1_task1"].source == f"cuda-l1:{cuda_l1_file}#2"
    assert by_name["level2_task1"].source == f"cuda-l1:{cuda_l1_file}#4"  # line numbers count blanks
    assert [p.metadata["has_candidate"] for p in loaded.problems] == [True, False, False, False]

    [cand] = loaded.candidates
    assert cand.problem == "level1_task1"
    assert cand.code == CUSTOM
    assert cand.source == f"cuda-l1:{cuda_l1_file}#2"
    assert cand.score == {
        "score_default": 2.75,
        "score_torch_compile_default": 2.75,
        "score_torch_compile_reduce_overhead": 2.75,
        "score_cuda_graph": 2.75,
        "score_cudnn": 2.75,
    }
    assert len(loaded.warnings) == 2
    assert any("#5" in w and "get_inputs" in w for w in loaded.warnings)
    assert any("#7" in w and "not JSON" in w for w in loaded.warnings)


def test_cuda_l1_jsonl_suffix_and_missing_fields(tmp_path):
    f = write(
        tmp_path / "release.jsonl",
        json.dumps({"task_id": 3, "ref_code": problem_code()}) + "\n"
        + json.dumps({"level_id": 1, "task_id": 4, "ref_code": problem_code()}) + "\n",
    )
    loaded = load_source(f)
    assert [p.name for p in loaded.problems] == ["level1_task4"]
    assert loaded.candidates == []
    assert len(loaded.warnings) == 1 and "missing level_id or task_id" in loaded.warnings[0]


def test_cuda_l1_deprecated_per_level_object(tmp_path):
    # optimized_cuda_code/deprecated/*.json: {"1": [{"task_id", "ref_code", "custom_code"}], ...}
    data = {
        "1": [{"task_id": 1, "ref_code": problem_code(), "custom_code": CUSTOM}],
        "3": [{"task_id": 7, "ref_code": problem_code(), "custom_code": None}],
    }
    f = write(tmp_path / "h20.json", json.dumps(data, indent=2))
    loaded = load_source(f)
    assert _names_levels_ids(loaded) == [(1, 1, "level1_task1"), (3, 7, "level3_task7")]
    assert loaded.problems[1].source == f"cuda-l1:{f}#level3[0]"
    assert [c.problem for c in loaded.candidates] == ["level1_task1"]
    assert loaded.candidates[0].score == {}


def test_json_that_is_not_a_cuda_l1_release_raises(tmp_path):
    f = write(tmp_path / "config.json", json.dumps({"lr": 0.1}))
    with pytest.raises(ProblemFormatError, match="not a CUDA-L1 release file"):
        load_source(f)


def test_cuda_l1_with_no_valid_reference_raises(tmp_path):
    f = write(tmp_path / "bad.jsonl", json.dumps(_cuda_l1_record(1, 1, NOT_A_PROBLEM, CUSTOM)) + "\n")
    with pytest.raises(ProblemFormatError, match="no KernelBench problems found"):
        load_source(f)


# ----------------------------------------------------------------------------- summaries


def test_problem_summary_is_json_ready(tmp_path, monkeypatch):
    monkeypatch.setenv("HERCULES_CACHE_DIR", str(tmp_path / "cache"))
    f = write(tmp_path / "gemm.py", problem_code(metadata={"level": 1, "dtype": "bfloat16", "tier": "single_op"}))
    [p] = load_source(f).problems
    summary = problem_summary(p)
    assert json.loads(json.dumps(summary)) == summary
    assert summary == {
        "name": "gemm",
        "level": 1,
        "problem_id": None,
        "source": str(f),
        "dtype": "bfloat16",
        "hash": p.content_hash,
        "tier": "single_op",
        "degenerate_problem": None,  # never evaluated on this machine
    }
    assert len(summary["hash"]) == 16


def test_problem_summary_shows_what_evaluations_found_about_ignored_inputs(tmp_path, monkeypatch):
    from hercules.problems import degenerate

    cache = tmp_path / "cache"
    monkeypatch.setenv("HERCULES_CACHE_DIR", str(cache))
    constant = load_source(write(tmp_path / "c.py", problem_code("torch.zeros_like(x)"))).problems[0]
    plain = load_source(write(tmp_path / "p.py", problem_code("x + 1"))).problems[0]
    found = {"ignored_inputs": ["input 0 (x, (4, 4):float32)"], "constant_output": True, "ignored_bytes": 64}
    degenerate.record(cache, constant.content_hash, found)  # as an evaluation does (stage_oracle)
    degenerate.record(cache, plain.content_hash, None)
    assert problem_summary(constant)["degenerate_problem"] == found
    assert problem_summary(plain)["degenerate_problem"] is False


def test_problem_summary_reports_cuda_l1_candidates(cuda_l1_file):
    summaries = [problem_summary(p) for p in load_source(cuda_l1_file).problems]
    assert [s["has_candidate"] for s in summaries] == [True, False, False, False]
    assert all(s["dtype"] == "float32" for s in summaries)
    json.dumps(summaries)  # must not raise
    assert {s["name"] for s in summaries} == {"level1_task1", "level1_task2", "level2_task1", "level2_task8"}
