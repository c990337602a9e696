"""Triton kernel templates: parameter spaces, declared requirements and materialisation.

The kernels live in ``triton_kernels.py`` (imported lazily, so ``import hercules.compile`` works
without triton); a parameter point becomes a callable with the region's call convention that
launches the kernel with those constexpr / launch parameters.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from .. import reference as ref
from ..reference import split_qkv
from ..regions import Region, dtype_from_name
from .base import Candidate, Requirements, Template, grid, next_pow2

_LINEAR_KINDS = ("qkv_proj", "o_proj", "down_proj", "lm_head", "gate_up_silu_mul")


def _kernels():
    from . import triton_kernels

    return triton_kernels


def _es(region: Region) -> int:
    return torch.empty((), dtype=dtype_from_name(region.dtype)).element_size()


def _min_sm(region: Region) -> tuple[int, int]:
    return (8, 0) if region.dtype == "bfloat16" else (7, 0)


class TritonAddRMSNorm(Template):
    name = "triton_add_rmsnorm"
    lang = "triton"
    kinds = ("residual_rmsnorm", "final_norm")

    def space(self, region):
        b = next_pow2(region.attr("hidden"))
        return grid(BLOCK=[b], num_warps=[1, 2, 4, 8, 16])

    def requirements(self, p, region):
        per_thread = p["BLOCK"] // (32 * p["num_warps"])
        return Requirements(
            backend="triton", min_sm=_min_sm(region), threads_per_block=32 * p["num_warps"],
            regs_per_thread=4 * per_thread + 24,
            at_least=(("BLOCK >= hidden (one pass over the row)", p["BLOCK"], region.attr("hidden")),),
            power_of_two=(("BLOCK", p["BLOCK"]),),
            last_dim_contiguous=("x", "residual"), contiguous=("weight",),
            same_dtype_inputs=("x", "residual", "weight"),
        )

    def materialise(self, p, region):
        k = _kernels()
        blk, nw = p["BLOCK"], p["num_warps"]

        def add_rmsnorm(x, residual, weight, eps):
            return k.add_rmsnorm(x, residual, weight, eps, BLOCK=blk, num_warps=nw)

        return Candidate(self.spec(p, region), add_rmsnorm)


class TritonSiluMul(Template):
    """SwiGLU on the library GEMM's fused gate/up output: F.linear(x, [Wg;Wu]) then this kernel."""

    name = "triton_swiglu"
    lang = "triton"
    kinds = ("gate_up_silu_mul",)

    def space(self, region):
        return grid(BLOCK=[256, 512, 1024, 2048], num_warps=[1, 2, 4, 8])

    def requirements(self, p, region):
        per_thread = p["BLOCK"] // (32 * p["num_warps"])
        return Requirements(
            backend="triton", min_sm=_min_sm(region), threads_per_block=32 * p["num_warps"],
            regs_per_thread=4 * per_thread + 20, power_of_two=(("BLOCK", p["BLOCK"]),),
            contiguous=("x", "weight"),
        )

    def materialise(self, p, region):
        k = _kernels()
        blk, nw = p["BLOCK"], p["num_warps"]
        import torch.nn.functional as F

        def gate_up_silu_mul(x, weight, intermediate):
            return k.silu_mul(F.linear(x, weight), BLOCK=blk, num_warps=nw)

        gate_up_silu_mul.kernel = functools.partial(k.silu_mul, BLOCK=blk, num_warps=nw)
        return Candidate(self.spec(p, region), gate_up_silu_mul)


def _check_norm_convention(has_norm: bool, q_weight) -> None:
    """A rotary candidate is built with or without the q/k norm; the caller passes norm weights
    exactly when the norm is to be applied inside it."""
    if has_norm != (q_weight is not None):
        raise ValueError(f"candidate built with HAS_NORM={int(has_norm)} called with the other convention")


