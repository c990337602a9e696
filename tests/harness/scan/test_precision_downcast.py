"""The precision_downcast rule (``hercules.harness.scan.precision_downcast``): narrower types than the
problem's, judged against the problem's dtype.

Each FIRES snippet makes the rule, run alone, raise its flag outright; each CLEAN snippet
sits close to the rule without meeting it, and the whole scan finds nothing in it.
"""

from __future__ import annotations

import pytest
from scan_helpers import assert_clean, assert_fires

from hercules.harness.scan import scan_candidate
from hercules.harness.scan.precision_downcast import PrecisionDowncast


FIRES = {
    "allow_tf32": ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n", "precision_downcast"),
    "cudnn_tf32": ("import torch\ntorch.backends.cudnn.allow_tf32 = True\n", "precision_downcast"),
    "precision_high": ("import torch\ntorch.set_float32_matmul_precision('high')\n", "precision_downcast"),
    "precision_medium": ("import torch\ntorch.set_float32_matmul_precision(precision='medium')\n", "precision_downcast"),
    "autocast": ("import torch\ndef f(a):\n    with torch.autocast('cuda'):\n        return a @ a\n", "precision_downcast"),
    "cuda_amp_autocast": ("import torch\n@torch.cuda.amp.autocast()\ndef f(a):\n    return a @ a\n", "precision_downcast"),
    "amp_autocast_decorator": ("from torch.amp import autocast\n@autocast\ndef f(a):\n    return a\n", "precision_downcast"),
    "half": ("def f(a):\n    return a.half()\n", "precision_downcast"),
    "bfloat16": ("def f(a):\n    return a.bfloat16()\n", "precision_downcast"),
    "to_half": ("import torch\ndef f(a):\n    return a.to(torch.half)\n", "precision_downcast"),
    "to_bf16_kw": ("import torch\ndef f(a):\n    return a.to(device=a.device, dtype=torch.bfloat16)\n", "precision_downcast"),
    "dtype_kw": ("import torch\nw = torch.empty(4, dtype=torch.float16)\n", "precision_downcast"),
    "dtype_variable": ("import torch\nDT = torch.float16\ndef f(a):\n    return a.to(DT)\n", "precision_downcast"),
    "fp8": ("import torch\ndef f(a):\n    return a.to(torch.float8_e4m3fn)\n", "precision_downcast"),
    "tl_dot_default": ("import triton.language as tl\ndef k(a, b):\n    return tl.dot(a, b)\n", "precision_downcast"),
    "tl_dot_tf32": ("import triton.language as tl\ndef k(a, b):\n    return tl.dot(a, b, input_precision='tf32')\n",
                    "precision_downcast"),
    "tl_dot_allow_tf32": ("import triton.language as tl\ndef k(a, b):\n    return tl.dot(a, b, allow_tf32=True)\n",
                          "precision_downcast"),
    "tl_to_fp16": ("import triton.language as tl\ndef k(a):\n    return a.to(tl.float16)\n", "precision_downcast"),
    "cpp_half": ('src = """__global__ void k(const __half* x, float* y) {}"""\n', "precision_downcast"),
    "cpp_half2": ('src = """__global__ void k(float* y) { half2 v; }"""\n', "precision_downcast"),
    "cpp_bf16": ('src = """__global__ void k(__nv_bfloat16* y) {}"""\n', "precision_downcast"),
    "cpp_khalf": ('src = """torch::Tensor f(torch::Tensor x) { return x.to(torch::kHalf); }"""\n', "precision_downcast"),
    "cpp_tf32_math": ('src = """cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH);"""\n', "precision_downcast"),
    "cpp_ptx_f16": ('src = """asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 ...");"""\n',
                    "precision_downcast"),
    "env_tf32_override": ("import os\nos.environ['TORCH_ALLOW_TF32_CUBLAS_OVERRIDE'] = '1'\n", "precision_downcast"),
}


@pytest.mark.parametrize("case", sorted(FIRES))
def test_rule_fires(case):
    code, flag = FIRES[case]
    assert flag == PrecisionDowncast.flag.value
    assert_fires(code, PrecisionDowncast)


CLEAN = {
    "tl_dot_ieee": ("import triton.language as tl\ndef k(a, b, acc):\n    acc = tl.dot(a, b, acc, input_precision='ieee')\n"
                    "    return tl.dot(a, b, allow_tf32=False)\n", "float32"),
    "bf16_problem_half_types": ('import torch\nsrc = """__global__ void k(__nv_bfloat16* y) { float v = __bfloat162float(y[0]); }"""\n'
                                "def f(x):\n    return x.to(torch.bfloat16)\n", "bfloat16"),
    "bf16_problem_tl_dot": ("import triton.language as tl\ndef k(a, b, acc):\n    return tl.dot(a, b, acc, out_dtype=tl.float32)\n",
                            "bfloat16"),
    "upcast": ("import torch\ndef f(x):\n    return x.float().to(torch.float32).double()\n", "float32"),
    "dtype_compare": ("import torch\ndef f(x):\n    assert x.dtype != torch.float16\n"
                      "    return torch.finfo(torch.float16).max\n", "float32"),
    "autocast_disabled": ("import torch\ndef f(a):\n    with torch.autocast('cuda', enabled=False):\n"
                          "        return a @ a\n", "float32"),
    "tf32_off": ("import torch\ndef f(x):\n    return torch.backends.cuda.matmul.allow_tf32\n", "float32"),
}


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_honest_pattern_is_clean(case):
    assert_clean(*CLEAN[case])


def _flags(code: str, dtype: str) -> set[str]:
    return {f.flag for f in scan_candidate(code, dtype)}


def test_precision_rules_follow_the_problem_dtype():
    half = "def f(a):\n    return a.half()\n"
    assert "precision_downcast" in _flags(half, "float32")
    assert "precision_downcast" in _flags(half, "torch.float32")
    assert "precision_downcast" in _flags("def f(a):\n    return a.float()\n", "float64")
    assert _flags("def f(a):\n    return a.float()\n", "float32") == set()
    assert _flags(half, "float16") == set()
    assert _flags("import triton.language as tl\ndef k(a, b):\n    return tl.dot(a, b)\n", "bfloat16") == set()
    assert "precision_downcast" in _flags("import torch\ndef f(a):\n    return a.to(torch.float8_e5m2)\n", "bfloat16")
