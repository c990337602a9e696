"""Triton kernels behind the Triton templates (imported only when a Triton candidate is built).

All kernels keep fp32 accumulation and reproduce the *rounding points* of the PyTorch reference
(e.g. RMSNorm: normalised value rounded to the model dtype before the weight multiply, as HF
does), so on bf16 they agree with the reference to the last bit in most elements.

They run on CUDA GPUs and, for correctness tests on tiny shapes, on CPU tensors under
``TRITON_INTERPRET=1`` (the env var must be set before triton is imported). Two interpreter
limits shape the code: loop bounds must not come from loaded values (so loops have a static trip
count and skip tiles with ``if``), and ``tl.dot`` on bf16 operands is wrong in the interpreter (so
operands are converted to fp32 first and the product uses TF32 on bf16 data -- exact, since
bf16's 8-bit significand fits in TF32's 11 -- or IEEE fp32 on fp32 data).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .base import Tickets  # the templates reach it as triton_kernels.Tickets


# ---------------------------------------------------------------------------------------------
# fused residual add + RMSNorm


@triton.jit
def _add_rmsnorm_kernel(X, R, W, OUT, ROUT, sx, sr, so, sro, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * sx + cols, mask=mask, other=0.0)
    r = tl.load(R + row * sr + cols, mask=mask, other=0.0)
    h = (r.to(tl.float32) + x.to(tl.float32)).to(ROUT.dtype.element_ty)
    tl.store(ROUT + row * sro + cols, h, mask=mask)
    hf = h.to(tl.float32)
    var = tl.sum(hf * hf, axis=0) / N
    rstd = tl.rsqrt(var + eps)
    n = (hf * rstd).to(OUT.dtype.element_ty)
    w = tl.load(W + cols, mask=mask, other=0.0)
    out = (w.to(tl.float32) * n.to(tl.float32)).to(OUT.dtype.element_ty)
    tl.store(OUT + row * so + cols, out, mask=mask)


def add_rmsnorm(x, residual, weight, eps, *, BLOCK, num_warps):
    B, N = x.shape
    out = torch.empty_like(x)
    rout = torch.empty_like(x)
    _add_rmsnorm_kernel[(B,)](x, residual, weight, out, rout, x.stride(0), residual.stride(0), out.stride(0),
                              rout.stride(0), N, eps, BLOCK=BLOCK, num_warps=num_warps)
    return out, rout


# ---------------------------------------------------------------------------------------------
# SwiGLU on a fused [.., 2I] gate/up GEMM output


@triton.jit
def _silu_mul_kernel(GU, OUT, sg, so, I, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    g = tl.load(GU + row * sg + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(GU + row * sg + I + cols, mask=mask, other=0.0).to(tl.float32)
    s = (g / (1.0 + tl.exp(-g))).to(OUT.dtype.element_ty)
    out = (s.to(tl.float32) * u).to(OUT.dtype.element_ty)
    tl.store(OUT + row * so + cols, out, mask=mask)


def silu_mul(gu, *, BLOCK, num_warps):
    B, two_i = gu.shape
    i = two_i // 2
    out = torch.empty((B, i), dtype=gu.dtype, device=gu.device)
    _silu_mul_kernel[(B, triton.cdiv(i, BLOCK))](gu, out, gu.stride(0), out.stride(0), i, BLOCK=BLOCK,
                                                 num_warps=num_warps)
    return out


# ---------------------------------------------------------------------------------------------
# (optional q/k RMSNorm) + rotary embedding, HEADS heads per program


@triton.jit
def _rot_tile(SRC, DST, W, COS, SIN, b, h0, n_heads, s_b, s_h, eps,
              HD: tl.constexpr, HEADS: tl.constexpr, HAS_NORM: tl.constexpr):
    hh = h0 + tl.arange(0, HEADS)
    d = tl.arange(0, HD)
    mask = (hh < n_heads)[:, None]
    out = _rot_values(SRC, W, COS, SIN, b, hh, s_b, s_h, eps, mask, HD, HAS_NORM)
    tl.store(DST + (b * n_heads + hh[:, None]) * HD + d[None, :], out, mask=mask)


@triton.jit
def _rot_values(SRC, W, COS, SIN, b, hh, s_b, s_h, eps, mask, HD: tl.constexpr, HAS_NORM: tl.constexpr):
    """Heads ``hh`` of row ``b``, q/k-normed when HAS_NORM, rotated; rounded where HF rounds."""
    d = tl.arange(0, HD)
    partner = (d + HD // 2) % HD
    src = SRC + b * s_b + hh[:, None] * s_h
    x = tl.load(src + d[None, :], mask=mask, other=0.0)
    xp = tl.load(src + partner[None, :], mask=mask, other=0.0)
    dt = x.dtype
    if HAS_NORM:
        xf = x.to(tl.float32)
        rstd = tl.rsqrt(tl.sum(xf * xf, axis=1) / HD + eps)
        w = tl.load(W + d).to(tl.float32)
        wp = tl.load(W + partner).to(tl.float32)
        x = (w[None, :] * (xf * rstd[:, None]).to(dt).to(tl.float32)).to(dt)
        xp = (wp[None, :] * (xp.to(tl.float32) * rstd[:, None]).to(dt).to(tl.float32)).to(dt)
    c = tl.load(COS + d).to(tl.float32)
    s = tl.load(SIN + d).to(tl.float32)
    sign = tl.where(d < HD // 2, -1.0, 1.0)
    a = (x.to(tl.float32) * c[None, :]).to(dt)
    bb = ((xp.to(tl.float32) * sign[None, :]) * s[None, :]).to(dt)
    return (a.to(tl.float32) + bb.to(tl.float32)).to(dt)


@triton.jit
def _qk_rotary_kernel(Q, K, COS, SIN, QW, KW, QO, KO, sqb, sqh, skb, skh, eps,
                      NQ: tl.constexpr, NKV: tl.constexpr, HD: tl.constexpr, HEADS: tl.constexpr,
                      HAS_NORM: tl.constexpr):
    b = tl.program_id(0)
    p = tl.program_id(1)
    q_progs = (NQ + HEADS - 1) // HEADS
    if p < q_progs:
        _rot_tile(Q, QO, QW, COS, SIN, b, p * HEADS, NQ, sqb, sqh, eps, HD, HEADS, HAS_NORM)
    else:
        _rot_tile(K, KO, KW, COS, SIN, b, (p - q_progs) * HEADS, NKV, skb, skh, eps, HD, HEADS, HAS_NORM)


def qk_rotary(q, k, cos, sin, q_weight, k_weight, eps, *, HEADS, num_warps, HAS_NORM):
    B, nq, hd = q.shape
    nkv = k.shape[1]
    qo = torch.empty((B, nq, hd), dtype=q.dtype, device=q.device)
    ko = torch.empty((B, nkv, hd), dtype=k.dtype, device=k.device)
    qw = q_weight if HAS_NORM else cos  # unused pointer when there is no norm
    kw = k_weight if HAS_NORM else cos
    grid = (B, triton.cdiv(nq, HEADS) + triton.cdiv(nkv, HEADS))
    _qk_rotary_kernel[grid](q, k, cos, sin, qw, kw, qo, ko, q.stride(0), q.stride(1), k.stride(0), k.stride(1),
                            eps, NQ=nq, NKV=nkv, HD=hd, HEADS=HEADS, HAS_NORM=HAS_NORM, num_warps=num_warps)
    return qo, ko


@triton.jit
def _qk_rotary_kv_kernel(Q, K, V, COS, SIN, QW, KW, QO, KC, VC, POS, sqb, sqh, skb, skh, svb, svh,
                         kcb, kch, kcs, vcb, vch, vcs, eps, NQ: tl.constexpr, NKV: tl.constexpr, HD: tl.constexpr,
                         HEADS: tl.constexpr, HAS_NORM: tl.constexpr):
    b = tl.program_id(0)
    p = tl.program_id(1)
    q_progs = (NQ + HEADS - 1) // HEADS
    if p < q_progs:
        _rot_tile(Q, QO, QW, COS, SIN, b, p * HEADS, NQ, sqb, sqh, eps, HD, HEADS, HAS_NORM)
    else:  # the rotated k and the v of these kv heads go straight into the caches at pos
        hh = (p - q_progs) * HEADS + tl.arange(0, HEADS)
        d = tl.arange(0, HD)
        mask = (hh < NKV)[:, None]
        k = _rot_values(K, KW, COS, SIN, b, hh, skb, skh, eps, mask, HD, HAS_NORM)
        at = tl.load(POS)
        tl.store(KC + b * kcb + hh[:, None] * kch + at * kcs + d[None, :], k, mask=mask)
        v = tl.load(V + b * svb + hh[:, None] * svh + d[None, :], mask=mask)
        tl.store(VC + b * vcb + hh[:, None] * vch + at * vcs + d[None, :], v, mask=mask)


def qk_rotary_kv(q, k, v, cos, sin, q_weight, k_weight, eps, k_cache, v_cache, pos, *, HEADS, num_warps,
                 HAS_NORM):
    B, nq, hd = q.shape
    nkv = k.shape[1]
    qo = torch.empty((B, nq, hd), dtype=q.dtype, device=q.device)
    qw = q_weight if HAS_NORM else cos
    kw = k_weight if HAS_NORM else cos
    grid = (B, triton.cdiv(nq, HEADS) + triton.cdiv(nkv, HEADS))
    _qk_rotary_kv_kernel[grid](q, k, v, cos, sin, qw, kw, qo, k_cache, v_cache, pos, q.stride(0), q.stride(1),
                               k.stride(0), k.stride(1), v.stride(0), v.stride(1), k_cache.stride(0),
                               k_cache.stride(1), k_cache.stride(2), v_cache.stride(0), v_cache.stride(1),
                               v_cache.stride(2), eps, NQ=nq, NKV=nkv, HD=hd, HEADS=HEADS, HAS_NORM=HAS_NORM,
                               num_warps=num_warps)
    return qo


# ---------------------------------------------------------------------------------------------
# KV-cache write: k and v of every (batch, kv head) in one launch (PyTorch needs two index_copy_)


@triton.jit
def _kv_write_kernel(K, V, KC, VC, POS, skb, skh, svb, svh, kcb, kch, kcs, vcb, vch, vcs,
                     NKV: tl.constexpr, HD: tl.constexpr, HEADS: tl.constexpr):
    b = tl.program_id(0)
    hh = tl.program_id(1) * HEADS + tl.arange(0, HEADS)
    d = tl.arange(0, HD)
    mask = (hh < NKV)[:, None]
    p = tl.load(POS)
    k = tl.load(K + b * skb + hh[:, None] * skh + d[None, :], mask=mask)
    v = tl.load(V + b * svb + hh[:, None] * svh + d[None, :], mask=mask)
    tl.store(KC + b * kcb + hh[:, None] * kch + p * kcs + d[None, :], k, mask=mask)
    tl.store(VC + b * vcb + hh[:, None] * vch + p * vcs + d[None, :], v, mask=mask)


def kv_write(k, v, k_cache, v_cache, pos, *, HEADS, num_warps):
    B, nkv, hd = k.shape
    _kv_write_kernel[(B, triton.cdiv(nkv, HEADS))](
        k, v, k_cache, v_cache, pos, k.stride(0), k.stride(1), v.stride(0), v.stride(1), k_cache.stride(0),
        k_cache.stride(1), k_cache.stride(2), v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        NKV=nkv, HD=hd, HEADS=HEADS, num_warps=num_warps)


# ---------------------------------------------------------------------------------------------
# split-K (flash-decoding) grouped-query attention over a static KV cache


@triton.jit
def _attn_split_kernel(Q, K, V, POS, OP, M, L, OUT, sqb, sqh, skb, skh, sks, svb, svh, svs, scale,
                       NKV: tl.constexpr, G: tl.constexpr, GP: tl.constexpr, HD: tl.constexpr,
                       BLOCK_N: tl.constexpr, SPLITS: tl.constexpr, TILES: tl.constexpr, IEEE: tl.constexpr):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    b = pid // NKV
    hk = pid % NKV
    lo, hi = _split_range(POS, split, SPLITS, BLOCK_N)
    g = tl.arange(0, GP)
    d = tl.arange(0, HD)
    gmask = g < G
    q = tl.load(Q + b * sqb + (hk * G + g)[:, None] * sqh + d[None, :], mask=gmask[:, None], other=0.0)
    q = q.to(tl.float32)
    m_i = tl.full([GP], float("-inf"), tl.float32)
    l_i = tl.zeros([GP], tl.float32)
    acc = tl.zeros([GP, HD], tl.float32)
    m_i, l_i, acc = _attend_tiles(q, K + b * skb + hk * skh, V + b * svb + hk * svh, sks, svs, lo, hi, scale,
                                  m_i, l_i, acc, HD, BLOCK_N, TILES, IEEE)
    _store_attention(OP, M, L, OUT, acc, m_i, l_i, (b * NKV + hk) * G + g, gmask, split, HD, SPLITS)


@triton.jit
def _split_range(POS, split, SPLITS: tl.constexpr, BLOCK_N: tl.constexpr):
    """This split's cache positions [lo, hi) of the valid length pos + 1, in whole tiles."""
    length = tl.load(POS) + 1
    chunk = tl.cdiv(tl.cdiv(length, SPLITS), BLOCK_N) * BLOCK_N
    lo = split * chunk
    return lo, tl.minimum(lo + chunk, length)


