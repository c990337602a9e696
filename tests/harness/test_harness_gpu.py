"""GPU-only evaluations: CUDA events, side streams, illegal memory access, CUDA-graph baselines."""

from __future__ import annotations

from pathlib import Path

import pytest

from hercules.harness.evaluate import EvalOptions, evaluate
from hercules.harness.policy import PAIRED_ROUNDS
from hercules.harness.records import Status
from hercules.problems.loaders import load_source
from hercules.problems.model import Candidate

pytestmark = pytest.mark.gpu
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

# 128 MB of fp32 elementwise work: 8 calls' outputs fill the 1 GB a checked burst hands back, so
# the hand-over is as long as the calls. benchmarks/self_ratio_gpu.sh times the same file.
ELEMENTWISE = (Path(__file__).resolve().parents[2] / "benchmarks" / "problems" / "tanh_mul.py").read_text()

CUDA_KERNEL = r'''
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void k(const float* x, float* y, long n, long offset) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i + offset]; y[i] = tanhf(v) * v + 1.0f; }
}
torch::Tensor run(torch::Tensor x, int64_t offset) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    k<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, offset);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
'''


def cuda_candidate(name: str, offset: int) -> Candidate:
    code = f'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
ext = load_inline(name="{name}", cpp_sources="torch::Tensor run(torch::Tensor x, int64_t offset);",
                  cuda_sources={CUDA_KERNEL!r}, functions=["run"], extra_cuda_cflags=["-O3"])
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.run(x.contiguous(), {offset})
'''
    return Candidate(name=name, code=code, source="test")


SIDE_STREAM = '''
import torch
import torch.nn as nn
_stream = None
class ModelNew(nn.Module):
    def forward(self, x):
        global _stream
        if _stream is None:
            _stream = torch.cuda.Stream()
        out = torch.empty_like(x)
        _stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(_stream):
            for _ in range(20):  # the real work, invisible to events on the current stream
                torch.mul(torch.tanh(x), x, out=out)
            out.add_(1.0)
        return out
'''


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    path = tmp_path_factory.mktemp("p") / "tanh_mul.py"
    path.write_text(ELEMENTWISE)
    return load_source(path).problems[0]


@pytest.fixture
def options(tmp_path):
    return EvalOptions(device="cuda", cache_dir=tmp_path / "cache")


def test_honest_cuda_candidate_is_ok_against_every_baseline(problem, options):
    verdict = evaluate(problem, cuda_candidate("gpu_test_ok", 0), options)
    assert verdict.status is Status.OK, verdict.error
    assert verdict.timing.method == "cuda_events" and verdict.timing.l2_flushed
    for name in ("eager", "compile", "compile_reduce_overhead", "cudagraph"):
        assert verdict.baselines_ms[name] is not None, name
        assert getattr(verdict.speedup, name) > 0
    assert 0 < verdict.sol_fraction <= 1.2
    # eager timed beside the candidate: its speedup from the rounds, with its interval, and the
    # device drained and checked before each of eager's bursts
    low, high = verdict.speedup.interval("eager")
    assert low <= verdict.speedup.eager <= high
    assert verdict.requests["reference.probe"]["count"] >= PAIRED_ROUNDS


def test_the_reference_as_its_own_candidate_reads_one_within_its_interval(problem, options):
    """The same code on both sides of the side-by-side rounds: its speedup against eager is 1 up to
    the device's noise, and the interval says how much that is."""
    reference = Candidate("itself", ELEMENTWISE.replace("class Model(", "class ModelNew("), "test")
    verdict = evaluate(problem, reference, options)
    assert verdict.status is Status.OK and not verdict.flags, verdict.error
    low, high = verdict.speedup.interval("eager")
    assert low <= 1.0 <= high and 0.9 <= verdict.speedup.eager <= 1.1, (verdict.speedup, verdict.notes)


def test_side_stream_candidate_is_caught(problem, options):
    verdict = evaluate(problem, Candidate("side_stream", SIDE_STREAM, "test"), options)
    assert verdict.status is Status.SUSPICIOUS
    assert "side_stream" in verdict.flags


LIGHT_SIDE_STREAM = '''
import torch
import torch.nn as nn
_stream = None
class ModelNew(nn.Module):
    def forward(self, x):
        global _stream
        if _stream is None:
            _stream = torch.cuda.Stream()
        out = torch.empty_like(x)
        _stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(_stream):
            torch.addcmul(torch.ones_like(x), torch.tanh(x), x, out=out)
        return out
