"""benchmarks/kernelbench.py: the stratified sample, references rewritten as candidates, and the
three cheapest problems evaluated end to end on the CPU (every reference must come out clean)."""

from __future__ import annotations

import importlib.util
import io
import json
import re
import sys
import tokenize
import warnings
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "kernelbench.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("kernelbench_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


kb = _load_script()
CORPUS = kb.DEFAULT_CORPUS
pytestmark = pytest.mark.skipif(not (CORPUS / "level1").is_dir(), reason=f"no KernelBench corpus at {CORPUS}")


def _ids(files: list[Path], level: int) -> list[int]:
    return [kb.problem_id(f) for f in files if f.parent.name == f"level{level}"]


def test_sample_takes_twenty_per_level_by_the_documented_rule():
    files = kb.sample(CORPUS)
    assert len(files) == 60 and len(set(files)) == 60
    # The corpus numbers every level 1..N, so position floor(i * N / 20) is id floor(i * N / 20) + 1.
    assert _ids(files, 1) == [5 * i + 1 for i in range(20)]
    assert _ids(files, 2) == [5 * i + 1 for i in range(20)]
    assert _ids(files, 3) == [i * 50 // 20 + 1 for i in range(20)]
    assert _ids(files, 3)[-1] == 48  # the whole of level 3 is covered, not only its first 40
    assert "floor(i * N / 20)" in kb.__doc__


def test_sample_is_deterministic_and_numeric_not_lexical():
    assert kb.sample(CORPUS) == kb.sample(Path(str(CORPUS)))
    level1 = kb.level_files(CORPUS, 1)
    assert [kb.problem_id(f) for f in level1] == list(range(1, 101))
    assert [kb.problem_id(f) for f in kb.sample(CORPUS, per_level=4, levels=(1,))] == [1, 26, 51, 76]


def test_spread_covers_the_list_evenly():
    items = [Path(f"{i}_x.py") for i in range(7)]
    assert kb.spread(items, 3) == [items[0], items[2], items[4]]
    assert kb.spread(items, 10) == items


def _names(code: str) -> list[str]:
    return [t.string for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type == tokenize.NAME]


def test_every_corpus_reference_rewrites_to_model_new():
    files = kb.every_problem(CORPUS)
    assert len(files) == 250
    for f in files:
        code = f.read_text()
        new = kb.as_candidate_source(code)
        compile(new, str(f), "exec")
        assert "class ModelNew(" in new, f.name
        assert "Model" not in _names(new), f.name  # no class, call or super(Model, self) left
        assert _names(new).count("ModelNew") == _names(code).count("Model"), f.name
    # Docstrings keep their words; only names change.
    text = kb.as_candidate_source((CORPUS / "level2" / "70_Gemm_Sigmoid_Scaling_ResidualAdd.py").read_text())
    assert "Model implementing" in text and "super(ModelNew, self)" in text


@pytest.mark.parametrize("name", ["level1/1_Square_matrix_multiplication_.py", "level3/8_ResNetBasicBlock.py",
                                  "level3/43_MinGPTCausalAttention.py", "level2/70_Gemm_Sigmoid_Scaling_ResidualAdd.py"])
def test_rewritten_reference_builds_its_model_new(name: str):
    namespace: dict = {"__name__": "rewritten"}
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        exec(compile(kb.as_candidate_source((CORPUS / name).read_text()), name, "exec"), namespace)
        model = namespace["ModelNew"](*namespace["get_init_inputs"]())
        assert "Model" not in namespace
        model(*namespace["get_inputs"]())


def test_footprint_counts_inputs_weights_outputs_and_flops():
    diag = kb.footprint(CORPUS / "level1" / "12_Matmul_with_diagonal_matrices_.py", forward=True)
    assert (diag.input_bytes, diag.weight_bytes, diag.output_bytes) == (4 * 4096 + 4 * 4096 * 4096, 0, 4 * 4096 * 4096)
    # Eight megabytes in, four gigabytes out: why inputs alone do not rank by cost.
    tall = kb.footprint(CORPUS / "level1" / "9_Tall_skinny_matrix_multiplication_.py", forward=True)
    assert tall.input_bytes == 8 * 2**20 and tall.output_bytes == 4 * 2**30 and tall.flops == 2 * 32 * 32768**2


# The three smallest took 47-53 s in CI (~12 s choosing them, the rest their evaluations); the
# smallest alone keeps the whole path (choice, run folder, summary) in CI and the three run on demand.
@pytest.mark.slow
@pytest.mark.parametrize("count", [1, pytest.param(3, marks=pytest.mark.ondemand)])
def test_smallest_references_are_ok_with_no_flag_on_cpu(count: int, tmp_path: Path, capsys):
    run_dir = tmp_path / "run"
    code = kb.main(["--corpus", str(CORPUS), "--smallest", str(count), "--device", "cpu", "--baselines", "eager",
                    "--budget", "0.05", "--trials", "2", "--run-dir", str(run_dir)])
    assert code == 0
    printed = capsys.readouterr().out
    # "footprint level3/32_X.py: work 88362464, ...": the chosen ones, cheapest first.
    chosen = re.findall(r"^footprint level\d/(\S+)\.py: work (\d+),", printed, flags=re.M)
    works = [int(work) for _name, work in chosen]
    assert len(chosen) == count and works == sorted(works)
    summary = json.loads((run_dir / "kernelbench_summary.json").read_text())
    assert (run_dir / "kernelbench_summary.md").is_file()
    assert sorted(v["problem"] for v in summary["verdicts"]) == sorted(name for name, _work in chosen)
    assert summary["not_clean"] == [], json.dumps(summary["not_clean"])
    for v in summary["verdicts"]:
        assert v["status"] == "ok" and v["flags"] == [], v
        assert v["problem"] in printed  # one line per verdict, as it arrived
    assert summary["all"]["ok_no_flag"] == count and summary["phases"]
