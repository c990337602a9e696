"""Triton candidate: Mish in one elementwise pass with a single exp per element.

tanh(softplus(x)) = ((1 + e^x)^2 - 1) / ((1 + e^x)^2 + 1) = t / (t + 2) with t = e^x (e^x + 2).
For x > 20 PyTorch's softplus returns x, and t / (t + 2) rounds to 1 in fp32 there, so clamping
the exponent at 20 avoids overflow without changing the result.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mish_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    e = tl.exp(tl.minimum(x, 20.0))
    t = e * (e + 2.0)
    y = x * (t / (t + 2.0))
    tl.store(out_ptr + offsets, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        # On the GPU 4096 elements per program; under the CPU interpreter (cost per program) 1M.
        block = 4096 if x.is_cuda else 1 << 20
        _mish_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block, num_warps=8)
        return out