@triton.jit
def _attend_tiles(q, kbase, vbase, sks, svs, lo, hi, scale, m_i, l_i, acc,
                  HD: tl.constexpr, BLOCK_N: tl.constexpr, TILES: tl.constexpr, IEEE: tl.constexpr):
    """Online softmax of q's heads over cache positions [lo, hi), tile by tile."""
    d = tl.arange(0, HD)
    for t in range(TILES):  # static trip count; tiles past this split's range are skipped
        start = lo + t * BLOCK_N
        if start < hi:
            n = start + tl.arange(0, BLOCK_N)
            nmask = n < hi
            k = tl.load(kbase + n[:, None] * sks + d[None, :], mask=nmask[:, None], other=0.0).to(tl.float32)
            if IEEE:
                s = tl.dot(q, tl.trans(k), input_precision="ieee")
            else:
                s = tl.dot(q, tl.trans(k), input_precision="tf32")
            s = tl.where(nmask[None, :], s * scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            alpha = tl.exp(m_i - m_new)
            p = tl.exp(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, axis=1)
            v = tl.load(vbase + n[:, None] * svs + d[None, :], mask=nmask[:, None], other=0.0).to(tl.float32)
            if IEEE:
                pv = tl.dot(p, v, input_precision="ieee")
            else:
                pv = tl.dot(p, v, input_precision="tf32")
            acc = acc * alpha[:, None] + pv
            m_i = m_new
    return m_i, l_i, acc


@triton.jit
def _store_attention(OP, M, L, OUT, acc, m_i, l_i, head, gmask, split, HD: tl.constexpr, SPLITS: tl.constexpr):
    """One split: the result itself, no combine launch (the combine's arithmetic: o / l); more:
    this split's partial output, running max and sum for the combine kernel."""
    d = tl.arange(0, HD)
    if SPLITS == 1:
        tl.store(OUT + head[:, None] * HD + d[None, :], (acc / l_i[:, None]).to(OUT.dtype.element_ty),
                 mask=gmask[:, None])
    else:
        row = head * SPLITS + split  # [GP] over (b, head, split)
        tl.store(OP + row[:, None] * HD + d[None, :], acc, mask=gmask[:, None])
        tl.store(M + row, m_i, mask=gmask)
        tl.store(L + row, l_i, mask=gmask)


@triton.jit
def _attn_combine_kernel(OP, M, L, OUT, HD: tl.constexpr, SPLITS: tl.constexpr):
    row = tl.program_id(0)  # b * NQ + head
    sp = tl.arange(0, SPLITS)
    d = tl.arange(0, HD)
    m = tl.load(M + row * SPLITS + sp)
    l = tl.load(L + row * SPLITS + sp)
    m_max = tl.max(m, axis=0)
    w = tl.where(m == float("-inf"), 0.0, tl.exp(m - m_max))
    o = tl.load(OP + (row * SPLITS + sp)[:, None] * HD + d[None, :])
    num = tl.sum(o * w[:, None], axis=0)
    den = tl.sum(l * w, axis=0)
    tl.store(OUT + row * HD + d, (num / den).to(OUT.dtype.element_ty))


def decode_attention(q, k_cache, v_cache, pos, scale, *, BLOCK_N, SPLITS, num_warps):
    B, nq, hd = q.shape
    nkv, cap = k_cache.shape[1], k_cache.shape[2]
    g = nq // nkv
    gp = max(16, triton.next_power_of_2(g))
    out, op, m, lsum = _attention_buffers(q, SPLITS)
    tiles = triton.cdiv(triton.cdiv(cap, SPLITS), BLOCK_N)
    _attn_split_kernel[(B * nkv, SPLITS)](
        q, k_cache, v_cache, pos, op, m, lsum, out, q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1),
        k_cache.stride(2), v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), scale,
        NKV=nkv, G=g, GP=gp, HD=hd, BLOCK_N=BLOCK_N, SPLITS=SPLITS, TILES=tiles,
        IEEE=q.dtype == torch.float32, num_warps=num_warps)
    return _combine(out, op, m, lsum, SPLITS)


