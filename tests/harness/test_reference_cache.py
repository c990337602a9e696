"""The reference worker's sets on the device: bounded by count and by bytes, the set in use always
kept, every set of the latest fresh pass kept for its comparison, an evicted set regenerated
identically from its seed, and a device that runs out of memory retried once with the cache
emptied."""

from __future__ import annotations

import os

import pytest
import torch

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
        return torch.sigmoid(x) * 2

def get_inputs():
    return [torch.randn(256, 1024)]  # 1 MiB in, 1 MiB out, 2 MiB of float64 truth

def get_init_inputs():
    return []
"""


def _worker(fraction: float) -> ReferenceWorker:
    worker = ReferenceWorker()
    worker.CACHE_FRACTION = fraction
    ask(worker, "setup", {"device": "cpu", "dtype": "float32", "tolerance": DEFAULT_TOLERANCES["float32"].__dict__,
                     "code": PROBLEM, "init_seed": 1})
    return worker


def test_within_the_budget_at_most_keep_sets_are_kept():
    worker = _worker(0.5)
    for seed in range(5):
        ask(worker, "specs", {"seed": seed})
    assert list(worker.inputs) == [2, 3, 4] and list(worker.expected) == [2, 3, 4]


def test_over_the_byte_budget_only_the_set_in_use_is_kept_and_an_evicted_one_comes_back_the_same():
    worker = _worker(0.5)
    first = ask(worker, "specs", {"seed": 11})
    kept = worker.inputs[11][0].clone()
    small = _worker(1e-12)  # a budget smaller than one set
    for seed in (11, 12, 13):
        ask(small, "specs", {"seed": seed})
        assert list(small.inputs) == [seed] and list(small.expected) == [seed]
    again = ask(small, "specs", {"seed": 11})
    assert torch.equal(small.inputs[11][0], kept)
    assert again["specs"] == first["specs"] and again["ref_errs"] == first["ref_errs"]


def test_out_of_memory_is_retried_once_with_the_cache_emptied():
    worker = _worker(0.5)
    for seed in (1, 2):
        ask(worker, "specs", {"seed": seed})
    calls = []

    def make():
        calls.append(len(worker.inputs))
        if len(calls) == 1:
            raise torch.OutOfMemoryError("out of memory")
        return "made"

    assert worker._on_device(make, keep_seed=2) == "made"
    assert calls == [2, 1] and list(worker.inputs) == [2]


def test_the_sets_of_the_latest_pass_are_all_kept_each_made_once_and_counted_by_bytes():
    worker = _worker(0.5)
    worker.medium = "memfd"
    made = []
    get_inputs = worker.module.get_inputs
    worker.module.get_inputs = lambda: made.append(1) or get_inputs()
    seeds = [20, 21, 22, 23, 24, 25, 20, 21]  # a calibration goes round a few seeds
    reply = ask(worker, "inputs_many", {"seeds": seeds})
    os.close(reply["_fds"][0])
    assert len(made) == 6 and list(worker.inputs) == [20, 21, 22, 23, 24, 25]
    assert worker._cached_bytes() == 6 * 256 * 1024 * 4
    for seed in (30, 31, 32):  # a smaller pass: the older sets go, oldest first, down to this pass's size
        ask(worker, "inputs_many", {"seeds": [seed]})
    assert list(worker.inputs) == [30, 31, 32] and worker._cached_bytes() == 3 * 256 * 1024 * 4


LINEAR = """
import torch, torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return a @ b, torch.softmax(a, dim=-1)

def get_inputs():
    return [torch.randn(64, 96), torch.randn(96, 32)]

def get_init_inputs():
    return []
"""


def test_on_a_transformed_set_atol_grows_with_the_references_rounding_noise_least_grown_output_first():
    worker = ReferenceWorker()
    tol = DEFAULT_TOLERANCES["float32"]
    ask(worker, "setup", {"device": "cpu", "dtype": "float32", "tolerance": tol.__dict__, "code": LINEAR,
                          "init_seed": 1})
    ask(worker, "specs", {"seed": 5})  # a trial's set: the outputs' own scale
    assert worker._tolerance_for(5, worker._expected(5)) == worker.tol
    grown = {}
    for seed, name in ((6, "scale_x100"), (7, "scale_x0.01")):
        ask(worker, "transform_check", {"seed": seed, "transform": name})
        grown[name] = worker._tolerance_for(seed, worker._expected(seed)).atol / tol.atol
    # The product's rounding noise grows 1e4 times, the softmax's beside it not: the least grown decides.
    assert grown["scale_x100"] < 10 and grown["scale_x0.01"] == 1.0
    worker = ReferenceWorker()
    ask(worker, "setup", {"device": "cpu", "dtype": "float32", "tolerance": tol.__dict__,
                          "code": LINEAR.replace(", torch.softmax(a, dim=-1)", ""), "init_seed": 1})
    ask(worker, "specs", {"seed": 5})
    ask(worker, "transform_check", {"seed": 6, "transform": "scale_x100"})
    assert 1e3 < worker._tolerance_for(6, worker._expected(6)).atol / tol.atol < 1e5  # x100 twice: ~1e4
    ask(worker, "transform_check", {"seed": 7, "transform": "scale_x0.01"})
    assert worker._tolerance_for(7, worker._expected(7)).atol == tol.atol  # never tighter than the trials'


def test_on_a_transformed_set_atol_grows_as_far_as_the_output_grew_where_its_noise_grew_less():
    """A bias-dominated output (KernelBench level 2 #50's shape): on inputs x100 the reference's
    own noise grows 2.7x while the values grow 50x; another summation order's error grows with
    the values, so the atol does too. The least grown output still decides."""
    worker = ReferenceWorker()
    tol = DEFAULT_TOLERANCES["float32"]
    ask(worker, "setup", {"device": "cpu", "dtype": "float32", "tolerance": tol.__dict__, "code": LINEAR,
                          "init_seed": 1})
    worker.transformed[9] = "scale_x100"
    worker.plain_scales, worker.plain_magnitudes = [1e-7], [1.0]
    grown = worker._tolerance_for(9, {"scales": [2.7e-7], "magnitudes": [50.0]}).atol / tol.atol
    assert grown == pytest.approx(50.0)
    assert worker._tolerance_for(9, {"scales": [2.7e-7], "magnitudes": [0.5]}).atol / tol.atol == pytest.approx(2.7)
    worker.plain_scales, worker.plain_magnitudes = [1e-7, 1e-7], [1.0, 1.0]
    both = worker._tolerance_for(9, {"scales": [2.7e-7, 1e-7], "magnitudes": [50.0, 1.0]}).atol / tol.atol
    assert both == pytest.approx(1.0)  # the other output grew neither way
