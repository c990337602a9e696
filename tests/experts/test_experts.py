"""The expert registry and the choice among implementations, with real kernels on the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hercules.experts.choose import choose, summary
from hercules.experts.registry import OPS, implementations, versions
from hercules.problems.loaders import load_source
from hercules.problems.model import ProblemFormatError

SUITE = Path(__file__).resolve().parents[2] / "src" / "hercules" / "suite" / "problems"


def _model(path: Path) -> tuple[torch.nn.Module, list[torch.Tensor]]:
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    torch.manual_seed(0)
    return namespace["Model"](*namespace["get_init_inputs"]()).eval(), namespace["get_inputs"]()


def _judge_against(model, inputs):
    with torch.no_grad():
        truth = model(*inputs)

    def judge(outputs):
        return None if torch.allclose(outputs, truth, atol=1e-5, rtol=1e-5) else "values differ"
    return judge


def test_every_suite_problem_naming_an_expert_names_a_known_operation():
    named = {}
    for path in sorted(SUITE.glob("*.py")):
        problem = load_source(path).problems[0]
        if "expert" in problem.metadata:
            named[path.stem] = problem.metadata["expert"]
    assert set(named.values()) <= set(OPS) and len(named) >= 13, named
    assert versions("rms_norm")["torch"] == torch.__version__


def test_an_unknown_expert_operation_is_refused_when_the_problem_loads(tmp_path, expert_problems):
    source = expert_problems["rmsnorm"].read_text().replace('"rms_norm"', '"rms_nrom"')
    (tmp_path / "p.py").write_text(source)
    with pytest.raises(ProblemFormatError, match="rms_nrom"):
        load_source(tmp_path / "p.py")
    with pytest.raises(ValueError, match="unknown expert operation"):
        implementations("rms_nrom")


def test_the_fastest_correct_implementation_is_chosen_and_every_other_says_why(expert_problems):
    model, inputs = _model(expert_problems["rmsnorm"])
    kernel, report = choose("rms_norm", model, [tuple(inputs)], _judge_against(model, inputs), lambda k: 1.0)
    assert kernel is not None and report["chosen"]["name"] in {i.name for i in implementations("rms_norm")}
    with torch.no_grad():
        assert torch.allclose(kernel(*inputs), model(*inputs), atol=1e-5, rtol=1e-5)
    statuses = {c["name"]: c["status"] for c in report["considered"]}
    assert set(statuses) == {i.name for i in implementations("rms_norm")}
    assert list(statuses.values()).count("chosen") == 1
    for c in report["considered"]:
        if c["status"] == "unavailable":  # e.g. liger-kernel not installed, or no GPU for its Triton kernels
            assert c["detail"], c
    assert "chosen" in summary(report)


def test_an_implementation_computing_something_else_is_not_used(expert_problems):
    model, inputs = _model(expert_problems["mismatch"])
    kernel, report = choose("rms_norm", model, [tuple(inputs)], _judge_against(model, inputs), lambda k: 1.0)
    assert kernel is None and report["chosen"] is None
    assert "torch.rms_norm incorrect" in summary(report)


SOFTMAX = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)

def get_inputs():
    return [torch.rand(16, 32)]

def get_init_inputs():
    return []
"""


def test_kernelbench_files_get_their_expert_from_the_documented_mapping(tmp_path):
    level1 = tmp_path / "level1"
    level1.mkdir()
    (level1 / "23_Softmax.py").write_text(SOFTMAX)
    (level1 / "24_LogSoftmax.py").write_text(SOFTMAX)
    mapped = load_source(level1 / "23_Softmax.py").problems[0]
    assert mapped.level == 1 and mapped.metadata["expert"] == "softmax_rows"
    assert "expert" not in load_source(level1 / "24_LogSoftmax.py").problems[0].metadata
    # Outside a KernelBench level folder the same file name maps to nothing.
    (tmp_path / "23_Softmax.py").write_text(SOFTMAX)
    assert "expert" not in load_source(tmp_path / "23_Softmax.py").problems[0].metadata