class TritonQKRotary(Template):
    name = "triton_qk_rotary"
    lang = "triton"
    kinds = ("rotary",)

    def space(self, region):
        norms = [0, 1] if region.attr("qk_norm_fusable") else [0]
        return grid(HEADS=[1, 2, 4, 8], num_warps=[1, 2, 4], HAS_NORM=norms)

    def fuses(self, p, region):
        return ("qk_norm",) if p.get("HAS_NORM") else ()

    def requirements(self, p, region):
        hd = region.attr("head_dim")
        return Requirements(
            backend="triton", min_sm=_min_sm(region), threads_per_block=32 * p["num_warps"],
            regs_per_thread=6 * max(1, p["HEADS"] * hd // (32 * p["num_warps"])) + 24,
            power_of_two=(("head_dim", hd),), at_least=(("head_dim", hd, 2),),
            last_dim_contiguous=("q", "k"), contiguous=("cos", "sin"),
        )

    def materialise(self, p, region):
        k = _kernels()
        heads, nw, has_norm = p["HEADS"], p["num_warps"], bool(p["HAS_NORM"])

        def qk_rotary(q, kk, cos, sin, q_weight=None, k_weight=None, eps=1e-6):
            _check_norm_convention(has_norm, q_weight)
            return k.qk_rotary(q, kk, cos, sin, q_weight, k_weight, eps, HEADS=heads, num_warps=nw, HAS_NORM=has_norm)

        return Candidate(self.spec(p, region), qk_rotary)


class TritonQKRotaryKV(TritonQKRotary):
    """Rotary (and the q/k norm when HAS_NORM) with the KV-cache write in the same kernel: the rotated
    k and the v go straight into the caches, one kernel a layer fewer."""

    name = "triton_qk_rotary_kv"

    def fuses(self, p, region):
        return ("qk_norm", "kv_write") if p.get("HAS_NORM") else ("kv_write",)

    def materialise(self, p, region):
        k = _kernels()
        heads, nw, has_norm = p["HEADS"], p["num_warps"], bool(p["HAS_NORM"])

        def qk_rotary_kv(q, kk, v, cos, sin, q_weight, k_weight, eps, k_cache, v_cache, pos):
            _check_norm_convention(has_norm, q_weight)
            return k.qk_rotary_kv(q, kk, v, cos, sin, q_weight, k_weight, eps, k_cache, v_cache, pos, HEADS=heads,
                                  num_warps=nw, HAS_NORM=has_norm)

        return Candidate(self.spec(p, region), qk_rotary_kv)


class TritonRotaryFlashDecode(Template):
    """Rotary (and the q/k norm when HAS_NORM), the KV-cache write and flash-decoding attention in
    one kernel: a candidate of the rotary region that also does the kv_write and decode_attention
    regions' work (two or three kernels a layer fewer than rotary + attention)."""

    name = "triton_rotary_flash_decode"
    lang = "triton"
    kinds = ("rotary",)

    def space(self, region):
        norms = [0, 1] if region.attr("qk_norm_fusable") else [0]
        return grid(BLOCK_N=[16, 32, 64, 128], SPLITS=[1, 2, 4, 8, 16], num_warps=[2, 4, 8], HAS_NORM=norms)

    def fuses(self, p, region):
        return ("qk_norm", "kv_write", "decode_attention") if p.get("HAS_NORM") else ("kv_write", "decode_attention")

    def requirements(self, p, region):
        return _flash_requirements(p, region, region.attr("heads") // region.attr("kv_heads"),
                                   last_dim_contiguous=("q", "k"), contiguous=("cos", "sin"))

    def materialise(self, p, region):
        k = _kernels()
        bn, sp, nw, has_norm = p["BLOCK_N"], p["SPLITS"], p["num_warps"], bool(p["HAS_NORM"])

        def rotary_kv_attention(q, kk, v, cos, sin, q_weight, k_weight, eps, k_cache, v_cache, pos, scale):
            _check_norm_convention(has_norm, q_weight)
            return k.rotary_kv_attention(q, kk, v, cos, sin, q_weight, k_weight, eps, k_cache, v_cache, pos, scale,
                                         BLOCK_N=bn, SPLITS=sp, num_warps=nw, HAS_NORM=has_norm)

        return Candidate(self.spec(p, region), rotary_kv_attention)


class TritonKVWrite(Template):
    name = "triton_kv_write"
    lang = "triton"
    kinds = ("kv_write",)

    def space(self, region):
        return grid(HEADS=[1, 2, 4, 8], num_warps=[1, 2])

    def requirements(self, p, region):
        hd = region.attr("head_dim")
        return Requirements(
            backend="triton", min_sm=_min_sm(region), threads_per_block=32 * p["num_warps"],
            regs_per_thread=2 * max(1, p["HEADS"] * hd // (32 * p["num_warps"])) + 24,
            power_of_two=(("head_dim", hd),),
            last_dim_contiguous=("k", "v", "k_cache", "v_cache"),
        )

    def materialise(self, p, region):
        k = _kernels()
        heads, nw = p["HEADS"], p["num_warps"]

        def kv_write(kk, v, k_cache, v_cache, pos):
            k.kv_write(kk, v, k_cache, v_cache, pos, HEADS=heads, num_warps=nw)

        return Candidate(self.spec(p, region), kv_write)


def _flash_requirements(p, region: Region, group: int, **layout) -> Requirements:
    """Register, shared-memory and shape needs of a flash-decoding kernel (tiles of BLOCK_N cache
    positions against the query heads of one kv head, padded to at least 16 for tl.dot)."""
    hd = region.attr("head_dim")
    gp = max(16, next_pow2(group))
    nw = p["num_warps"]
    live = gp * hd * 2 + p["BLOCK_N"] * hd * 2 + gp * p["BLOCK_N"] * 2  # fp32 q/acc, k/v tiles, scores/probs
    return Requirements(
        backend="triton", min_sm=_min_sm(region), threads_per_block=32 * nw,
        regs_per_thread=live // (32 * nw) + 32,
        smem_bytes=2 * p["BLOCK_N"] * hd * 4 + gp * hd * 4,
        power_of_two=(("head_dim", hd), ("SPLITS", p["SPLITS"])),
        at_least=(("head_dim (tl.dot needs >= 16)", hd, 16),),
        at_most=(("query heads per kv head", group, 64),),
        **layout,
    )


class TritonFlashDecode(Template):
    name = "triton_flash_decode"
    lang = "triton"
    kinds = ("decode_attention",)

    def space(self, region):
        return grid(BLOCK_N=[16, 32, 64, 128], SPLITS=[1, 2, 4, 8, 16, 32], num_warps=[2, 4, 8])

    def requirements(self, p, region):
        return _flash_requirements(p, region, region.attr("group"), last_dim_contiguous=("q", "k_cache", "v_cache"))

    def materialise(self, p, region):
        k = _kernels()
        bn, sp, nw = p["BLOCK_N"], p["SPLITS"], p["num_warps"]

        def attention(q, k_cache, v_cache, pos, scale):
            return k.decode_attention(q, k_cache, v_cache, pos, scale, BLOCK_N=bn, SPLITS=sp, num_warps=nw)

        return Candidate(self.spec(p, region), attention)


class TritonGemv(Template):
    """Matrix-vector / skinny GEMM for batch <= 16 (weights read once, fp32 accumulation), BLOCK_N
    output rows per program, optional SwiGLU epilogue for the gate/up region. Split-K partials go
    to an fp32 workspace and are summed in split order (deterministic, bit-identical either way) by
    a second kernel (SPLIT_REDUCE=kernel) or by the last split of each column tile to finish
    (SPLIT_REDUCE=last: one launch; an int ticket per tile, no atomics on the data). PDL=1 launches
    it as a programmatic dependent (SM 9.0+, see triton_kernels). Competes with cuBLAS and the CUDA
    GEMV; kept only where measured faster."""

    name = "triton_gemv"
    lang = "triton"
    kinds = _LINEAR_KINDS

    def space(self, region):
        # SPLIT_REDUCE and PDL vary fastest, so the twins of an advised point are tried right after
        # it: "last" (one launch) before "kernel" (a second, reduce launch); PDL on before off
        pts = grid(MODE=["reduce", "dot"], BLOCK_N=[16, 32, 64, 128], BLOCK_K=[64, 128, 256],
                   SPLIT_K=[1, 2, 4, 8], num_warps=[2, 4, 8], SPLIT_REDUCE=["last", "kernel", "none"], PDL=[1, 0])
        return [p for p in pts if (p["SPLIT_K"] == 1) == (p["SPLIT_REDUCE"] == "none")]

    def requirements(self, p, region):
        K = region.attr("in_features")
        sw = 2 if region.kind == "gate_up_silu_mul" else 1
        nw = p["num_warps"]
        smem = 0
        if p["MODE"] == "reduce":
            live = sw * p["BLOCK_N"] * p["BLOCK_K"] + p["BLOCK_K"] + sw * p["BLOCK_N"]
        else:
            bm = max(16, next_pow2(region.batch))
            live = bm * p["BLOCK_K"] + sw * (p["BLOCK_N"] * p["BLOCK_K"] + bm * p["BLOCK_N"])
            # tl.dot stages its x and weight tiles in shared memory, two buffers deep in the
            # pipelined K loop: fp32 with BLOCK_N 128 / BLOCK_K 256 asked for 294,912 B on the H200
            # (limit 232,448 B) and failed to launch, as this formula gives.
            smem = 2 * (bm * p["BLOCK_K"] + sw * p["BLOCK_N"] * p["BLOCK_K"]) * _es(region)
        return Requirements(
            backend="triton", min_sm=_min_sm(region), threads_per_block=32 * nw,
            regs_per_thread=live // (32 * nw) + 32, smem_bytes=smem,
            max_batch=1 if p["MODE"] == "reduce" else 16,
            at_least=(("K tiles per split (in_features / BLOCK_K / SPLIT_K)", K // (p["BLOCK_K"] * p["SPLIT_K"]), 1),),
            contiguous=("weight",), last_dim_contiguous=("x",),
        )

    def materialise(self, p, region):
        k = _kernels()
        # .get: plans cached before SPLIT_REDUCE / PDL existed name the two-launch, PDL-off kernel
        kw = dict(BLOCK_N=p["BLOCK_N"], BLOCK_K=p["BLOCK_K"], SPLIT_K=p["SPLIT_K"], num_warps=p["num_warps"],
                  MODE=p["MODE"], SPLIT_REDUCE=p.get("SPLIT_REDUCE", "kernel"), PDL=p.get("PDL", 0))
        if kw["SPLIT_K"] > 1 and kw["SPLIT_REDUCE"] == "last":
            nout = region.attr("intermediate") if region.kind == "gate_up_silu_mul" else region.attr("out_features")
            kw["tickets"] = k.Tickets(-(-nout // p["BLOCK_N"]))
        kind = region.kind
        if kind == "qkv_proj":
            def fn(x, weight, q_size, kv_size):
                qkv = k.gemv(x, weight, **kw)
                return split_qkv(qkv, q_size, kv_size)
        elif kind == "gate_up_silu_mul":
            def fn(x, weight, intermediate):
                return k.gemv(x, weight, swiglu_i=intermediate, **kw)
        else:
            def fn(x, weight):
                return k.gemv(x, weight, **kw)
        return Candidate(self.spec(p, region), fn)


class TritonNormGemv(Template):
    """The residual add + RMSNorm folded into the projection after it (QKV, or gate/up with the
    SwiGLU epilogue): every program recomputes the row's RMS from the few-KB hidden rows and
    program 0 writes the new residual, so a layer launches two kernels fewer. Batch rows are few:
    a broadcast-multiply reduction, no tensor cores. PDL=1: a programmatic dependent launch whose
    first weight tile is read before the wait (SM 9.0+)."""

    name = "triton_norm_gemv"
    lang = "triton"
    kinds = ("qkv_proj", "gate_up_silu_mul")

    def space(self, region):
        return grid(BLOCK_N=[8, 16, 32, 64], BLOCK_K=[64, 128, 256], num_warps=[2, 4, 8], PDL=[1, 0])

    def fuses(self, p, region):
        return ("residual_rmsnorm",)

    def requirements(self, p, region):
        sw = 2 if region.kind == "gate_up_silu_mul" else 1
        bm = next_pow2(region.batch)
        live = sw * bm * p["BLOCK_N"] * p["BLOCK_K"] + 3 * bm * p["BLOCK_K"] + sw * bm * p["BLOCK_N"]
        if p.get("PDL"):  # the first weight tile is held across the wait and the norm's first pass
            live += sw * p["BLOCK_N"] * p["BLOCK_K"] * _es(region) // 4
        return Requirements(
            backend="triton", min_sm=_min_sm(region), threads_per_block=32 * p["num_warps"],
            regs_per_thread=live // (32 * p["num_warps"]) + 32, max_batch=8,
            contiguous=("weight",), last_dim_contiguous=("x",),
        )

    def materialise(self, p, region):
        k = _kernels()
        kw = dict(BLOCK_N=p["BLOCK_N"], BLOCK_K=p["BLOCK_K"], num_warps=p["num_warps"], PDL=p.get("PDL", 0))
        if region.kind == "qkv_proj":
            def fn(x, residual, norm_weight, eps, weight, q_size, kv_size):
                qkv, h = k.norm_gemv(x, residual, norm_weight, eps, weight, **kw)
                return (*split_qkv(qkv, q_size, kv_size), h)
        else:
            def fn(x, residual, norm_weight, eps, weight, intermediate):
                return k.norm_gemv(x, residual, norm_weight, eps, weight, swiglu_i=intermediate, **kw)
        return Candidate(self.spec(p, region), fn)


class TritonGemvAddNorm(Template):
    """o_proj or down_proj with the residual add + RMSNorm after it in its epilogue: every program
    adds the residual to its output columns and stores them as the new residual; the last program
    to finish (an int ticket) normalises the whole rows. One kernel where the plan had two; the
    projection after it (gate/up, or the next layer's QKV) then reads the normalised rows as a plain
    GEMV. Batch rows are few: a broadcast-multiply reduction. PDL=1: a programmatic dependent launch
    whose first weight tile is read before the wait (SM 9.0+)."""

    name = "triton_gemv_add_rmsnorm"
    lang = "triton"
    kinds = tuple(ref.EPILOGUE_NORM)

    def space(self, region):
        return grid(BLOCK_N=[8, 16, 32, 64], BLOCK_K=[64, 128, 256], num_warps=[2, 4, 8], PDL=[1, 0])

    def fuses(self, p, region):
        return ("residual_rmsnorm",)

    def requirements(self, p, region):
        bm = next_pow2(region.batch)
        live = bm * p["BLOCK_N"] * p["BLOCK_K"] + bm * p["BLOCK_K"] + bm * p["BLOCK_N"]
        if p.get("PDL"):  # the first weight tile is held across the wait
            live += p["BLOCK_N"] * p["BLOCK_K"] * _es(region) // 4
        return Requirements(
            backend="triton", min_sm=_min_sm(region), threads_per_block=32 * p["num_warps"],
            regs_per_thread=max(live, bm * min(next_pow2(region.attr("out_features")), 1024)) // (32 * p["num_warps"])
            + 32, max_batch=8, contiguous=("weight",), last_dim_contiguous=("x",),
        )

    def materialise(self, p, region):
        k = _kernels()
        kw = dict(BLOCK_N=p["BLOCK_N"], BLOCK_K=p["BLOCK_K"], num_warps=p["num_warps"], PDL=p.get("PDL", 0),
                  tickets=k.Tickets(1))

        def gemv_add_rmsnorm(x, weight, residual, norm_weight, eps):
            return k.gemv_add_rmsnorm(x, weight, residual, norm_weight, eps, **kw)

        return Candidate(self.spec(p, region), gemv_add_rmsnorm)


class TritonArgmax(Template):
    """Greedy token selection as a two-stage argmax: (B, V / CHUNK) programs each reduce CHUNK
    logits (BLOCK at a time) to (value, first index); the partials are reduced by a one-program-
    per-row second kernel, or (ONE_LAUNCH=1) by the last chunk program of the row to finish (an int
    ticket; no second launch). Exactly torch.argmax: NaN wins (its first occurrence), ties go to
    the lowest index. Sampling is not a kernel here: it runs reference.token_select itself, so it
    draws exactly what the fallback draws."""

    name = "triton_argmax"
    lang = "triton"
    kinds = ("token_select",)

    def space(self, region):
        # the toggles vary fastest: the first points ablate ONE_LAUNCH and PDL at V / 1024 programs
        # (about one wave on 132 SMs at a 128k vocabulary)
        pts = grid(CHUNK=[1024, 512, 2048, 4096, 8192], BLOCK=[1024, 512, 2048, 4096], num_warps=[4, 8],
                   ONE_LAUNCH=[1, 0], PDL=[1, 0])
        return [p for p in pts if p["BLOCK"] <= p["CHUNK"]]

    def requirements(self, p, region):
        nw = p["num_warps"]
        return Requirements(
            backend="triton", min_sm=_min_sm(region), threads_per_block=32 * nw,
            regs_per_thread=6 * max(1, p["BLOCK"] // (32 * nw)) + 32,
            power_of_two=(("CHUNK", p["CHUNK"]), ("BLOCK", p["BLOCK"])),
            at_most=(("vocabulary (int32 indices)", region.attr("vocab"), 2**31 - 1),),
            last_dim_contiguous=("logits",),
        )

    def materialise(self, p, region):
        k = _kernels()
        kw = dict(CHUNK=p["CHUNK"], BLOCK=p["BLOCK"], ONE_LAUNCH=p["ONE_LAUNCH"], PDL=p["PDL"],
                  num_warps=p["num_warps"])
        tickets = k.Tickets(region.batch) if p["ONE_LAUNCH"] else None

        def token_select(logits, sampling, noise=None):
            if sampling.do_sample:
                return ref.token_select(logits, sampling, noise)
            return k.argmax(logits, tickets=tickets, **kw)

        return Candidate(self.spec(p, region), token_select)


TRITON_TEMPLATES: list[Template] = [TritonAddRMSNorm(), TritonSiluMul(), TritonQKRotary(), TritonQKRotaryKV(),
                                    TritonRotaryFlashDecode(), TritonKVWrite(), TritonFlashDecode(), TritonGemv(),
                                    TritonNormGemv(), TritonGemvAddNorm(), TritonArgmax()]


def describe_space(t: Template, region: Region) -> dict[str, Any]:
    return {"template": t.name, "size": len(t.space(region))}
