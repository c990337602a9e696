"""A compiled baseline is compiled ahead by ``baseline_compile`` (the parent holds no section of the
device for it) and ``baseline_prepare`` takes that very function: no compilation is left for the
sections where the device is held, and a release forgets it."""

from __future__ import annotations

import pytest
import torch

from hercules.harness import baselines
from hercules.harness.checks import DEFAULT_TOLERANCES
from hercules.harness.worker import ReferenceWorker


def ask(worker, op: str, message: dict):
    """One request to a worker object in this process, as its pipe would deliver it (typed, checked)."""
    from hercules.harness.requests import REQUESTS, parse
    from hercules.harness.worker import handler_for

    return handler_for(worker, REQUESTS[op])(parse({"op": op, **message}), [])

PROBLEM = """
import torch, torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 3 + 1

def get_inputs():
    return [torch.randn(64, 128)]

def get_init_inputs():
    return []
"""


def _worker(device: str) -> ReferenceWorker:
    worker = ReferenceWorker()
    ask(worker, "setup", {"device": device, "dtype": "float32", "tolerance": DEFAULT_TOLERANCES["float32"].__dict__,
                     "code": PROBLEM, "init_seed": 1})
    return worker


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_prepare_takes_the_function_compiled_ahead_and_compiles_nothing_more(device, monkeypatch):
    if device == "cpu":
        # Dynamo's tracing without Inductor's C++ build: what is checked is which function is used.
        real = torch.compile
        monkeypatch.setattr(torch, "compile", lambda model, **kw: real(model, backend="eager"))
    torch.compiler.reset()
    from torch._dynamo.utils import counters

    worker = _worker(device)
    ask(worker, "baseline_compile", {"name": "compile", "seed": 3})
    compiled = worker.compiled["compile"]
    frames = counters["stats"]["unique_graphs"]
    assert frames >= 1
    ask(worker, "baseline_prepare", {"name": "compile", "seeds": [3, 4, 5]})
    assert worker.baselines["compile"][0] is compiled and "compile" not in worker.compiled
    assert counters["stats"]["unique_graphs"] == frames  # the other sets hit the same graph
    ask(worker, "release", {"name": "compile"})
    assert "compile" not in worker.baselines


def test_only_compiled_baselines_are_compiled_ahead():
    worker = _worker("cpu")
    with pytest.raises(ValueError, match="not a compiled baseline"):
        ask(worker, "baseline_compile", {"name": "eager", "seed": 3})
    assert baselines.COMPILED <= set(baselines.BASELINES)