def test_on_the_cpu_a_triton_expert_is_not_tried_on_large_inputs(expert_problems):
    model, inputs = _model(expert_problems["rmsnorm"])
    large = (torch.randn(2048, 256),)  # 2 MB, over the interpreter bound
    _kernel, report = choose("rms_norm", model, [large], lambda outputs: None, lambda k: 1.0)
    liger = next(c for c in report["considered"] if c["name"] == "liger.rms_norm")
    assert liger["status"] == "unavailable" and "interpreted on the CPU" in liger["detail"]
    assert report["chosen"]["name"] == "torch.rms_norm"


SMALL_INPUTS = {  # the suite problems' own models on inputs small enough for the CPU
    "layernorm_bf16": lambda: [torch.randn(8, 2048)],
    "softmax_rows_fp32": lambda: [torch.randn(8, 64) * 4.0],
    "cross_entropy_fp32": lambda: [torch.randn(8, 64), torch.randint(0, 64, (8,))],
    "swiglu_bf16": lambda: [torch.randn(4, 1024)],
    "mish_fp32": lambda: [torch.randn(8, 64) * 3.0],
    "matmul_fp32": lambda: [torch.randn(8, 16), torch.randn(16, 4)],
    "matmul_bf16": lambda: [torch.randn(8, 16), torch.randn(16, 4)],
    "logsumexp_rows_bf16": lambda: [torch.randn(8, 64) * 3.0],
    "row_sum_fp32": lambda: [torch.randn(8, 64) + 0.25],
}


@pytest.mark.parametrize("stem", sorted(SMALL_INPUTS))
def test_every_operation_of_the_suite_lists_pytorchs_own_kernel_and_it_computes_the_problem(stem):
    """A library kernel slower than PyTorch's own would make "vs expert" flatter a candidate, so
    PyTorch's kernel stands beside it wherever one computes the operation."""
    path = SUITE / f"{stem}.py"
    op = load_source(path).problems[0].metadata["expert"]
    model, _ = _model(path)
    model = model.float()
    inputs = SMALL_INPUTS[stem]()
    torch_impl = next(i for i in implementations(op) if i.distribution == "torch")
    with torch.no_grad():
        assert torch.allclose(torch_impl.make(model)(*inputs), model(*inputs), atol=1e-5, rtol=1e-4)


def _host_bound(sleep_s: float):
    import time

    def kernel(x):
        time.sleep(sleep_s)  # host work between launches: what the flushed events do not see
        return x * 2
    return kernel


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_the_choice_time_counts_host_work_between_calls(device):
    from hercules.experts.choose import choice_time_ms

    sets = [(torch.randn(1024, device=device),)]
    slow = choice_time_ms(_host_bound(0.002), sets, torch.device(device))
    quick = choice_time_ms(_host_bound(0.0), sets, torch.device(device))
    assert slow >= 2.0 > quick, (slow, quick)


ROPE_CHECK = r"""
import json, sys, torch
from hercules.harness import triton_compat
triton_compat.apply()
from hercules.experts.registry import implementations
namespace = {}
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), namespace)
torch.manual_seed(0)
model = namespace["Model"]()
x = torch.randn(2, 4, 8, 16)
angles = torch.outer(torch.arange(8.0), 1.0 / (10000.0 ** (torch.arange(0, 16, 2) / 16.0)))
emb = torch.cat((angles, angles), dim=-1)
cos, sin = emb.cos(), emb.sin()
kept = x.clone()
(impl,) = implementations("rotary_half")
out = impl.make(model)(x, cos, sin)
print(json.dumps({"name": impl.name, "max_err": (out - model(x, cos, sin)).abs().max().item(),
                  "input_kept": bool(torch.equal(x, kept)), "shape": list(out.shape)}))
"""


def test_the_rotary_problem_names_liger_rope_and_it_computes_the_problem_out_of_place():
    """Under Triton's interpreter on small float32 shapes: liger_rope given the tensor as q and its
    first head as k rotates it as the problem does, and leaves the input as it was."""
    pytest.importorskip("liger_kernel")
    import json
    import os
    import subprocess
    import sys

    path = SUITE / "rotary_embedding_bf16.py"
    assert load_source(path).problems[0].metadata["expert"] == "rotary_half"
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(SUITE.parents[2]))
    proc = subprocess.run([sys.executable, "-c", ROPE_CHECK, str(path)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["name"] == "liger.rope" and found["shape"] == [2, 4, 8, 16] and found["input_kept"], found
    assert found["max_err"] < 1e-5, found
