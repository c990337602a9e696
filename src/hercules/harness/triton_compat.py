"""Corrections to Triton's CPU interpreter (TRITON_INTERPRET=1), applied in worker processes.

Triton 3.6's interpreter stores bfloat16 as raw uint16 bit patterns: ``tl.dot`` on bf16 tiles
multiplies the bit patterns (relative error ~1e9 on random data), and fp32 -> bf16 casts
truncate instead of rounding to nearest-even as the GPU does. Honest bf16 Triton kernels would
fail on the CPU for reasons that are not theirs; these two corrections make the interpreter
compute what the GPU computes. (Its runtime-bounded loops also need numpy < 2.4: see pyproject.)
"""

from __future__ import annotations

import os

import numpy as np


def _bf16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _float32_to_bf16_bits(values: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + (0x7FFF + ((bits >> 16) & 1))) >> 16).astype(np.uint16)
    return np.where(np.isnan(values), np.uint16(0x7FC0), rounded)


def apply() -> bool:
    """Patch the interpreter when it is in use; returns whether anything was patched."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except Exception:
        return False
    builder = interpreter.InterpreterBuilder
    original_dot = builder.create_dot
    original_cast = builder.cast_impl

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.dtype.scalar == tl.bfloat16 or b.dtype.scalar == tl.bfloat16:
            a_data = _bf16_bits_to_float32(a.data) if a.dtype.scalar == tl.bfloat16 else a.data
            b_data = _bf16_bits_to_float32(b.data) if b.dtype.scalar == tl.bfloat16 else b.data
            result = np.matmul(a_data.astype(np.float32), b_data.astype(np.float32)).astype(d.data.dtype)
            return interpreter.TensorHandle(result + d.data, d.dtype.scalar)
        return original_dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return interpreter.TensorHandle(_float32_to_bf16_bits(src.data), dst_type.scalar)
        return original_cast(self, src, dst_type)

    builder.create_dot = create_dot
    builder.cast_impl = cast_impl
    for name in ("create_fp_trunc", "create_fp_ext", "create_si_to_fp", "create_ui_to_fp", "create_fp_to_si",
                 "create_fp_to_ui"):
        setattr(builder, name, lambda self, src, dst_type: self.cast_impl(src, dst_type))
    return True