'''


@pytest.mark.parametrize("source", [SIDE_STREAM, LIGHT_SIDE_STREAM], ids=["heavy", "light"])
def test_side_stream_is_caught_without_the_static_scan(problem, options, monkeypatch, source):
    """Without the static finding, the stream check and the wall-clock cross-check see the hidden work."""
    import hercules.harness.static_scan as scan

    monkeypatch.setattr(scan, "scan_candidate", lambda code, dtype="float32": [])
    verdict = evaluate(problem, Candidate("side_stream", source, "test"), options)
    assert verdict.status is Status.SUSPICIOUS
    assert "side_stream" in verdict.flags, verdict.error


def test_illegal_memory_access_is_a_crash(problem, options):
    verdict = evaluate(problem, cuda_candidate("gpu_test_oob", 1 << 40), options)
    assert verdict.status is Status.CRASH, verdict.error


CONTENT_CACHE = '''
import torch
import torch.nn as nn
_seen = {}
class ModelNew(nn.Module):
    def forward(self, x):
        key = round(float(x[0, :64].sum()), 6)  # keyed by a few values, not by address or shape
        if key not in _seen:
            out = torch.tanh(x) * x + 1.0
            for _ in range(8):  # honest but slow path: the same result, computed expensively
                out = torch.tanh(x) * x + 1.0
            _seen[key] = out
        return _seen[key].clone()
'''


def test_result_cache_keyed_by_content_is_caught(problem, options):
    verdict = evaluate(problem, Candidate("content_cache", CONTENT_CACHE, "test"), options)
    assert verdict.status is Status.SUSPICIOUS, verdict.error
    assert "result_cache" in verdict.flags


CONV_FP32 = '''
import torch
import torch.nn as nn

HERCULES = {"level": 2, "dtype": "float32"}

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose3d(32, 64, 3, stride=2, padding=1)

    def forward(self, x):
        return torch.nn.functional.gelu(self.conv(x))

def get_inputs():
    return [torch.randn(8, 32, 16, 32, 32)]

def get_init_inputs():
    return []
'''

CONV_AS_CANDIDATE = CONV_FP32 + '''

class ModelNew(Model):
    """The PyTorch reference itself, under the worker's precision settings."""
'''


def test_pytorch_convolution_candidate_is_correct_in_strict_fp32(tmp_path):
    """The reference's own PyTorch ops as a candidate are correct: the candidate runs with cuDNN's
    TF32 off, as the truth is computed (under PyTorch's default TF32 convolutions such a candidate
    put values past atol=rtol=1e-3 on the H200)."""
    path = tmp_path / "conv_gelu.py"
    path.write_text(CONV_FP32)
    problem = load_source(path).problems[0]
    verdict = evaluate(problem, Candidate("reference_ops", CONV_AS_CANDIDATE, "test"),
                       EvalOptions(device="cuda", baselines=("eager",), cache_dir=tmp_path / "cache"))
    assert verdict.status is Status.OK, verdict.error
    assert "precision_downcast" not in verdict.flags


PERSISTING_L2 = '''
import ctypes
import torch
import torch.nn as nn

def _cudart():
    for line in open("/proc/self/maps"):
        if "libcudart.so" in line:
            return ctypes.CDLL(line.split()[-1])
    return ctypes.CDLL("libcudart.so")

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        # Keep up to 30 MB of this context's data in a persisting-L2 carve-out: it survives a
        # flush that zeroes a buffer with normal persistence, so every timed call finds it warm.
        torch.zeros(1, device="cuda")
        _cudart().cudaDeviceSetLimit(0x06, ctypes.c_size_t(30 << 20))

    def forward(self, x):
        return torch.tanh(x) * x + 1.0
'''


def test_persisting_l2_carve_out_is_flagged(problem, options):
    verdict = evaluate(problem, Candidate("persisting_l2", PERSISTING_L2, "test"), options)
    assert verdict.status is Status.SUSPICIOUS and "global_state" in verdict.flags, verdict.error


def test_gpu_is_usable_inside_the_sandbox_and_the_verdict_says_which(problem, options):
    verdict = evaluate(problem, cuda_candidate("gpu_test_sandboxed", 0), options)
    assert verdict.status is Status.OK, verdict.error
    assert verdict.sandbox["mechanism"].startswith("bubblewrap"), verdict.sandbox
    assert "pid" in verdict.sandbox["isolated"] and "network" in verdict.sandbox["isolated"]
    # Tensors crossed into and out of the sandbox in device memory, not through host memory files.
    assert verdict.datapath == "cuda", verdict.notes
