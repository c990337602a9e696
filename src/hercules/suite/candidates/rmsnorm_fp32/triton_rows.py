"""Triton candidate: RMSNorm with each row held in registers (one read of x, one write).

The kernel normalises ROWS rows per program: 1 on the GPU (4096 programs, one row of 2048 fp32
per program), many under the CPU interpreter, whose cost is per program.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_rows, n_cols, eps,
                    ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    row_mask = rows < n_rows
    col_mask = cols < n_cols
    mask = row_mask[:, None] & col_mask[None, :]
    offsets = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    mean_sq = tl.sum(x * x, axis=1) / n_cols
    inv_rms = 1.0 / tl.sqrt(mean_sq + eps)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    y = x * inv_rms[:, None] * w[None, :]
    tl.store(out_ptr + offsets, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))

    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        n_rows = x.numel() // n_cols
        out = torch.empty_like(x)
        block_n = triton.next_power_of_2(n_cols)
        rows = 1 if x.is_cuda else 512
        _rmsnorm_kernel[(triton.cdiv(n_rows, rows),)](
            x, self.weight, out, n_rows, n_cols, self.eps,
            ROWS=rows, BLOCK_N=block_n, num_warps=8,
        )
        return out
