"""Which maintained kernels compute which problem's operation, and how each is called.

A problem names its operation (``HERCULES = {"expert": "rms_norm"}``); each operation lists the
implementations that compute exactly it, read from the problem's own Model (its weights, its eps).
The reference worker builds every implementation the environment offers, checks it against the
float64 truth, and keeps the fastest correct one as the ``expert`` baseline (``choose.py``). An
implementation whose library is missing, or that refuses the device, is reported unavailable with
the reason; one that computes something else (an approximated GELU, another casting rule) is
reported incorrect and not used.

Entry points, as of liger-kernel 0.8.5 and torch 2.11-2.13: ``liger_kernel.transformers.functional``
(``liger_rms_norm``, ``liger_fused_add_rms_norm``, ``liger_layer_norm``, ``liger_softmax``,
``liger_cross_entropy``, ``liger_swiglu``, ``liger_rope``), PyTorch's own ``rms_norm``, ``layer_norm``,
``softmax``, ``cross_entropy`` and SiLU-times-up, and
``scaled_dot_product_attention`` as PyTorch dispatches it and under ``torch.nn.attention.sdpa_kernel``
for one backend, and
cuBLASLt's GELU epilogue through ``torch._addmm_activation``.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

Kernel = Callable[..., Any]


@dataclass(frozen=True)
class Implementation:
    name: str  # "liger.rms_norm"
    distribution: str  # the installed distribution whose version is reported
    entry: str  # what is called
    make: Callable[[torch.nn.Module], Kernel]  # imports inside: ImportError means unavailable
    triton: bool = False  # Triton kernels: on the CPU they run under the (slow) interpreter

    def version(self) -> str | None:
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None


def _liger(name: str) -> Any:
    from liger_kernel.transformers import functional

    return getattr(functional, name)


def _norm_params(model: torch.nn.Module) -> tuple[torch.Tensor, float]:
    return model.weight, float(model.eps)


def _torch_rms_norm(model):
    weight, eps = _norm_params(model)
    return lambda x: F.rms_norm(x, (weight.shape[-1],), weight, eps)


def _liger_rms_norm(model):
    weight, eps = _norm_params(model)
    fn = _liger("liger_rms_norm")
    return lambda x: fn(x, weight, eps, in_place=False)


def _torch_add_rms_norm(model):
    weight, eps = _norm_params(model)
    return lambda x, residual: F.rms_norm(x + residual, (weight.shape[-1],), weight, eps)


def _liger_add_rms_norm(model):
    weight, eps = _norm_params(model)
    fn = _liger("liger_fused_add_rms_norm")
    return lambda x, residual: fn(x, residual, weight, eps, in_place=False)[0]


def _liger_layer_norm(model):
    norm = model.norm
    fn = _liger("liger_layer_norm")
    return lambda x: fn(x, norm.weight, norm.bias, norm.eps)


def _torch_layer_norm(model):
    norm = model.norm
    return lambda x: F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)


def _torch_softmax(model):
    return lambda x: torch.softmax(x, dim=-1)


def _torch_cross_entropy(reduction: str):
    def make(model):
        return lambda logits, targets: F.cross_entropy(logits, targets, reduction=reduction)

    return make


def _torch_swiglu(model):
    gate, up = model.gate_proj, model.up_proj
    return lambda x: F.silu(gate(x)) * up(x)


def _torch_mish(model):
    return lambda x: F.mish(x)


def _torch_matmul(model):
    return lambda a, b: torch.matmul(a, b)


def _torch_logsumexp(model):
    return lambda x: torch.logsumexp(x, dim=-1)


def _torch_row_sum(model):
    return lambda x: torch.sum(x, dim=-1)


def _liger_softmax(model):
    fn = _liger("liger_softmax")
    return lambda x: fn(x)


def _liger_cross_entropy(reduction: str):
    def make(model):
        fn = _liger("liger_cross_entropy")
        return lambda logits, targets: fn(logits, targets, reduction=reduction)

    return make


def _liger_swiglu(model):
    fn = _liger("liger_swiglu")
    gate, up = model.gate_proj, model.up_proj
    return lambda x: fn(gate(x), up(x))


def _liger_rope_one_tensor(model):
    # liger_rope rotates q and k together, in place on contiguous (batch, seq, heads, dim) copies of
    # the (batch, heads, seq, dim) tensors it is given. The problem rotates one tensor: it goes in
    # as q, and its first head as k, the smallest k the kernel takes (1/heads more work).
    fn = _liger("liger_rope")
    return lambda x, cos, sin: fn(x, x[:, :1], cos, sin)[0]


def _torch_gelu_tanh(model):
    return lambda x: F.gelu(x, approximate="tanh")


def _sdpa(backend_name: str, causal: bool):
    def make(model):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, backend_name)

        def attention(q, k, v):
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        return attention

    return make


_SDPA_BACKENDS = (("flash", "FLASH_ATTENTION"), ("cudnn", "CUDNN_ATTENTION"), ("efficient", "EFFICIENT_ATTENTION"))


def _sdpa_default(causal: bool):
    def make(model):
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return make


def _sdpa_implementations(causal: bool) -> tuple[Implementation, ...]:
    # PyTorch's own dispatch beside each pinned backend: pinning costs a context manager per call,
    # which shows on short attentions.
    return (Implementation("torch.sdpa", "torch",
                           f"torch.nn.functional.scaled_dot_product_attention(is_causal={causal})",
                           _sdpa_default(causal)),) + tuple(
        Implementation(f"torch.sdpa.{label}", "torch",
                       f"torch.nn.functional.scaled_dot_product_attention(is_causal={causal}), SDPBackend.{backend}",
                       _sdpa(backend, causal))
        for label, backend in _SDPA_BACKENDS
    )


def _addmm_gelu(model):
    linear = model.linear
    # cuBLASLt applies GELU in the GEMM's epilogue: one kernel instead of GEMM + activation.
    return lambda x: torch._addmm_activation(linear.bias, x, linear.weight.t(), use_gelu=True)


OPS: dict[str, tuple[Implementation, ...]] = {
    "rms_norm": (
        Implementation("torch.rms_norm", "torch", "torch.nn.functional.rms_norm", _torch_rms_norm),
        Implementation("liger.rms_norm", "liger-kernel", "liger_kernel.transformers.functional.liger_rms_norm",
                       _liger_rms_norm, triton=True),
    ),
    "add_rms_norm": (
        Implementation("torch.rms_norm", "torch", "torch.nn.functional.rms_norm(x + residual)", _torch_add_rms_norm),
        Implementation("liger.fused_add_rms_norm", "liger-kernel",
                       "liger_kernel.transformers.functional.liger_fused_add_rms_norm", _liger_add_rms_norm, triton=True),
    ),
    # PyTorch's own kernel is listed beside each library's wherever one computes the operation: an
    # expert slower than eager would make "vs expert" flatter a candidate (on the H200 Liger's
    # layer_norm read 0.102 ms where torch's reads 0.035, its cross_entropy 0.205 ms against
    # eager's 0.132: it computes the gradient in the forward pass).
    "layer_norm": (
        Implementation("torch.layer_norm", "torch", "torch.nn.functional.layer_norm", _torch_layer_norm),
        Implementation("liger.layer_norm", "liger-kernel", "liger_kernel.transformers.functional.liger_layer_norm",
                       _liger_layer_norm, triton=True),
    ),
    "softmax_rows": (
        Implementation("torch.softmax", "torch", "torch.softmax(dim=-1)", _torch_softmax),
        Implementation("liger.softmax", "liger-kernel", "liger_kernel.transformers.functional.liger_softmax",
                       _liger_softmax, triton=True),
    ),
    "cross_entropy_rows": (
        Implementation("torch.cross_entropy", "torch", "torch.nn.functional.cross_entropy(reduction='none')",
                       _torch_cross_entropy("none")),
        Implementation("liger.cross_entropy", "liger-kernel",
                       "liger_kernel.transformers.functional.liger_cross_entropy(reduction='none')",
                       _liger_cross_entropy("none"), triton=True),
    ),
    "swiglu_mlp": (
        Implementation("torch.swiglu", "torch", "torch.nn.functional.silu(gate(x)) * up(x)", _torch_swiglu),
        Implementation("liger.swiglu", "liger-kernel",
                       "liger_kernel.transformers.functional.liger_swiglu on the two projections", _liger_swiglu, triton=True),
    ),
    "causal_attention": _sdpa_implementations(causal=True),
    "attention": _sdpa_implementations(causal=False),
    "cross_entropy_mean": (
        Implementation("torch.cross_entropy", "torch", "torch.nn.functional.cross_entropy(reduction='mean')",
                       _torch_cross_entropy("mean")),
        Implementation("liger.cross_entropy", "liger-kernel",
                       "liger_kernel.transformers.functional.liger_cross_entropy(reduction='mean')",
                       _liger_cross_entropy("mean"), triton=True),
    ),
    # Llama's apply_rotary_pos_emb for one (batch, heads, seq, dim) tensor, cos and sin of (seq, dim):
    # PyTorch has no kernel of its own for it (eager is the problem's five operations).
    "rotary_half": (
        Implementation("liger.rope", "liger-kernel",
                       "liger_kernel.transformers.functional.liger_rope(x, x[:, :1], cos, sin)[0]",
                       _liger_rope_one_tensor, triton=True),
    ),
    "gelu_tanh": (
        Implementation("torch.gelu_tanh", "torch", "torch.nn.functional.gelu(approximate='tanh')", _torch_gelu_tanh),
    ),
    # Where PyTorch's own kernel is the maintained implementation (cuBLAS for a GEMM, its fused
    # Mish, its reductions), it is the expert: "vs expert" then says how a candidate stands
    # against the library kernel, even where eager already calls it.
    "mish": (Implementation("torch.mish", "torch", "torch.nn.functional.mish", _torch_mish),),
    "matmul": (Implementation("torch.matmul", "torch", "torch.matmul (cuBLAS on CUDA)", _torch_matmul),),
    "logsumexp_rows": (Implementation("torch.logsumexp", "torch", "torch.logsumexp(dim=-1)", _torch_logsumexp),),
    "row_sum": (Implementation("torch.sum", "torch", "torch.sum(dim=-1)", _torch_row_sum),),
    "linear_gelu": (
        # On CUDA the GEMM with cuBLASLt's GELU epilogue; on the CPU torch's own addmm + GELU.
        Implementation("torch.addmm_gelu", "torch", "torch._addmm_activation(use_gelu=True)", _addmm_gelu),
    ),
}


def implementations(op: str) -> tuple[Implementation, ...]:
    try:
        return OPS[op]
    except KeyError:
        raise ValueError(f"unknown expert operation {op!r} (known: {', '.join(sorted(OPS))})") from None


def versions(op: str) -> dict[str, str | None]:
    """The installed version of each distribution the operation's implementations come from."""
    return {impl.distribution: impl.version() for impl in implementations(op)}


# KernelBench files carry no HERCULES dict: the problems a library implements exactly, by level and
# file name (upstream's numbering). Each is still checked against the problem's float64 truth.
# Not mapped, because the library kernel computes something else: 36_RMSNorm_ and 40_LayerNorm
# (they normalise over dimension 1 / the last three dimensions; the kernels over the last one),
# 26_GELU_ (eager already is torch's one GELU kernel).
KERNELBENCH: dict[tuple[int, str], str] = {
    (1, "23_Softmax.py"): "softmax_rows",  # softmax over dim 1 of a 2-D input: its last dimension
    (1, "88_MinGPTNewGelu.py"): "gelu_tanh",  # the tanh approximation written out in five ops
    (1, "95_CrossEntropyLoss.py"): "cross_entropy_mean",
    (1, "97_ScaledDotProductAttention.py"): "attention",
}


def kernelbench_op(level: int | None, file_name: str) -> str | None:
    """The expert operation of a KernelBench file, where one is mapped."""
    return KERNELBENCH.get((level, file_name)) if level is not None else None
