"""Triton candidate for the decoder block: the same modules (so the same weights), with

- RMSNorm as one Triton pass (fp32 statistics, bf16 out);
- Q/K/V as one GEMM against the three weights concatenated per call, read in place by a causal
  flash-attention kernel through strides (no transposes, no score matrix in memory), which writes
  its output directly in the (batch, seq, heads, head_dim) layout the output projection reads;
- the attention residual add fused with the second RMSNorm (one kernel writes both the new
  residual stream and its normalised copy);
- gate and up projections as one dual-GEMM kernel applying silu(gate) * up in its epilogue;
- the down projection with the final residual add folded into the GEMM (``torch.addmm``).

INTERPRET is true only under the CPU interpreter (TRITON_INTERPRET=1, CPU tensors), which has
gaps worked around here without changing the maths: its ``tl.dot`` multiplies bf16 tiles as raw
uint16 bit patterns (tiles are widened to fp32 first, which is exact), its fp32 -> bf16
conversion truncates (``_round_to`` rounds to nearest even on the bits first), and with
NumPy >= 2.4 it cannot loop to a run-time bound (static trip counts, skipping tiles past the
diagonal). On the GPU the dots run on bf16 tensor cores.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _round_to(x, dtype: tl.constexpr, INTERPRET: tl.constexpr):
    """fp32 -> dtype with round-to-nearest-even (the CPU interpreter's own conversion truncates)."""
    if INTERPRET:
        if dtype == tl.bfloat16:
            bits = x.to(tl.uint32, bitcast=True)
            bits = bits + 0x7FFF + ((bits >> 16) & 1)
            x = bits.to(tl.float32, bitcast=True)
    return x.to(dtype)


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_rows, n_cols, eps,
                    ROWS: tl.constexpr, BLOCK_N: tl.constexpr, INTERPRET: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    offs = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, _round_to(x * inv[:, None] * w[None, :], out_ptr.dtype.element_ty, INTERPRET), mask=mask)


@triton.jit
def _add_rmsnorm_kernel(x_ptr, y_ptr, w_ptr, sum_ptr, norm_ptr, n_rows, n_cols, eps,
                        ROWS: tl.constexpr, BLOCK_N: tl.constexpr, INTERPRET: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    offs = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    s = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32) + tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s_low = _round_to(s, sum_ptr.dtype.element_ty, INTERPRET)  # the residual stream is stored in bf16
    tl.store(sum_ptr + offs, s_low, mask=mask)
    s = s_low.to(tl.float32)
    inv = 1.0 / tl.sqrt(tl.sum(s * s, axis=1) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(norm_ptr + offs, _round_to(s * inv[:, None] * w[None, :], norm_ptr.dtype.element_ty, INTERPRET), mask=mask)


@triton.jit
def _attend_tile(q, k_ptr, v_ptr, k_base, v_base, stride_ks, stride_vs, start_n, offs_m, offs_n, offs_d,
                 acc, l_i, m_i, seq, qk_scale_log2, INTERPRET: tl.constexpr):
    cols = start_n + offs_n
    kv_mask = cols[:, None] < seq
    k = tl.load(k_ptr + k_base + cols[:, None] * stride_ks + offs_d[None, :], mask=kv_mask, other=0.0)
    v = tl.load(v_ptr + v_base + cols[:, None] * stride_vs + offs_d[None, :], mask=kv_mask, other=0.0)
    if INTERPRET:
        s = tl.dot(q, tl.trans(k.to(tl.float32)), input_precision="ieee")
    else:
        s = tl.dot(q, tl.trans(k), out_dtype=tl.float32)
    s = s * qk_scale_log2
    s = tl.where((offs_m[:, None] >= cols[None, :]) & (cols[None, :] < seq), s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = acc * alpha[:, None]
    if INTERPRET:
        acc = tl.dot(p, v.to(tl.float32), acc, input_precision="ieee")
    else:
        acc = tl.dot(p.to(v.dtype), v, acc, out_dtype=tl.float32)
    return acc, l_i, m_new


@triton.jit
def _flash_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq, heads, qk_scale_log2,
                      stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
                      stride_vb, stride_vh, stride_vs, stride_ob, stride_oh, stride_os,
                      SEQ_PAD: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, INTERPRET: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // heads).to(tl.int64)
    h = (bh % heads).to(tl.int64)
    q_base = b * stride_qb + h * stride_qh
    k_base = b * stride_kb + h * stride_kh
    v_base = b * stride_vb + h * stride_vh
    o_base = b * stride_ob + h * stride_oh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + q_base + offs_m[:, None] * stride_qs + offs_d[None, :], mask=offs_m[:, None] < seq, other=0.0)
    if INTERPRET:
        q = q.to(tl.float32)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    hi = tl.minimum((start_m + 1) * BLOCK_M, seq)
    if INTERPRET:
        for start_n in range(0, SEQ_PAD, BLOCK_N):
            if start_n < hi:
                acc, l_i, m_i = _attend_tile(q, k_ptr, v_ptr, k_base, v_base, stride_ks, stride_vs, start_n,
                                             offs_m, offs_n, offs_d, acc, l_i, m_i, seq, qk_scale_log2, INTERPRET)
    else:
        for start_n in range(0, hi, BLOCK_N):
            acc, l_i, m_i = _attend_tile(q, k_ptr, v_ptr, k_base, v_base, stride_ks, stride_vs, start_n,
                                         offs_m, offs_n, offs_d, acc, l_i, m_i, seq, qk_scale_log2, INTERPRET)
    out = acc / l_i[:, None]
    tl.store(o_ptr + o_base + offs_m[:, None] * stride_os + offs_d[None, :],
             _round_to(out, o_ptr.dtype.element_ty, INTERPRET), mask=offs_m[:, None] < seq)


@triton.jit
def _swiglu_kernel(x_ptr, wg_ptr, wu_ptr, out_ptr, M, N, K: tl.constexpr,
                   stride_xm, stride_wn, stride_om,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_M: tl.constexpr, INTERPRET: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):  # static trip count (K is constexpr)
        k = kb * BLOCK_K + offs_k
        a = tl.load(x_ptr + offs_m[:, None] * stride_xm + k[None, :], mask=(offs_m[:, None] < M) & (k[None, :] < K), other=0.0)
        w_offs = k[:, None] + offs_n[None, :] * stride_wn
        w_mask = (k[:, None] < K) & (offs_n[None, :] < N)
        g = tl.load(wg_ptr + w_offs, mask=w_mask, other=0.0)
        u = tl.load(wu_ptr + w_offs, mask=w_mask, other=0.0)
        if INTERPRET:
            a32 = a.to(tl.float32)
            acc_g = tl.dot(a32, g.to(tl.float32), acc_g, input_precision="ieee")
            acc_u = tl.dot(a32, u.to(tl.float32), acc_u, input_precision="ieee")
        else:
            acc_g = tl.dot(a, g, acc_g, out_dtype=tl.float32)
            acc_u = tl.dot(a, u, acc_u, out_dtype=tl.float32)
    gate = _round_to(acc_g, out_ptr.dtype.element_ty, INTERPRET).to(tl.float32)
    up = _round_to(acc_u, out_ptr.dtype.element_ty, INTERPRET).to(tl.float32)
    y = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :], _round_to(y, out_ptr.dtype.element_ty, INTERPRET),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))