def _attention_buffers(q, splits: int):
    """The output and, with more than one split, the partials the combine kernel reads."""
    B, nq, hd = q.shape
    out = torch.empty((B, nq, hd), dtype=q.dtype, device=q.device)
    if splits == 1:  # the split kernel writes ``out`` itself; the partial buffers are not touched
        return out, out, out, out
    rows = B * nq * splits
    return (out, torch.empty((rows, hd), dtype=torch.float32, device=q.device),
            torch.empty((rows,), dtype=torch.float32, device=q.device),
            torch.empty((rows,), dtype=torch.float32, device=q.device))


def _combine(out, op, m, lsum, splits: int):
    if splits > 1:
        B, nq, hd = out.shape
        _attn_combine_kernel[(B * nq,)](op, m, lsum, out, HD=hd, SPLITS=splits, num_warps=1 if hd <= 64 else 2)
    return out


# ---------------------------------------------------------------------------------------------
# rotary (+ q/k norm) + KV-cache write + flash-decoding attention in one kernel: each program
# rotates the query heads of its kv head itself, and the program whose split holds the new
# position writes the rotated k and the v into the caches and adds that position to its softmax
# from registers (no split reads the position being written, so there is no race).


@triton.jit
def _rope_attn_split_kernel(Q, K, V, COS, SIN, QW, KW, KC, VC, POS, OP, M, L, OUT,
                            sqb, sqh, skb, skh, svb, svh, kcb, kch, kcs, vcb, vch, vcs, eps, scale,
                            NKV: tl.constexpr, G: tl.constexpr, GP: tl.constexpr, HD: tl.constexpr,
                            BLOCK_N: tl.constexpr, SPLITS: tl.constexpr, TILES: tl.constexpr,
                            IEEE: tl.constexpr, HAS_NORM: tl.constexpr):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    b = pid // NKV
    hk = pid % NKV
    at = tl.load(POS)  # the new position
    lo, hi = _split_range(POS, split, SPLITS, BLOCK_N)
    g = tl.arange(0, GP)
    d = tl.arange(0, HD)
    gmask = g < G
    q = _rot_values(Q, QW, COS, SIN, b, hk * G + g, sqb, sqh, eps, gmask[:, None], HD, HAS_NORM).to(tl.float32)
    m_i = tl.full([GP], float("-inf"), tl.float32)
    l_i = tl.zeros([GP], tl.float32)
    acc = tl.zeros([GP, HD], tl.float32)
    kbase = KC + b * kcb + hk * kch
    vbase = VC + b * vcb + hk * vch
    # the cache holds positions < at; at itself comes from registers below
    m_i, l_i, acc = _attend_tiles(q, kbase, vbase, kcs, vcs, lo, tl.minimum(hi, at), scale, m_i, l_i, acc,
                                  HD, BLOCK_N, TILES, IEEE)
    if (lo <= at) & (at < hi):  # this split holds the new position
        one = hk + tl.arange(0, 1)
        k_new = _rot_values(K, KW, COS, SIN, b, one, skb, skh, eps, (one < NKV)[:, None], HD, HAS_NORM)  # [1, HD]
        v_new = tl.load(V + b * svb + one[:, None] * svh + d[None, :])
        tl.store(kbase + at * kcs + d[None, :], k_new)
        tl.store(vbase + at * vcs + d[None, :], v_new)
        s_new = tl.sum(q * k_new.to(tl.float32), axis=1) * scale  # [GP]
        m_new = tl.maximum(m_i, s_new)
        alpha = tl.exp(m_i - m_new)
        p_new = tl.exp(s_new - m_new)
        l_i = l_i * alpha + p_new
        acc = acc * alpha[:, None] + p_new[:, None] * v_new.to(tl.float32)
        m_i = m_new
    _store_attention(OP, M, L, OUT, acc, m_i, l_i, (b * NKV + hk) * G + g, gmask, split, HD, SPLITS)


