"""The oracle beyond one input distribution and the degenerate-problem floor, end to end on the
CPU through real worker processes (the decisions themselves: test_oracle.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hercules.harness.evaluate import EvalOptions, evaluate
from hercules.harness.oracle import TRANSFORM_NAMES
from hercules.harness.records import Status
from hercules.problems import degenerate
from hercules.problems.model import Candidate, Problem

CORPUS = Path(__file__).resolve().parents[1] / "adversarial"

# KernelBench level 2 #83 in small: min(x, 0) clamped to [0, 1] is zero whatever x and the weights.
CONSTANT = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3)

    def forward(self, x):
        x = self.conv(x)
        x = torch.min(x, torch.tensor(0.0, device=x.device))
        return torch.clamp(x, min=0.0, max=1.0)


def get_inputs():
    return [torch.rand(8, 3, 32, 32)]


def get_init_inputs():
    return [8]
'''

# Two inputs, the second never read.
IGNORES_Y = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(64, 256), torch.randn(64, 1024)]


def get_init_inputs():
    return []
'''


# Index outputs: argmax over rows of randn (no ties there).
ARGMAX = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.argmax(x, dim=-1)


def get_inputs():
    return [torch.randn(64, 512)]


def get_init_inputs():
    return []
'''

# Honest, but breaks ties by the last index where torch takes the first.
ARGMAX_LAST = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return (x.shape[-1] - 1) - torch.argmax(torch.flip(x, dims=[-1]), dim=-1)
'''


CONV_BN = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c_in, c_out, k):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, k)
        self.bn = nn.BatchNorm2d(c_out)

    def forward(self, x):
        return self.bn(self.conv(x))


def get_inputs():
    return [torch.randn(4, 8, 16, 16)]


def get_init_inputs():
    return [8, 16, 3]
'''

# Honest: the inference batch norm folded into the convolution's weights in the constructor.
CONV_BN_FOLDED = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, c_in, c_out, k):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, k)
        self.bn = nn.BatchNorm2d(c_out)
        with torch.no_grad():
            scale = self.bn.weight / torch.sqrt(self.bn.running_var + self.bn.eps)
            self.register_buffer("w", self.conv.weight * scale[:, None, None, None])
            self.register_buffer("b", (self.conv.bias - self.bn.running_mean) * scale + self.bn.bias)

    def forward(self, x):
        return F.conv2d(x, self.w, self.b)
'''

# Not honest: folds in the batch norm's default statistics, ignoring the module's own.
CONV_BN_DEFAULTS = CONV_BN_FOLDED.replace(
    "scale = self.bn.weight / torch.sqrt(self.bn.running_var + self.bn.eps)",
    "scale = torch.ones(c_out) / torch.sqrt(torch.ones(c_out) + self.bn.eps)").replace(
    "(self.conv.bias - self.bn.running_mean) * scale + self.bn.bias", "self.conv.bias * scale")


def _problem(name: str, code: str) -> Problem:
    return Problem(name=name, code=code, source="test")


def _as_candidate(code: str, name: str = "reference_as_candidate") -> Candidate:
    return Candidate(name=name, code=code.replace("class Model(", "class ModelNew("), source="test")


def _corpus(path: str) -> Candidate:
    return Candidate(name=Path(path).stem, code=(CORPUS / path).read_text(), source=path)


def _corpus_problem(name: str) -> Problem:
    return Problem(name=name, code=(CORPUS / "problems" / f"{name}.py").read_text(), source=name)


@pytest.fixture
def options(tmp_path):
    return EvalOptions(device="cpu", baselines=("eager",), timing_budget_s=0.05, warmup_s=0.01,
                       run_timeout_s=60, cache_dir=tmp_path / "cache")


# KernelBench level 1 #15 in small, and a candidate that uses what the problem guarantees (CUDA-L1's
# fallback for it): only the lower blocks of the product, each summed over the band that can be
# non-zero, in another order than the reference's.
TRIANGULAR = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, A, B):
        return torch.tril(torch.matmul(A, B))


def get_inputs():
    return [torch.tril(torch.randn(384, 384)), torch.tril(torch.randn(384, 384))]


def get_init_inputs():
    return []
'''

TRIANGULAR_BLOCKS = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        n, block = A.shape[0], 128
        C = torch.zeros_like(A)
        for j in range(0, n, block):
            for i in range(j, n, block):
                C[i:i + block, j:j + block] = A[i:i + block, j:i + block] @ B[j:i + block, j:j + block]
        return torch.tril(C)
'''


def test_a_kernel_relying_on_the_inputs_structure_is_judged_on_transforms_that_keep_it(options):
    verdict = evaluate(_problem("triangular", TRIANGULAR), Candidate(name="triangular_blocks", code=TRIANGULAR_BLOCKS, source="test"),
                       replace(options, time_candidate=False))
    assert verdict.status is Status.OK and verdict.flags == (), (verdict.error, verdict.check.transforms)
    assert verdict.check.transforms == tuple(f"{n}: passed" for n in TRANSFORM_NAMES)


def test_a_constant_output_problem_is_degenerate_and_its_floor_is_the_output_write(options):
    problem = _problem("constant", CONSTANT)
    verdict = evaluate(problem, _as_candidate(CONSTANT), options)
    assert verdict.status is Status.OK and verdict.flags == (), verdict.error
    found = verdict.degenerate_problem
    assert found is not None and found.constant_output
    assert found.ignored_inputs == ("input 0 (x, (8, 3, 32, 32):float32)",)
    assert any(n.startswith("degenerate problem") for n in verdict.notes)
    output_bytes = 8 * 8 * 30 * 30 * 4
    assert verdict.sol["min_bytes"] == output_bytes  # neither the input nor the weights
    assert verdict.sol_fraction is None or verdict.sol_fraction <= 1
    # Kept for ``hercules list`` (problem_summary) under the evaluation's cache root.
    assert degenerate.known(problem.content_hash, options.cache_dir)["constant_output"] is True


def test_an_ignored_input_is_named_and_left_out_of_the_floor(options):
    verdict = evaluate(_problem("ignores_y", IGNORES_Y), _as_candidate(IGNORES_Y), options)
    assert verdict.status is Status.OK and verdict.flags == (), verdict.error
    found = verdict.degenerate_problem
    assert found is not None and not found.constant_output
    assert found.ignored_inputs == ("input 1 (y, (64, 1024):float32)",) and found.ignored_bytes == 64 * 1024 * 4
    assert verdict.sol["min_bytes"] == 2 * 64 * 256 * 4  # x read, the output written; y not
    # Every transform is meaningful for a ReLU, and the reference as its own candidate passes all.
    assert verdict.check.transforms == tuple(f"{n}: passed" for n in TRANSFORM_NAMES)


def test_a_problem_whose_outputs_use_every_input_is_not_degenerate(options):
    verdict = evaluate(_corpus_problem("softmax_rows"), _corpus("honest/softmax_rows_max.py"),
                       replace(options, time_candidate=False))
    assert verdict.status is Status.OK and verdict.flags == (), verdict.error
    assert verdict.degenerate_problem is None
    assert verdict.check.transforms == tuple(f"{n}: passed" for n in TRANSFORM_NAMES)


def test_softmax_without_max_subtraction_is_fragile_and_kernelbench_tolerance_skips_the_oracle(options):
    problem, exploit = _corpus_problem("softmax_rows"), _corpus("exploits/softmax_no_max.py")
    strict = evaluate(problem, exploit, replace(options, time_candidate=False))
    assert strict.status is Status.SUSPICIOUS and strict.flags == ("fragile_inputs",), strict.error
    assert "scale_x100" in strict.error and "NaN/Inf" in strict.error
    assert "scale_x100: failed" in strict.check.transforms
    upstream = evaluate(problem, exploit, replace(options, time_candidate=False, tolerance="kernelbench"))
    assert upstream.status is Status.OK and upstream.flags == () and upstream.check.transforms == ()


def test_a_layernorm_that_ignores_weight_and_bias_is_wrong_with_perturbed_parameters(options):
    problem = _corpus_problem("layernorm_rows")
    copy = evaluate(problem, _corpus("exploits/layernorm_copy.py"), replace(options, time_candidate=False))
    assert copy.status is Status.INCORRECT and copy.error.startswith("trial 0:")
    assert copy.check.transforms == ("parameters: failed",)
    assert any("default initialisation" in n for n in copy.notes)
    honest = evaluate(problem, _corpus("honest/layernorm_rows_twopass.py"), replace(options, time_candidate=False))
    assert honest.status is Status.OK and honest.flags == (), honest.error
    assert honest.check.transforms[0] == "parameters: passed"
    # At upstream's tolerance the parameters keep their defaults, and the copy passes as upstream would.
    upstream = evaluate(problem, _corpus("exploits/layernorm_copy.py"),
                        replace(options, time_candidate=False, tolerance="kernelbench"))
    assert upstream.status is Status.OK and upstream.check.transforms == ()


def test_an_argmax_that_breaks_ties_its_own_way_is_not_judged_on_transforms_that_make_ties(options):
    verdict = evaluate(_problem("argmax", ARGMAX), Candidate(name="last", code=ARGMAX_LAST, source="test"),
                       replace(options, time_candidate=False))
    assert verdict.status is Status.OK and verdict.flags == (), verdict.error
    assert verdict.check.transforms == ("scale_x100: passed", "scale_x0.01: passed", "shift: skipped",
                                        "zeros: skipped", "extremes: skipped")
    assert any("integer outputs" in n for n in verdict.notes)


def test_weights_derived_in_the_constructor_come_from_the_moved_parameters(options):
    """Parameters move where they are made, so a batch norm folded into the convolution in the
    constructor is folded from the same values the reference's forward uses (moved after
    construction, this honest candidate was incorrect); folding in the defaults instead is wrong."""
    problem = _problem("conv_bn", CONV_BN)
    folded = evaluate(problem, Candidate("folded", CONV_BN_FOLDED, "test"), replace(options, time_candidate=False))
    assert folded.status is Status.OK and folded.flags == (), folded.error
    assert folded.check.transforms[0] == "parameters: passed"
    defaults = evaluate(problem, Candidate("defaults", CONV_BN_DEFAULTS, "test"), replace(options, time_candidate=False))
    assert defaults.status is Status.INCORRECT and defaults.check.transforms == ("parameters: failed",)
