"""Triton candidate: one kernel computes the gate and up products for the same output tile
(sharing every load of x) and writes silu(gate) * up, so neither (1024, 2048) intermediate is
ever stored. bf16 inputs, fp32 accumulation.

INTERPRET is true only under the CPU interpreter (TRITON_INTERPRET=1, CPU tensors), which has
gaps worked around here without changing the maths: its ``tl.dot`` multiplies bf16 tiles as raw
uint16 bit patterns (so tiles are widened to fp32 first, which is exact) and its fp32 -> bf16
conversion truncates (so ``_round_to`` rounds to nearest even on the bits first). On the GPU the
dots run on bf16 tensor cores and the conversions are the hardware's.
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
def _swiglu_kernel(x_ptr, wg_ptr, wu_ptr, out_ptr, M, N, K: tl.constexpr,
                   stride_xm, stride_xk, stride_wn, stride_wk, stride_om, stride_on,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_M: tl.constexpr, INTERPRET: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_offs = offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):  # static trip count (K is constexpr): the CPU interpreter with NumPy >= 2.4 cannot loop to a run-time bound
        k_left = K - k * BLOCK_K
        w_mask = (offs_k[:, None] < k_left) & (offs_n[None, :] < N)
        a = tl.load(x_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        g = tl.load(wg_ptr + w_offs, mask=w_mask, other=0.0)
        u = tl.load(wu_ptr + w_offs, mask=w_mask, other=0.0)
        if INTERPRET:
            a32 = a.to(tl.float32)
            acc_g = tl.dot(a32, g.to(tl.float32), acc_g, input_precision="ieee")
            acc_u = tl.dot(a32, u.to(tl.float32), acc_u, input_precision="ieee")
        else:
            acc_g = tl.dot(a, g, acc_g, out_dtype=tl.float32)
            acc_u = tl.dot(a, u, acc_u, out_dtype=tl.float32)
        x_ptrs += BLOCK_K * stride_xk
        w_offs += BLOCK_K * stride_wk
    # The reference rounds both products to the model dtype before the gate; do the same.
    gate = _round_to(acc_g, out_ptr.dtype.element_ty, INTERPRET).to(tl.float32)
    up = _round_to(acc_u, out_ptr.dtype.element_ty, INTERPRET).to(tl.float32)
    y = gate / (1.0 + tl.exp(-gate)) * up
    out_ptrs = out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on
    tl.store(out_ptrs, _round_to(y, out_ptr.dtype.element_ty, INTERPRET), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, ffn, bias=False)
        self.up_proj = nn.Linear(hidden, ffn, bias=False)

    def forward(self, x):
        wg, wu = self.gate_proj.weight, self.up_proj.weight
        x2 = x.reshape(-1, x.shape[-1])
        M, K = x2.shape
        N = wg.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        if x.is_cuda:
            bm, bn, bk, warps, stages = 128, 64, 64, 8, 3
        else:
            bm, bn, bk, warps, stages = 256, 256, 256, 4, 1
        grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
        _swiglu_kernel[grid](
            x2, wg, wu, out, M, N, K,
            x2.stride(0), x2.stride(1), wg.stride(0), wg.stride(1), out.stride(0), out.stride(1),
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, INTERPRET=not x.is_cuda,
            num_warps=warps, num_stages=stages,
        )
        return out.reshape(*x.shape[:-1], N)