def rotary_kv_attention(q, k, v, cos, sin, q_weight, k_weight, eps, k_cache, v_cache, pos, scale, *, BLOCK_N,
                        SPLITS, num_warps, HAS_NORM):
    B, nq, hd = q.shape
    nkv, cap = k_cache.shape[1], k_cache.shape[2]
    g = nq // nkv
    gp = max(16, triton.next_power_of_2(g))
    out, op, m, lsum = _attention_buffers(q, SPLITS)
    qw = q_weight if HAS_NORM else cos  # unused pointer when there is no norm
    kw = k_weight if HAS_NORM else cos
    tiles = triton.cdiv(triton.cdiv(cap, SPLITS), BLOCK_N)
    _rope_attn_split_kernel[(B * nkv, SPLITS)](
        q, k, v, cos, sin, qw, kw, k_cache, v_cache, pos, op, m, lsum, out,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), v_cache.stride(0), v_cache.stride(1),
        v_cache.stride(2), eps, scale, NKV=nkv, G=g, GP=gp, HD=hd, BLOCK_N=BLOCK_N, SPLITS=SPLITS, TILES=tiles,
        IEEE=q.dtype == torch.float32, HAS_NORM=HAS_NORM, num_warps=num_warps)
    return _combine(out, op, m, lsum, SPLITS)


# ---------------------------------------------------------------------------------------------
# one-launch reductions: the last program to finish a reduction combines the partials, found by an
# atomic ticket (the data itself is summed in a fixed order: deterministic; counters: base.Tickets)


def _pdl_launch(pdl) -> dict:
    return {"launch_pdl": True} if pdl else {}


# ---------------------------------------------------------------------------------------------
# matrix-vector / skinny GEMM (batch <= 16) with optional SwiGLU epilogue and split-K
#
# PDL (programmatic dependent launch, SM 9.0+): the kernel is launched with launch_pdl=True, so it
# may start while the previous kernel in the stream is still running. It reads its first weight
# tile before tl.extra.cuda.gdc_wait() (weights are never written while decoding, so that read
# cannot race) and touches nothing else -- no activation read, no store -- before the wait, which
# returns once every earlier kernel has completed and its writes are visible. After its last read
# it calls gdc_launch_dependents(), letting the next PDL kernel start (that one waits likewise).


@triton.jit
def _store_product(PTRS, acc, acc_u, mask, SWIGLU: tl.constexpr):
    """Store the fp32 product rounded to the output dtype; with SWIGLU, silu(gate) * up rounded
    where PyTorch rounds (the gate, the up, the silu, the product)."""
    dt = PTRS.dtype.element_ty
    if SWIGLU:
        gte = acc.to(dt).to(tl.float32)
        up = acc_u.to(dt).to(tl.float32)
        s = (gte / (1.0 + tl.exp(-gte))).to(dt).to(tl.float32)
        tl.store(PTRS, (s * up).to(dt), mask=mask)
    else:
        tl.store(PTRS, acc.to(dt), mask=mask)


@triton.jit
def _weight_tile(W, cols, kk, swn, I, wmask, SWIGLU: tl.constexpr):
    """The [BLOCK_N, BLOCK_K] weight tile of output columns ``cols`` (and, with SWIGLU, the matching
    up rows cols + I) in the weight dtype; the product converts it."""
    w = tl.load(W + cols[:, None] * swn + kk[None, :], mask=wmask, other=0.0)
    wu = w
    if SWIGLU:
        wu = tl.load(W + (cols + I)[:, None] * swn + kk[None, :], mask=wmask, other=0.0)
    return w, wu


