"""The memory check before an evaluation (``footprint.check_memory``): from shapes alone, on the meta
device, sized against this host's own available memory so that the cases hold on any machine."""

from __future__ import annotations

from hercules.problems.footprint import available_bytes, check_memory, evaluation_bytes, footprint

PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn({rows}, 1024)]

def get_init_inputs():
    return []
"""


def _relu_of(total_bytes: int) -> str:
    """A float32 ReLU whose input (and so its output) takes about ``total_bytes``."""
    return PROBLEM.format(rows=max(1, total_bytes // (4 * 1024)))


def _host() -> int:
    have = available_bytes("cpu")
    assert have is not None, "this host's available memory cannot be read"
    return have[0]


def test_an_evaluation_that_cannot_fit_with_its_truth_and_the_candidates_copy_is_warned_of_with_numbers():
    code = _relu_of(_host() // 3)  # inputs and outputs fit together, not with their copies
    found = footprint(code, "relu_third", forward=True, count_flops=False)
    # the reference's inputs and outputs, their float64 copies (twice each), the candidate's own
    assert evaluation_bytes(found) == 2 * found.input_bytes + 2 * found.output_bytes + 2 * (
        found.input_bytes + found.output_bytes)
    check = check_memory(code, "relu_third", "cpu")
    assert check.refusal is None
    assert check.warning is not None and "relu_third" in check.warning and "most likely run out of memory" in check.warning
    assert f"{found.input_bytes / 1e9:.1f} GB" in check.warning and "float64 copies" in check.warning


def test_a_forward_whose_inputs_and_outputs_alone_exceed_the_host_is_refused_counting_the_outputs():
    code = _relu_of(_host() * 6 // 10)  # either alone fits, the two together do not
    check = check_memory(code, "relu_sixty_percent", "cpu")
    assert check.refusal is not None and "outputs (" in check.refusal and "host memory available" in check.refusal
    assert check.warning is None


def test_a_small_problem_passes_without_a_meta_forward_and_a_broken_one_is_not_judged():
    assert check_memory(_relu_of(1 << 20), "relu_small", "cpu") == check_memory("raise ValueError", "broken", "cpu")
    assert check_memory(_relu_of(1 << 20), "relu_small", "cpu").refusal is None
    assert check_memory(_relu_of(1 << 20), "relu_small", "cpu").warning is None
