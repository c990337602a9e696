"""Triton candidate: rotary embedding in one pass. Each program rotates ROWS (position, head)
rows: it reads both halves of x and the matching cos/sin rows once, computes in fp32 and writes
bf16 once, with no rotate_half copy.

INTERPRET is true only under the CPU interpreter (TRITON_INTERPRET=1), whose fp32 -> bf16
conversion truncates; ``_round_to`` then rounds to nearest even on the bits first, as the GPU's
conversion does by itself.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _round_to(x, dtype: tl.constexpr, INTERPRET: tl.constexpr):
    """fp32 -> dtype with round-to-nearest-even. The GPU's conversion already rounds; the CPU
    interpreter's truncates, so there the rounding is done on the bits first."""
    if INTERPRET:
        if dtype == tl.bfloat16:
            bits = x.to(tl.uint32, bitcast=True)
            bits = bits + 0x7FFF + ((bits >> 16) & 1)
            x = bits.to(tl.float32, bitcast=True)
    return x.to(dtype)


@triton.jit
def _rope_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, n_rows, seq, head_dim, half,
                 ROWS: tl.constexpr, BLOCK_H: tl.constexpr, INTERPRET: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid.to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_H)
    mask = (rows < n_rows)[:, None] & (cols < half)[None, :]
    pos = rows % seq
    x_lo = x_ptr + rows[:, None] * head_dim + cols[None, :]
    t_lo = pos[:, None] * head_dim + cols[None, :]
    x1 = tl.load(x_lo, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_lo + half, mask=mask, other=0.0).to(tl.float32)
    c1 = tl.load(cos_ptr + t_lo, mask=mask, other=0.0).to(tl.float32)
    c2 = tl.load(cos_ptr + t_lo + half, mask=mask, other=0.0).to(tl.float32)
    s1 = tl.load(sin_ptr + t_lo, mask=mask, other=0.0).to(tl.float32)
    s2 = tl.load(sin_ptr + t_lo + half, mask=mask, other=0.0).to(tl.float32)
    o_lo = out_ptr + rows[:, None] * head_dim + cols[None, :]
    ty = out_ptr.dtype.element_ty
    tl.store(o_lo, _round_to(x1 * c1 - x2 * s1, ty, INTERPRET), mask=mask)
    tl.store(o_lo + half, _round_to(x2 * c2 + x1 * s2, ty, INTERPRET), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, cos, sin):
        x = x.contiguous()
        seq, head_dim = x.shape[-2], x.shape[-1]
        cos = cos.expand(seq, head_dim).contiguous()
        sin = sin.expand(seq, head_dim).contiguous()
        out = torch.empty_like(x)
        n_rows = x.numel() // head_dim
        half = head_dim // 2
        rows = 32 if x.is_cuda else 8192
        grid = (triton.cdiv(n_rows, rows),)
        _rope_kernel[grid](x, cos, sin, out, n_rows, seq, head_dim, half,
                           ROWS=rows, BLOCK_H=triton.next_power_of_2(half), INTERPRET=not x.is_cuda,
                           num_warps=4)
        return out
