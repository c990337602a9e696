"""Optimisation techniques read from a variant's code (for the report; heuristics, not proofs).

Each tag is a pattern over the source text, except ``algebraic_rewrite``, which compares the
PyTorch calls of a candidate without a custom kernel against the reference's: a different set of
operations computing the same result is a rewrite of the maths (e.g. ``F.mish`` for
``x * tanh(softplus(x))``, or ``addmm`` for ``matmul + add``).
"""

from __future__ import annotations

import ast
import re

from hercules import pyparse

_PATTERNS: dict[str, tuple[str, ...]] = {
    "custom_cuda_kernel": (r"load_inline\s*\(", r"__global__", r"cpp_extension"),
    "triton_kernel": (r"@triton\.jit", r"@triton\.autotune"),
    "cuda_graphs": (r"torch\.cuda\.graph\b", r"CUDAGraph\s*\(", r"make_graphed_callables", r"reduce-overhead"),
    "torch_compile": (r"torch\.compile\s*\(",),
    "shared_memory_tiling": (r"__shared__", r"extern\s+__shared__"),
    "warp_primitives": (r"__shfl_\w*sync", r"cooperative_groups", r"__reduce_\w+_sync"),
    "vectorized_memory": (r"\bfloat4\b", r"\bhalf2\b", r"__nv_bfloat162\b", r"\b__ldg\s*\(", r"reinterpret_cast<\s*(const\s+)?float[24]"),
    "tensor_cores": (r"\bwmma::", r"\bmma\.sync", r"tl\.dot\s*\(", r"\bcublasLt\b"),
    "memory_layout": (r"channels_last", r"memory_format\s*=", r"\.contiguous\(\)", r"\.permute\(", r"as_strided"),
    "library_call": (r"cublas\w*\(", r"cudnn\w*\(", r"scaled_dot_product_attention", r"\bat::(matmul|mm|bmm|addmm)\b"),
    "in_place": (r"\.[a-z]\w*[a-z0-9]_\(", r"inplace\s*=\s*True", r"\bout\s*=\s*\w"),
    "reduced_precision": (r"\.half\(\)", r"float16", r"bfloat16", r"autocast", r"allow_tf32"),
}

# Fused kernels in PyTorch itself: one call where the reference spells out several ops.
_FUSED_CALLS = ("addmm", "baddbmm", "addcmul", "addcdiv", "mish", "silu", "gelu", "layer_norm", "rms_norm",
                "scaled_dot_product_attention", "log_softmax", "logsumexp", "fused")
# Operations that, seen twice or more inside one custom kernel body, mean fused work.
_KERNEL_OPS = (r"exp[f]?\s*\(", r"tanh[f]?\s*\(", r"log[f1p]*\s*\(", r"sqrt[f]?\s*\(|rsqrt", r"max[f]?\s*\(",
               r"__shfl|atomicAdd|tl\.sum|tl\.max", r"\bfma[f]?\s*\(|tl\.dot", r"sigmoid|erf")


def _torch_calls(code: str) -> set[str]:
    """Names of the torch / F / tensor-method calls in the code ("softplus", "tanh", "sum", ...)."""
    try:
        tree = pyparse.parse(code)
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            names.add(node.func.attr)
    return names - {"__init__", "super", "get_inputs", "get_init_inputs", "append", "items", "keys", "values"}


def _fused_calls(code: str) -> set[str]:
    return {name for name in _FUSED_CALLS if re.search(rf"\b{name}\s*\(", code)}


def _fusion(code: str, custom: bool, reference_code: str) -> bool:
    """Several operations inside one custom kernel, or a fused PyTorch call the reference lacks."""
    if custom:
        return sum(1 for p in _KERNEL_OPS if re.search(p, code)) >= 2
    return bool(_fused_calls(code) - _fused_calls(reference_code))


def technique_tags(code: str, reference_code: str = "") -> tuple[str, ...]:
    tags = [tag for tag, patterns in _PATTERNS.items() if any(re.search(p, code) for p in patterns)]
    custom = "custom_cuda_kernel" in tags or "triton_kernel" in tags
    if _fusion(code, custom, reference_code):
        tags.append("fusion")
    if not custom and reference_code:
        ours, theirs = _torch_calls(code), _torch_calls(reference_code)
        if ours and ours != theirs:
            tags.append("algebraic_rewrite")
    return tuple(sorted(set(tags)))
