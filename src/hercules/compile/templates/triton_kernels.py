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
# matrix-vector / skinny GEMM (batch <= 16) with optional SwiGLU epilogue and split-K


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
def _gemv_kernel(X, W, OUT, WS, M, N, K, sxm, swn, som, I,
                 BM: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
                 K_TILES: tl.constexpr, REDUCE: tl.constexpr, SWIGLU: tl.constexpr, IEEE: tl.constexpr):
    pid_n = tl.program_id(0)
    split = tl.program_id(1)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    nout = I if SWIGLU else N
    cmask = cols < nout
    rows = tl.arange(0, BM)
    rmask = rows < M
    acc = tl.zeros([BM, BLOCK_N], tl.float32)
    acc_u = tl.zeros([BM, BLOCK_N], tl.float32)
    for t in range(K_TILES):
        kk = (split * K_TILES + t) * BLOCK_K + tl.arange(0, BLOCK_K)
        kmask = kk < K
        x = tl.load(X + rows[:, None] * sxm + kk[None, :], mask=rmask[:, None] & kmask[None, :], other=0.0)
        x = x.to(tl.float32)
        w = tl.load(W + cols[:, None] * swn + kk[None, :], mask=cmask[:, None] & kmask[None, :], other=0.0)
        w = w.to(tl.float32)
        if REDUCE:  # one row: broadcast-multiply and reduce over K (no tensor cores)
            acc += tl.sum(x[:, None, :] * w[None, :, :], axis=2)
        elif IEEE:
            acc += tl.dot(x, tl.trans(w), input_precision="ieee")
        else:
            acc += tl.dot(x, tl.trans(w), input_precision="tf32")
        if SWIGLU:
            wu = tl.load(W + (cols + I)[:, None] * swn + kk[None, :], mask=cmask[:, None] & kmask[None, :], other=0.0)
            wu = wu.to(tl.float32)
            if REDUCE:
                acc_u += tl.sum(x[:, None, :] * wu[None, :, :], axis=2)
            elif IEEE:
                acc_u += tl.dot(x, tl.trans(wu), input_precision="ieee")
            else:
                acc_u += tl.dot(x, tl.trans(wu), input_precision="tf32")
    omask = rmask[:, None] & cmask[None, :]
    if SPLIT_K == 1:
        _store_product(OUT + rows[:, None] * som + cols[None, :], acc, acc_u, omask, SWIGLU)
    else:
        # fp32 partials [SPLIT_K, (2,) M, nout]; the reduce kernel sums them in split order
        base = WS + split * (2 if SWIGLU else 1) * M * nout
        tl.store(base + rows[:, None] * nout + cols[None, :], acc, mask=omask)
        if SWIGLU:
            tl.store(base + M * nout + rows[:, None] * nout + cols[None, :], acc_u, mask=omask)


