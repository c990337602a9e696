"""Triton candidate: a tiled bf16 GEMM (fp32 accumulation, one rounding to bf16 at the end) with
grouped tile order for L2 reuse; on Hopper Triton lowers ``tl.dot`` to wgmma with a pipelined
shared-memory ring, so this is expected to be close to cuBLAS rather than far ahead of it.

INTERPRET is true only under the CPU interpreter (TRITON_INTERPRET=1, CPU tensors), which has
gaps worked around here without changing the maths: its ``tl.dot`` multiplies bf16 tiles as raw
uint16 bit patterns (so tiles are widened to fp32 first, which is exact) and its fp32 -> bf16
conversion truncates (so ``_round_to`` rounds to nearest even on the bits first).
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
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K: tl.constexpr,
                   stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
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
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):  # static trip count (K is constexpr): the CPU interpreter with NumPy >= 2.4 cannot loop to a run-time bound
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        if INTERPRET:
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc, out_dtype=tl.float32)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, _round_to(acc, c_ptr.dtype.element_ty, INTERPRET),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        M, K = a.shape
        K2, N = b.shape
        assert K == K2, "inner dimensions differ"
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        if a.is_cuda:
            bm, bn, bk, warps, stages = 128, 256, 64, 8, 3
        else:  # CPU interpreter: few, large programs
            bm, bn, bk, warps, stages = 256, 256, 256, 4, 1
        grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
        _matmul_kernel[grid](
            a, b, c, M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, INTERPRET=not a.is_cuda,
            num_warps=warps, num_stages=stages,
        )
        return c