def _row_block(x):
    return 1 if x.is_cuda else 1024


class ModelNew(nn.Module):
    def __init__(self, dim, heads, ffn):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.attn_norm = RMSNorm(dim)
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)
        self.mlp_norm = RMSNorm(dim)
        self.gate_proj = nn.Linear(dim, ffn, bias=False)
        self.up_proj = nn.Linear(dim, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, dim, bias=False)

    def forward(self, x):
        bsz, seq, dim = x.shape
        heads, head_dim = self.heads, self.head_dim
        assert head_dim == triton.next_power_of_2(head_dim), "head_dim must be a power of two"
        interpret = not x.is_cuda
        x = x.contiguous()
        tokens = bsz * seq
        rows = _row_block(x)
        block_n = triton.next_power_of_2(dim)

        h = torch.empty_like(x)
        _rmsnorm_kernel[(triton.cdiv(tokens, rows),)](x, self.attn_norm.weight, h, tokens, dim, self.attn_norm.eps,
                                                     ROWS=rows, BLOCK_N=block_n, INTERPRET=interpret, num_warps=4)

        w_qkv = torch.cat((self.q_proj.weight, self.k_proj.weight, self.v_proj.weight), dim=0)
        qkv = F.linear(h, w_qkv).view(bsz, seq, 3, heads, head_dim)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # (b, s, h, d) views, no copies
        attn = torch.empty((bsz, seq, heads, head_dim), device=x.device, dtype=x.dtype)
        if x.is_cuda:
            bm, bn, warps, stages = 128, 64, 8, 3
        else:
            bm = bn = min(512, triton.next_power_of_2(seq))
            warps, stages = 4, 1
        _flash_fwd_kernel[(triton.cdiv(seq, bm), bsz * heads)](
            q, k, v, attn, seq, heads, (1.0 / math.sqrt(head_dim)) * 1.4426950408889634,
            q.stride(0), q.stride(2), q.stride(1), k.stride(0), k.stride(2), k.stride(1),
            v.stride(0), v.stride(2), v.stride(1), attn.stride(0), attn.stride(2), attn.stride(1),
            SEQ_PAD=triton.cdiv(seq, bn) * bn, HEAD_DIM=head_dim, BLOCK_M=bm, BLOCK_N=bn,
            INTERPRET=interpret, num_warps=warps, num_stages=stages,
        )
        attn_out = F.linear(attn.view(bsz, seq, dim), self.o_proj.weight)

        x1 = torch.empty_like(x)
        h2 = torch.empty_like(x)
        _add_rmsnorm_kernel[(triton.cdiv(tokens, rows),)](x, attn_out, self.mlp_norm.weight, x1, h2, tokens, dim,
                                                         self.mlp_norm.eps, ROWS=rows, BLOCK_N=block_n,
                                                         INTERPRET=interpret, num_warps=4)

        ffn = self.gate_proj.weight.shape[0]
        gated = torch.empty((tokens, ffn), device=x.device, dtype=x.dtype)
        if x.is_cuda:
            gbm, gbn, gbk, gwarps, gstages = 128, 64, 64, 8, 3
        else:
            gbm, gbn, gbk, gwarps, gstages = 256, 512, 512, 4, 1
        wg, wu = self.gate_proj.weight, self.up_proj.weight
        _swiglu_kernel[(triton.cdiv(tokens, gbm) * triton.cdiv(ffn, gbn),)](
            h2, wg, wu, gated, tokens, ffn, dim, h2.stride(1), wg.stride(0), gated.stride(0),
            BLOCK_M=gbm, BLOCK_N=gbn, BLOCK_K=gbk, GROUP_M=8, INTERPRET=interpret,
            num_warps=gwarps, num_stages=gstages,
        )
        out = torch.addmm(x1.view(tokens, dim), gated, self.down_proj.weight.t())
        return out.view(bsz, seq, dim)