@triton.jit
def _gemv_reduce_kernel(WS, OUT, M, NOUT, som, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr, SWIGLU: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < NOUT
    stride = (2 if SWIGLU else 1) * M * NOUT
    acc = tl.zeros([BLOCK], tl.float32)
    acc_u = tl.zeros([BLOCK], tl.float32)
    for s in range(SPLIT_K):
        acc += tl.load(WS + s * stride + row * NOUT + cols, mask=mask, other=0.0)
        if SWIGLU:
            acc_u += tl.load(WS + s * stride + M * NOUT + row * NOUT + cols, mask=mask, other=0.0)
    _store_product(OUT + row * som + cols, acc, acc_u, mask, SWIGLU)


def gemv(x, weight, *, BLOCK_N, BLOCK_K, SPLIT_K, num_warps, MODE, swiglu_i: int = 0):
    """x [M, K] @ weight[N, K]^T -> [M, N]; with ``swiglu_i`` = I: silu(x Wg^T) * (x Wu^T) -> [M, I]."""
    M, K = x.shape
    N = weight.shape[0]
    nout = swiglu_i if swiglu_i else N
    bm = 1 if MODE == "reduce" else max(16, triton.next_power_of_2(M))
    out = torch.empty((M, nout), dtype=x.dtype, device=x.device)
    k_tiles = triton.cdiv(triton.cdiv(K, SPLIT_K), BLOCK_K)
    ws = out
    if SPLIT_K > 1:
        ws = torch.empty((SPLIT_K * (2 if swiglu_i else 1) * M * nout,), dtype=torch.float32, device=x.device)
    grid = (triton.cdiv(nout, BLOCK_N), SPLIT_K)
    _gemv_kernel[grid](x, weight, out, ws, M, N, K, x.stride(0), weight.stride(0), out.stride(0), swiglu_i,
                       BM=bm, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, SPLIT_K=SPLIT_K, K_TILES=k_tiles,
                       REDUCE=MODE == "reduce", SWIGLU=bool(swiglu_i), IEEE=x.dtype == torch.float32,
                       num_warps=num_warps)
    if SPLIT_K > 1:
        blk = 1024
        _gemv_reduce_kernel[(M, triton.cdiv(nout, blk))](ws, out, M, nout, out.stride(0), SPLIT_K=SPLIT_K,
                                                          BLOCK=blk, SWIGLU=bool(swiglu_i), num_warps=4)
    return out


# ---------------------------------------------------------------------------------------------
# residual add + RMSNorm folded into the projection that reads its output (one kernel, not two)


@triton.jit
def _norm_gemv_kernel(X, R, NW, W, OUT, HOUT, M, K, sxm, srm, som, shm, swn, eps, I,
                      BM: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, K_TILES: tl.constexpr,
                      NOUT: tl.constexpr, SWIGLU: tl.constexpr):
    pid_n = tl.program_id(0)
    rows = tl.arange(0, BM)
    rmask = rows < M
    dt = OUT.dtype.element_ty
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
        if pid_n == 0:
            tl.store(HOUT + rows[:, None] * shm + kk[None, :], h.to(dt), mask=m2)
    rstd = tl.rsqrt(ss / K + eps)
    # pass 2: the product over the normalised rows (weight * (h * rstd) rounded where HF rounds)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    cmask = cols < NOUT
    acc = tl.zeros([BM, BLOCK_N], tl.float32)
    acc_u = tl.zeros([BM, BLOCK_N], tl.float32)
    for t in range(K_TILES):
        kk = t * BLOCK_K + tl.arange(0, BLOCK_K)
        kmask = kk < K
        m2 = rmask[:, None] & kmask[None, :]
        x = tl.load(X + rows[:, None] * sxm + kk[None, :], mask=m2, other=0.0).to(tl.float32)
        r = tl.load(R + rows[:, None] * srm + kk[None, :], mask=m2, other=0.0).to(tl.float32)
        h = (r + x).to(dt).to(tl.float32)
        nw = tl.load(NW + kk, mask=kmask, other=0.0).to(tl.float32)
        n = (nw[None, :] * (h * rstd[:, None]).to(dt).to(tl.float32)).to(dt).to(tl.float32)
        w = tl.load(W + cols[:, None] * swn + kk[None, :], mask=cmask[:, None] & kmask[None, :], other=0.0)
        acc += tl.sum(n[:, None, :] * w.to(tl.float32)[None, :, :], axis=2)
        if SWIGLU:
            wu = tl.load(W + (cols + I)[:, None] * swn + kk[None, :], mask=cmask[:, None] & kmask[None, :],
                         other=0.0)
            acc_u += tl.sum(n[:, None, :] * wu.to(tl.float32)[None, :, :], axis=2)
    _store_product(OUT + rows[:, None] * som + cols[None, :], acc, acc_u, rmask[:, None] & cmask[None, :], SWIGLU)


def norm_gemv(x, residual, norm_weight, eps, weight, *, BLOCK_N, BLOCK_K, num_warps, swiglu_i: int = 0):
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
                            K_TILES=triton.cdiv(K, BLOCK_K), NOUT=nout, SWIGLU=bool(swiglu_i),
                            num_warps=num_warps)
    return out, h