@triton.jit
def _tile_product(acc, x, w, REDUCE: tl.constexpr, IEEE: tl.constexpr):
    """acc + x [BM, BLOCK_K] @ w [BLOCK_N, BLOCK_K]^T in fp32."""
    w = w.to(tl.float32)
    if REDUCE:  # few rows: broadcast-multiply and reduce over K (no tensor cores)
        acc += tl.sum(x[:, None, :] * w[None, :, :], axis=2)
    elif IEEE:
        acc += tl.dot(x, tl.trans(w), input_precision="ieee")
    else:
        acc += tl.dot(x, tl.trans(w), input_precision="tf32")
    return acc


@triton.jit
def _gemv_kernel(X, W, OUT, WS, TICKET, M, N, K, sxm, swn, som, I,
                 BM: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
                 K_TILES: tl.constexpr, REDUCE: tl.constexpr, SWIGLU: tl.constexpr, IEEE: tl.constexpr,
                 LAST_REDUCES: tl.constexpr, PDL: tl.constexpr):
    pid_n = tl.program_id(0)
    split = tl.program_id(1)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    nout = I if SWIGLU else N
    cmask = cols < nout
    rows = tl.arange(0, BM)
    rmask = rows < M
    acc = tl.zeros([BM, BLOCK_N], tl.float32)
    acc_u = tl.zeros([BM, BLOCK_N], tl.float32)
    t0 = 0
    if PDL:  # the first tile's weights before the wait, its x after (see the section comment)
        kk = split * K_TILES * BLOCK_K + tl.arange(0, BLOCK_K)
        kmask = kk < K
        w, wu = _weight_tile(W, cols, kk, swn, I, cmask[:, None] & kmask[None, :], SWIGLU)
        tl.extra.cuda.gdc_wait()
        x = tl.load(X + rows[:, None] * sxm + kk[None, :], mask=rmask[:, None] & kmask[None, :], other=0.0)
        x = x.to(tl.float32)
        acc = _tile_product(acc, x, w, REDUCE, IEEE)
        if SWIGLU:
            acc_u = _tile_product(acc_u, x, wu, REDUCE, IEEE)
        t0 = 1
    for t in range(t0, K_TILES):
        kk = (split * K_TILES + t) * BLOCK_K + tl.arange(0, BLOCK_K)
        kmask = kk < K
        x = tl.load(X + rows[:, None] * sxm + kk[None, :], mask=rmask[:, None] & kmask[None, :], other=0.0)
        x = x.to(tl.float32)
        w, wu = _weight_tile(W, cols, kk, swn, I, cmask[:, None] & kmask[None, :], SWIGLU)
        acc = _tile_product(acc, x, w, REDUCE, IEEE)
        if SWIGLU:
            acc_u = _tile_product(acc_u, x, wu, REDUCE, IEEE)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    omask = rmask[:, None] & cmask[None, :]
    if SPLIT_K == 1:
        _store_product(OUT + rows[:, None] * som + cols[None, :], acc, acc_u, omask, SWIGLU)
    else:
        # fp32 partials [SPLIT_K, (2,) M, nout], summed in split order (deterministic) by the
        # reduce kernel, or with LAST_REDUCES by the last split of this column tile to finish
        base = WS + split * (2 if SWIGLU else 1) * M * nout
        tl.store(base + rows[:, None] * nout + cols[None, :], acc, mask=omask)
        if SWIGLU:
            tl.store(base + M * nout + rows[:, None] * nout + cols[None, :], acc_u, mask=omask)
        if LAST_REDUCES:
            # the barrier orders every thread's partial stores before the ticket's release; the
            # acquire makes the other splits' partials visible to the program that takes the last
            tl.debug_barrier()
            ticket = tl.atomic_add(TICKET + pid_n, 1, sem="acq_rel", scope="gpu")
            if ticket == SPLIT_K - 1:
                _sum_partials(WS, OUT + rows[:, None] * som + cols[None, :], rows[:, None] * nout + cols[None, :],
                              M * nout, omask, BM, BLOCK_N, SPLIT_K, SWIGLU)
                tl.store(TICKET + pid_n, 0)  # ready for the next call (launches on a stream are ordered)


@triton.jit
def _sum_partials(WS, OUT_PTRS, offs, plane, mask, R: tl.constexpr, C: tl.constexpr, SPLIT_K: tl.constexpr,
                  SWIGLU: tl.constexpr):
    """Sum the split partials at ``offs`` in split order and store the product: the same sums, in
    the same order, whichever kernel does it. .cg loads: from L2, past any stale L1 line."""
    stride = (2 if SWIGLU else 1) * plane
    acc = tl.zeros([R, C], tl.float32)
    acc_u = tl.zeros([R, C], tl.float32)
    for s in range(SPLIT_K):
        acc += tl.load(WS + s * stride + offs, mask=mask, other=0.0, cache_modifier=".cg")
        if SWIGLU:
            acc_u += tl.load(WS + s * stride + plane + offs, mask=mask, other=0.0, cache_modifier=".cg")
    _store_product(OUT_PTRS, acc, acc_u, mask, SWIGLU)


