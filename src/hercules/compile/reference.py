"""PyTorch implementations of every region: the references candidates are checked against and the
fallback the runtime always has.

Each function follows the Hugging Face Llama / Qwen3 modules op for op (same dtype casts, same
order of operations), so an all-PyTorch plan reproduces eager HF closely. Where a faster PyTorch
formulation exists (one GEMM over fused [Wq;Wk;Wv] instead of three) it is a separate *variant*
candidate, not the fallback.

Call conventions (decode step; the prefill uses the same functions with an extra T dimension):

=================  =====================================================================
embedding          (token[B], weight[V,H]) -> x[B,H]
residual_rmsnorm   (x[B,H], residual[B,H], weight[H], eps) -> (normed, residual + x)
final_norm         same as residual_rmsnorm
qkv_proj           (x[B,H], weight[QKV,H], q_size, kv_size) -> (q[B,Q], k[B,KV], v[B,KV]) (views)
qk_norm            (q[B,nq,hd], k[B,nkv,hd], q_weight[hd], k_weight[hd], eps) -> (q, k)
rotary             (q, k, cos[1,hd], sin[1,hd], q_weight|None, k_weight|None, eps) -> (q, k)
                   (with weights: q/k RMSNorm first -- the fused qk_norm+rotary semantics)
kv_write           (k[B,nkv,hd], v[B,nkv,hd], k_cache[B,nkv,C,hd], v_cache, pos[1]) -> None
decode_attention   (q[B,nq,hd], k_cache, v_cache, pos[1], scale) -> out[B,nq,hd]
                   (attends to cache positions 0..pos inclusive)
o_proj/down_proj   (x[B,K], weight[N,K]) -> [B,N]
gate_up_silu_mul   (x[B,H], weight[2I,H], intermediate) -> silu(x Wg^T) * (x Wu^T)  [B,I]
lm_head            (x[B,H], weight[V,H]) -> logits[B,V]
token_select       (logits[B,V], sampling, noise[B,V] float32 | None) -> token[B] int64
=================  =====================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


# ---------------------------------------------------------------------------------------------
# references (the fallback implementations)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """HF LlamaRMSNorm / Qwen3RMSNorm exactly: fp32 statistics, cast back, then weight * x."""
    dt = x.dtype
    h = x.to(torch.float32)
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + eps)
    return weight * h.to(dt)


def embedding(token: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.embedding(token, weight)


def residual_rmsnorm(x, residual, weight, eps):
    h = residual + x  # HF: hidden_states = residual + hidden_states
    return rmsnorm(h, weight, eps), h


final_norm = residual_rmsnorm

# Projections that can take the residual add + RMSNorm before them into their own kernel
# (fuses=("residual_rmsnorm",)), and the norm weight each one reads.
NORM_FUSABLE = {"qkv_proj": "in_norm", "gate_up_silu_mul": "post_norm"}


def norm_fused_key(kind: str) -> str:
    """The implementation-table entry of a projection with the residual add + RMSNorm folded in."""
    return f"residual_rmsnorm+{kind}"


def norm_then(projection):
    """The reference of a projection with the residual add + RMSNorm folded in front of it:
    ``fn(x, residual, norm_weight, eps, weight, *rest) -> (*outputs, new_residual)``."""

    def fused(x, residual, norm_weight, eps, weight, *rest):
        normed, h = residual_rmsnorm(x, residual, norm_weight, eps)
        out = projection(normed, weight, *rest)
        return (*out, h) if isinstance(out, tuple) else (out, h)

    return fused


# Projections that can take the residual add + RMSNorm after them into their own kernel's epilogue
# (fuses=("residual_rmsnorm",)), and the norm weight that follows each: o_proj the layer's
# post-attention norm; down_proj the next layer's input norm (the final norm after the last layer).
EPILOGUE_NORM = {"o_proj": "post_norm", "down_proj": "in_norm"}


def add_norm_fused_key(kind: str) -> str:
    """The implementation-table entry of a projection with the residual add + RMSNorm after it
    folded into its epilogue."""
    return f"{kind}+residual_rmsnorm"


def then_norm(projection):
    """The reference of a projection with the residual add + RMSNorm after it folded in:
    ``fn(x, weight, residual, norm_weight, eps) -> (normed, new_residual)``, where
    new_residual = residual + projection(x) (the projection rounded to the model dtype first, as HF
    adds)."""

    def fused(x, weight, residual, norm_weight, eps):
        return residual_rmsnorm(projection(x, weight), residual, norm_weight, eps)

    return fused


def qkv_proj_split(x, weight, q_size: int, kv_size: int):
    """Three GEMMs over views of the fused weight: op for op what HF does (the exact fallback)."""
    wq = weight[:q_size]
    wk = weight[q_size : q_size + kv_size]
    wv = weight[q_size + kv_size :]
    return F.linear(x, wq), F.linear(x, wk), F.linear(x, wv)


def split_qkv(qkv, q_size: int, kv_size: int):
    """Views of q, k and v in a fused [..., q_size + 2 * kv_size] projection output."""
    return qkv[..., :q_size], qkv[..., q_size : q_size + kv_size], qkv[..., q_size + kv_size :]


def qkv_proj_fused(x, weight, q_size: int, kv_size: int):
    """One GEMM over [Wq; Wk; Wv] and views into its output."""
    return split_qkv(F.linear(x, weight), q_size, kv_size)


def qk_norm(q, k, q_weight, k_weight, eps):
    return rmsnorm(q, q_weight, eps), rmsnorm(k, k_weight, eps)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rotary(q, k, cos, sin, q_weight=None, k_weight=None, eps: float = 1e-6):
    """HF apply_rotary_pos_emb (q * cos + rotate_half(q) * sin); cos/sin are [T, hd] in q's dtype.

    With norm weights, q/k RMSNorm is applied first (Qwen3's q_norm/k_norm)."""
    if q_weight is not None:
        q, k = qk_norm(q, k, q_weight, k_weight, eps)
    cos = cos.unsqueeze(-2)
    sin = sin.unsqueeze(-2)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def kv_write(k, v, k_cache, v_cache, pos):
    """Write one position (``pos`` is a 1-element int64 device tensor: CUDA-graph safe)."""
    k_cache.index_copy_(2, pos, k.unsqueeze(2))
    v_cache.index_copy_(2, pos, v.unsqueeze(2))


def rotary_kv_write(q, k, v, cos, sin, q_weight, k_weight, eps, k_cache, v_cache, pos):
    """Rotary (with the q/k norm when weights are given) and the KV-cache write in one call: the
    rotated k goes straight into the cache, so only q comes back."""
    qo, ko = rotary(q, k, cos, sin, q_weight, k_weight, eps)
    kv_write(ko, v, k_cache, v_cache, pos)
    return qo


ROTARY_KV_KEY = "rotary+kv_write"  # the implementation-table entry of a rotary that writes the cache


def rotary_kv_attention(q, k, v, cos, sin, q_weight, k_weight, eps, k_cache, v_cache, pos, scale: float):
    """Rotary (with the q/k norm when weights are given), the KV-cache write and decode attention in
    one call: the attention output [B, nq, hd] comes back, the caches hold the new k and v."""
    return decode_attention(rotary_kv_write(q, k, v, cos, sin, q_weight, k_weight, eps, k_cache, v_cache, pos),
                            k_cache, v_cache, pos, scale)


ROTARY_KV_ATTN_KEY = "rotary+kv_write+attention"  # the entry of a rotary that also attends


def decode_attention(q, k_cache, v_cache, pos, scale: float):
    """Grouped-query attention of one query position over cache positions 0..pos.

    Matches HF eager attention's casts (scores in the model dtype, softmax in fp32, probabilities
    cast back) and reads the whole static cache with a mask, so it has no data-dependent shapes.
    """
    B, nq, hd = q.shape
    nkv, cap = k_cache.shape[1], k_cache.shape[2]
    g = nq // nkv
    qg = q.reshape(B, nkv, g, hd)
    scores = torch.matmul(qg, k_cache.transpose(-1, -2)) * scale  # [B, nkv, g, cap]
    invalid = torch.arange(cap, device=q.device) > pos  # [cap]
    scores = scores.masked_fill(invalid, float("-inf"))
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    out = torch.matmul(probs, v_cache)  # [B, nkv, g, hd]
    return out.reshape(B, nq, hd)


def decode_attention_sdpa(q, k_cache, v_cache, pos, scale: float):
    """Variant: torch SDPA with a boolean mask and native GQA."""
    B, nq, hd = q.shape
    cap = k_cache.shape[2]
    valid = torch.arange(cap, device=q.device) <= pos
    out = F.scaled_dot_product_attention(
        q.unsqueeze(2), k_cache, v_cache, attn_mask=valid.view(1, 1, 1, cap), scale=scale, enable_gqa=True
    )
    return out.reshape(B, nq, hd)


def decode_attention_exact(q, k_cache, v_cache, length: int, scale: float):
    """HF's own decode call (sdpa over exactly the ``length`` valid positions, native GQA): the
    exact-mode attention. ``length`` is a host int, so it cannot live in a CUDA graph."""
    B, nq, hd = q.shape
    out = F.scaled_dot_product_attention(q.unsqueeze(2), k_cache[:, :, :length], v_cache[:, :, :length], scale=scale,
                                         enable_gqa=True)
    return out.reshape(B, nq, hd)


def linear(x, weight):
    return F.linear(x, weight)


def gate_up_silu_mul_split(x, weight, intermediate: int):
    """HF LlamaMLP / Qwen3MLP: act_fn(gate_proj(x)) * up_proj(x) over views of the fused weight."""
    return F.silu(F.linear(x, weight[:intermediate])) * F.linear(x, weight[intermediate:])


def gate_up_silu_mul_fused(x, weight, intermediate: int):
    gu = F.linear(x, weight)
    return F.silu(gu[..., :intermediate]) * gu[..., intermediate:]


def silu_mul(gu: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up on a fused [.., 2I] GEMM output (the SwiGLU templates' reference)."""
    i = gu.shape[-1] // 2
    return F.silu(gu[..., :i]) * gu[..., i:]


# ---------------------------------------------------------------------------------------------
# token selection


@dataclass(frozen=True)
class Sampling:
    do_sample: bool = False
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def key(self) -> tuple:
        return (self.do_sample, float(self.temperature), self.top_k, self.top_p)


def process_logits(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """HF's logits processors in HF's order: temperature, top-k, top-p (fp32 scores)."""
    s = logits.float()
    if sampling.temperature != 1.0:
        s = s / sampling.temperature
    if sampling.top_k is not None and sampling.top_k > 0:
        k = min(int(sampling.top_k), s.shape[-1])
        kth = torch.topk(s, k, dim=-1).values[..., -1:]
        s = s.masked_fill(s < kth, float("-inf"))
    if sampling.top_p is not None and sampling.top_p < 1.0:
        sorted_s, idx = torch.sort(s, dim=-1, descending=False)
        cum = sorted_s.softmax(dim=-1).cumsum(dim=-1)
        remove = cum <= (1 - sampling.top_p)
        remove[..., -1:] = False  # keep at least one token
        remove = remove.scatter(-1, idx, remove)
        s = s.masked_fill(remove, float("-inf"))
    return s


def token_select(logits: torch.Tensor, sampling: Sampling, noise: torch.Tensor | None = None) -> torch.Tensor:
    """Greedy argmax, or a sample drawn by the exponential race argmax(p / E), E ~ Exp(1).

    The race needs no multinomial call, so it runs inside a CUDA graph; the noise is drawn outside
    the graph from a seeded ``torch.Generator`` into a static buffer.
    """
    if not sampling.do_sample:
        return torch.argmax(logits, dim=-1)
    probs = torch.softmax(process_logits(logits, sampling), dim=-1)
    return torch.argmax(probs / noise, dim=-1)


# ---------------------------------------------------------------------------------------------
# tolerances for validating candidates against these references

TOLERANCES = {  # (atol relative to max|ref|, rtol)
    torch.float32: (1e-4, 1e-4),
    torch.float16: (5e-3, 5e-3),
    torch.bfloat16: (2e-2, 2e-2),
}


def compare(out, ref, dtype: torch.dtype) -> tuple[bool, float, str]:
    """(ok, max_abs_err, message) for one output (tensor or tuple of tensors)."""
    if isinstance(ref, (tuple, list)):
        if not isinstance(out, (tuple, list)) or len(out) != len(ref):
            return False, float("inf"), "output structure differs from the reference"
        worst, msgs, ok_all = 0.0, [], True
        for o, r in zip(out, ref):
            ok, err, msg = compare(o, r, dtype)
            ok_all &= ok
            worst = max(worst, err)
            if msg:
                msgs.append(msg)
        return ok_all, worst, "; ".join(msgs)
    if ref is None:
        return out is None, 0.0, "" if out is None else "expected no output"
    if not isinstance(out, torch.Tensor) or type(out) is not torch.Tensor:
        return False, float("inf"), f"output is {type(out).__name__}, not torch.Tensor"
    if out.shape != ref.shape or out.dtype != ref.dtype:
        return False, float("inf"), f"shape/dtype {tuple(out.shape)}/{out.dtype} != {tuple(ref.shape)}/{ref.dtype}"
    if not ref.is_floating_point():
        bad = int((out != ref).sum())
        return bad == 0, float(bad), "" if bad == 0 else f"{bad} integer outputs differ"
    o, r = out.float(), ref.float()
    if not torch.isfinite(o).all():
        return False, float("inf"), "non-finite output"
    atol, rtol = TOLERANCES.get(dtype, TOLERANCES[torch.float32])
    err = (o - r).abs()
    scale = float(r.abs().max()) if r.numel() else 0.0
    ok = bool((err <= atol * max(scale, 1e-6) + rtol * r.abs()).all())
    m = float(err.max()) if err.numel() else 0.0
    return ok, m, "" if ok else f"max abs err {m:.3g} over tolerance (atol {atol}*{scale:.3g}, rtol {rtol})"