@triton.jit
def _gemv_reduce_kernel(WS, OUT, M, NOUT, som, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr, SWIGLU: tl.constexpr,
                        PDL: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    if PDL:  # the partials come from the previous kernel; the next may start once all have waited
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    _sum_partials(WS, OUT + row * som + cols[None, :], row * NOUT + cols[None, :], M * NOUT,
                  (cols < NOUT)[None, :], 1, BLOCK, SPLIT_K, SWIGLU)


def gemv(x, weight, *, BLOCK_N, BLOCK_K, SPLIT_K, num_warps, MODE, swiglu_i: int = 0, SPLIT_REDUCE: str = "kernel",
         PDL: int = 0, tickets: Tickets | None = None):
    """x [M, K] @ weight[N, K]^T -> [M, N]; with ``swiglu_i`` = I: silu(x Wg^T) * (x Wu^T) -> [M, I].
    Split-K partials are reduced by a second kernel (SPLIT_REDUCE="kernel") or by the last split
    of each column tile to finish ("last": one launch; ``tickets`` holds a counter per tile)."""
    M, K = x.shape
    N = weight.shape[0]
    nout = swiglu_i if swiglu_i else N
    bm = 1 if MODE == "reduce" else max(16, triton.next_power_of_2(M))
    out = torch.empty((M, nout), dtype=x.dtype, device=x.device)
    k_tiles = triton.cdiv(triton.cdiv(K, SPLIT_K), BLOCK_K)
    ws = out
    last = SPLIT_K > 1 and SPLIT_REDUCE == "last"
    col_tiles = triton.cdiv(nout, BLOCK_N)
    ticket = tickets.get(x.device) if last else out
    if last and ticket.numel() < col_tiles:
        raise ValueError(f"{ticket.numel()} ticket counters for {col_tiles} column tiles")
    if SPLIT_K > 1:
        ws = torch.empty((SPLIT_K * (2 if swiglu_i else 1) * M * nout,), dtype=torch.float32, device=x.device)
    _gemv_kernel[(col_tiles, SPLIT_K)](x, weight, out, ws, ticket, M, N, K, x.stride(0), weight.stride(0),
                                       out.stride(0), swiglu_i, BM=bm, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                                       SPLIT_K=SPLIT_K, K_TILES=k_tiles, REDUCE=MODE == "reduce",
                                       SWIGLU=bool(swiglu_i), IEEE=x.dtype == torch.float32, LAST_REDUCES=last,
                                       PDL=bool(PDL), num_warps=num_warps, **_pdl_launch(PDL))
    if SPLIT_K > 1 and not last:
        blk = 1024
        _gemv_reduce_kernel[(M, triton.cdiv(nout, blk))](ws, out, M, nout, out.stride(0), SPLIT_K=SPLIT_K,
                                                          BLOCK=blk, SWIGLU=bool(swiglu_i), PDL=bool(PDL),
                                                          num_warps=4, **_pdl_launch(PDL))
    return out


# ---------------------------------------------------------------------------------------------
# residual add + RMSNorm folded into the projection that reads its output (one kernel, not two)


@triton.jit
def _row_col_tile(M, N, BM: tl.constexpr, BLOCK_N: tl.constexpr):
    """The batch rows and this program's BLOCK_N output columns of a one-axis GEMV grid, with masks."""
    rows = tl.arange(0, BM)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    return rows, rows < M, cols, cols < N


@triton.jit
def _normed_tile(X, R, NW, rows, kk, rmask, kmask, sxm, srm, rstd, dt: tl.constexpr):
    """T(nw * T(h * rstd)) for h = T(residual + x) over columns ``kk``: the normalised rows as HF
    rounds them, in fp32."""
    m2 = rmask[:, None] & kmask[None, :]
    x = tl.load(X + rows[:, None] * sxm + kk[None, :], mask=m2, other=0.0).to(tl.float32)
    r = tl.load(R + rows[:, None] * srm + kk[None, :], mask=m2, other=0.0).to(tl.float32)
    h = (r + x).to(dt).to(tl.float32)
    nw = tl.load(NW + kk, mask=kmask, other=0.0).to(tl.float32)
    return (nw[None, :] * (h * rstd[:, None]).to(dt).to(tl.float32)).to(dt).to(tl.float32)


@triton.jit
def _norm_gemv_kernel(X, R, NW, W, OUT, HOUT, M, K, sxm, srm, som, shm, swn, eps, I,
                      BM: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, K_TILES: tl.constexpr,
                      NOUT: tl.constexpr, SWIGLU: tl.constexpr, PDL: tl.constexpr):
    rows, rmask, cols, cmask = _row_col_tile(M, NOUT, BM, BLOCK_N)
    dt = OUT.dtype.element_ty
    if PDL:  # the first weight tile before the wait (weights are never written while decoding)
        kk0 = tl.arange(0, BLOCK_K)
        w0, wu0 = _weight_tile(W, cols, kk0, swn, I, cmask[:, None] & (kk0 < K)[None, :], SWIGLU)
        tl.extra.cuda.gdc_wait()
    # pass 1: h = residual + x (rounded to the model dtype, as HF adds) and its sum of squares; every
    # program reads the whole (small) rows, program 0 also writes h as the next residual
    ss = tl.zeros([BM], tl.float32)
    for t in range(K_TILES):
        kk = t * BLOCK_K + tl.arange(0, BLOCK_K)
        m2 = rmask[:, None] & (kk < K)[None, :]
        x = tl.load(X + rows[:, None] * sxm + kk[None, :], mask=m2, other=0.0).to(tl.float32)
        r = tl.load(R + rows[:, None] * srm + kk[None, :], mask=m2, other=0.0).to(tl.float32)
        h = (r + x).to(dt).to(tl.float32)
        ss += tl.sum(h * h, axis=1)
        if tl.program_id(0) == 0:
            tl.store(HOUT + rows[:, None] * shm + kk[None, :], h.to(dt), mask=m2)
    rstd = tl.rsqrt(ss / K + eps)
    # pass 2: the product over the normalised rows (weight * (h * rstd) rounded where HF rounds)
    acc = tl.zeros([BM, BLOCK_N], tl.float32)
    acc_u = tl.zeros([BM, BLOCK_N], tl.float32)
    t0 = 0
    if PDL:
        n = _normed_tile(X, R, NW, rows, kk0, rmask, kk0 < K, sxm, srm, rstd, dt)
        acc = _tile_product(acc, n, w0, True, False)
        if SWIGLU:
            acc_u = _tile_product(acc_u, n, wu0, True, False)
        t0 = 1
    for t in range(t0, K_TILES):
        kk = t * BLOCK_K + tl.arange(0, BLOCK_K)
        kmask = kk < K
        n = _normed_tile(X, R, NW, rows, kk, rmask, kmask, sxm, srm, rstd, dt)
        w, wu = _weight_tile(W, cols, kk, swn, I, cmask[:, None] & kmask[None, :], SWIGLU)
        acc = _tile_product(acc, n, w, True, False)
        if SWIGLU:
            acc_u = _tile_product(acc_u, n, wu, True, False)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    _store_product(OUT + rows[:, None] * som + cols[None, :], acc, acc_u, rmask[:, None] & cmask[None, :], SWIGLU)


def norm_gemv(x, residual, norm_weight, eps, weight, *, BLOCK_N, BLOCK_K, num_warps, swiglu_i: int = 0, PDL: int = 0):
    """(rmsnorm(residual + x) @ weight^T, residual + x); with ``swiglu_i`` = I the product is
    silu(n Wg^T) * (n Wu^T) [M, I]. Batch rows M are few (decode): a broadcast-multiply reduction."""
    M, K = x.shape
    N = weight.shape[0]
    nout = swiglu_i if swiglu_i else N
    out = torch.empty((M, nout), dtype=x.dtype, device=x.device)
    h = torch.empty((M, K), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(nout, BLOCK_N),)
    _norm_gemv_kernel[grid](x, residual, norm_weight, weight, out, h, M, K, x.stride(0), residual.stride(0),
                            out.stride(0), h.stride(0), weight.stride(0), eps, swiglu_i,
                            BM=triton.next_power_of_2(M), BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                            K_TILES=triton.cdiv(K, BLOCK_K), NOUT=nout, SWIGLU=bool(swiglu_i), PDL=bool(PDL),
                            num_warps=num_warps, **_pdl_launch(PDL))
    return out, h


# ---------------------------------------------------------------------------------------------
# residual add + RMSNorm folded into the epilogue of the projection before them (o_proj, down_proj):
# one kernel, not two. Every program adds the residual to its own output columns and stores that
# tile of the new residual; the last program to finish (an int ticket, as in split-K's one-launch
# reduce) reads the whole new residual rows back from L2 and normalises them.


@triton.jit
def _gemv_add_norm_kernel(X, W, R, NW, OUT, HOUT, TICKET, M, N, K, sxm, swn, srm, som, shm, eps,
                          BM: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, K_TILES: tl.constexpr,
                          BLOCK_H: tl.constexpr, H_TILES: tl.constexpr, N_TILES: tl.constexpr, PDL: tl.constexpr):
    rows, rmask, cols, cmask = _row_col_tile(M, N, BM, BLOCK_N)
    dt = OUT.dtype.element_ty
    acc = tl.zeros([BM, BLOCK_N], tl.float32)
    t0 = 0
    if PDL:  # the first weight tile before the wait (weights are never written while decoding)
        kk = tl.arange(0, BLOCK_K)
        kmask = kk < K
        w, _ = _weight_tile(W, cols, kk, swn, 0, cmask[:, None] & kmask[None, :], False)
        tl.extra.cuda.gdc_wait()
        x = tl.load(X + rows[:, None] * sxm + kk[None, :], mask=rmask[:, None] & kmask[None, :], other=0.0)
        acc = _tile_product(acc, x.to(tl.float32), w, True, False)
        t0 = 1
    for t in range(t0, K_TILES):
        kk = t * BLOCK_K + tl.arange(0, BLOCK_K)
        kmask = kk < K
        x = tl.load(X + rows[:, None] * sxm + kk[None, :], mask=rmask[:, None] & kmask[None, :], other=0.0)
        w, _ = _weight_tile(W, cols, kk, swn, 0, cmask[:, None] & kmask[None, :], False)
        acc = _tile_product(acc, x.to(tl.float32), w, True, False)
    if PDL:  # the next kernel's wait still waits for this whole grid, the last program's norm included
        tl.extra.cuda.gdc_launch_dependents()
    # this tile of the new residual: residual + the product rounded to the model dtype (HF adds the
    # projection's output, already rounded, to the residual)
    omask = rmask[:, None] & cmask[None, :]
    r = tl.load(R + rows[:, None] * srm + cols[None, :], mask=omask, other=0.0).to(tl.float32)
    h = (r + acc.to(dt).to(tl.float32)).to(dt)
    tl.store(HOUT + rows[:, None] * shm + cols[None, :], h, mask=omask)
    # the barrier orders every thread's stores before the ticket's release; the acquire makes the
    # other programs' tiles visible to the program that takes the last ticket
    tl.debug_barrier()
    ticket = tl.atomic_add(TICKET, 1, sem="acq_rel", scope="gpu")
    if ticket == N_TILES - 1:
        ss = tl.zeros([BM], tl.float32)
        for t in range(H_TILES):
            hc = t * BLOCK_H + tl.arange(0, BLOCK_H)
            m2 = rmask[:, None] & (hc < N)[None, :]
            hv = tl.load(HOUT + rows[:, None] * shm + hc[None, :], mask=m2, other=0.0, cache_modifier=".cg")
            hv = hv.to(tl.float32)
            ss += tl.sum(hv * hv, axis=1)
        rstd = tl.rsqrt(ss / N + eps)
        for t in range(H_TILES):
            hc = t * BLOCK_H + tl.arange(0, BLOCK_H)
            hmask = hc < N
            m2 = rmask[:, None] & hmask[None, :]
            hv = tl.load(HOUT + rows[:, None] * shm + hc[None, :], mask=m2, other=0.0, cache_modifier=".cg")
            nw = tl.load(NW + hc, mask=hmask, other=0.0).to(tl.float32)
            n = (nw[None, :] * (hv.to(tl.float32) * rstd[:, None]).to(dt).to(tl.float32)).to(dt)
            tl.store(OUT + rows[:, None] * som + hc[None, :], n, mask=m2)
        tl.store(TICKET, 0)  # ready for the next call (launches on a stream are ordered)


def gemv_add_rmsnorm(x, weight, residual, norm_weight, eps, *, BLOCK_N, BLOCK_K, num_warps, tickets: Tickets,
                     PDL: int = 0):
    """(rmsnorm(residual + x @ weight^T), residual + x @ weight^T) in one launch; batch rows M are
    few (decode): a broadcast-multiply reduction. ``tickets`` holds the one counter."""
    M, K = x.shape
    N = weight.shape[0]
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    h = torch.empty((M, N), dtype=x.dtype, device=x.device)
    n_tiles = triton.cdiv(N, BLOCK_N)
    block_h = min(triton.next_power_of_2(N), 1024)
    _gemv_add_norm_kernel[(n_tiles,)](x, weight, residual, norm_weight, out, h, tickets.get(x.device), M, N, K,
                                      x.stride(0), weight.stride(0), residual.stride(0), out.stride(0), h.stride(0),
                                      eps, BM=triton.next_power_of_2(M), BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                                      K_TILES=triton.cdiv(K, BLOCK_K), BLOCK_H=block_h,
                                      H_TILES=triton.cdiv(N, block_h), N_TILES=n_tiles, PDL=bool(PDL),
                                      num_warps=num_warps, **_pdl_launch(PDL))
    return out, h


# ---------------------------------------------------------------------------------------------
# greedy token selection: argmax over [B, V] logits in two stages (many programs each reduce a
# chunk to (value, first index); a tiny stage reduces the partials), with torch.argmax's
# semantics: NaN is the maximum (its first occurrence wins), then the largest value, ties to the
# lowest index. The values compare in fp32, exact for bf16 / fp16 logits.

_NO_INDEX = tl.constexpr(2147483647)  # int32 max: the index of "no element" (a fully masked tile)


@triton.jit
def _argmax_combine(v, i, n, tv, ti, tn):
    """The torch.argmax winner of two (value, index, is-NaN) candidates; either may come first."""
    take = tl.where(tn != n, tn, tl.where(n, ti < i, (tv > v) | ((tv == v) & (ti < i))))
    return tl.where(take, tv, v), tl.where(take, ti, i), tl.where(take, tn, n)


@triton.jit
def _argmax_tile(x, idx, valid):
    """(value, index, is-NaN) of the torch.argmax winner among the valid elements of a 1-D tile;
    index _NO_INDEX when none is valid. ``idx`` are the elements' indices (any order)."""
    nan = (x != x) & valid
    num = valid & (x == x)
    xv = tl.where(num, x, float("-inf"))
    m = tl.max(xv, axis=0)
    any_nan = tl.max(nan.to(tl.int32), axis=0) > 0
    i_nan = tl.min(tl.where(nan, idx, _NO_INDEX), axis=0)
    i_max = tl.min(tl.where(num & (xv == m), idx, _NO_INDEX), axis=0)
    return m, tl.where(any_nan, i_nan, i_max), any_nan


@triton.jit
def _argmax_partials_reduce(PV, PI, TOK, row, P, PB: tl.constexpr):
    """Reduce row ``row``'s P partials (their own indices break ties) and write the token."""
    p = tl.arange(0, PB)
    pm = p < P
    # .cg: read from L2, not an L1 line another program's earlier partial may still sit in
    pv = tl.load(PV + row * P + p, mask=pm, other=0.0, cache_modifier=".cg")
    pi = tl.load(PI + row * P + p, mask=pm, other=0, cache_modifier=".cg")
    _, i, _ = _argmax_tile(pv, pi, pm)
    tl.store(TOK + row, i.to(tl.int64))


@triton.jit
def _argmax_chunk_kernel(X, PV, PI, TOK, TICKET, V, sx, P,
                         BLOCK: tl.constexpr, TILES: tl.constexpr, PB: tl.constexpr, ONE_LAUNCH: tl.constexpr,
                         PDL: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    if PDL:  # the logits come from the previous kernel
        tl.extra.cuda.gdc_wait()
    v = tl.full([], float("-inf"), tl.float32)
    i = tl.full([], _NO_INDEX, tl.int32)
    n = tl.full([], 0, tl.int1)
    for t in range(TILES):  # tiles in index order
        cols = (chunk * TILES + t) * BLOCK + tl.arange(0, BLOCK)
        valid = cols < V
        x = tl.load(X + row * sx + cols, mask=valid, other=0.0).to(tl.float32)
        tv, ti, tn = _argmax_tile(x, cols, valid)
        v, i, n = _argmax_combine(v, i, n, tv, ti, tn)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    tl.store(PV + row * P + chunk, tl.where(n, float("nan"), v))
    tl.store(PI + row * P + chunk, i)
    if ONE_LAUNCH:
        # the last program of the row to finish reduces the partials (no second launch): the
        # barrier orders every thread's partial stores before the release of the ticket increment
        tl.debug_barrier()
        ticket = tl.atomic_add(TICKET + row, 1, sem="acq_rel", scope="gpu")
        if ticket == P - 1:
            _argmax_partials_reduce(PV, PI, TOK, row, P, PB)
            tl.store(TICKET + row, 0)  # ready for the next call (launches on a stream are ordered)


@triton.jit
def _argmax_final_kernel(PV, PI, TOK, P, PB: tl.constexpr, PDL: tl.constexpr):
    if PDL:  # the partials come from the previous kernel; the next may start once all have waited
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    _argmax_partials_reduce(PV, PI, TOK, tl.program_id(0), P, PB)


def argmax(logits, *, CHUNK, BLOCK, ONE_LAUNCH, PDL, num_warps, tickets: Tickets | None = None):
    """torch.argmax(logits, dim=-1) for [B, V] logits (unit stride in V): int64 [B]."""
    B, V = logits.shape
    P = triton.cdiv(V, CHUNK)
    pb = triton.next_power_of_2(P)
    pv = torch.empty((B, P), dtype=torch.float32, device=logits.device)
    pi = torch.empty((B, P), dtype=torch.int32, device=logits.device)
    tok = torch.empty((B,), dtype=torch.int64, device=logits.device)
    ticket = tickets.get(logits.device) if ONE_LAUNCH else pi
    if ONE_LAUNCH and ticket.numel() < B:
        raise ValueError(f"ticket counters for {ticket.numel()} rows, called with {B}")
    extra = _pdl_launch(PDL)
    _argmax_chunk_kernel[(B, P)](logits, pv, pi, tok, ticket, V, logits.stride(0), P, BLOCK=BLOCK,
                                 TILES=CHUNK // BLOCK, PB=pb, ONE_LAUNCH=bool(ONE_LAUNCH), PDL=bool(PDL),
                                 num_warps=num_warps, **extra)
    if not ONE_LAUNCH:
        _argmax_final_kernel[(B,)](pv, pi, tok, P, PB=pb, PDL=bool(PDL), num_warps=1 if pb <= 256 else 4, **extra)
    return tok
