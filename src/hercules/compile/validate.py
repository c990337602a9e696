"""Inputs at a region's real shapes, the region's PyTorch reference, and the check of a candidate.

Weights are the model's own (layer ``i``'s tensors for arg set ``i``, so timing over several arg
sets walks through distinct weights the way a decode step does and does not measure a warm L2);
activations, cache contents and positions are random, drawn from a seeded generator.
"""

from __future__ import annotations

import zlib
from typing import Any, Callable

import torch

from . import reference as ref
from .reference import Sampling
from .regions import Region, dtype_from_name


class RegionWeights:
    """Per-layer weight tensors by name, from the runtime's ModelWeights or random for tests."""

    def __init__(self, model_weights=None, spec=None, device="cpu", seed: int = 0):
        self.mw = model_weights
        self.spec = spec
        self.device = torch.device(device)
        self._random: dict[tuple, torch.Tensor] = {}
        self.seed = seed

    @property
    def layers(self) -> int:
        return len(self.mw.layers) if self.mw is not None else 1

    def _rand(self, key, shape, dtype, scale, offset=0.0):
        if key not in self._random:
            g = torch.Generator().manual_seed(zlib.crc32(repr(key).encode()) ^ self.seed)
            self._random[key] = (torch.randn(shape, generator=g) * scale + offset).to(dtype=dtype, device=self.device)
        return self._random[key]

    def get(self, name: str, region: Region, layer: int = 0) -> torch.Tensor:
        dt = dtype_from_name(region.dtype)
        if self.mw is not None:
            lw = self.mw.layers[layer % len(self.mw.layers)]
            table = {
                "embed": lambda: self.mw.embed,
                "in_norm": lambda: lw.in_norm,
                "post_norm": lambda: lw.post_norm,
                "final_norm": lambda: self.mw.final_norm,
                "qkv": lambda: lw.qkv,
                "o": lambda: lw.o,
                "gate_up": lambda: lw.gate_up,
                "down": lambda: lw.down,
                "lm_head": lambda: self.mw.lm_head,
                "q_norm": lambda: lw.q_norm,
                "k_norm": lambda: lw.k_norm,
            }
            t = table[name]()
            if t is not None:
                return t
        shapes = {
            "embed": ((region.attr("vocab", 0), region.attr("hidden", 0)), 1.0, 0.0),
            "in_norm": ((region.attr("hidden", 0) or region.attr("in_features", 0),), 0.1, 1.0),
            "post_norm": ((region.attr("hidden", 0) or region.attr("in_features", 0),), 0.1, 1.0),
            "final_norm": ((region.attr("hidden", 0),), 0.1, 1.0),
            "q_norm": ((region.attr("head_dim", 0),), 0.1, 1.0),
            "k_norm": ((region.attr("head_dim", 0),), 0.1, 1.0),
        }
        if name in shapes:
            shape, sc, off = shapes[name]
            return self._rand((name, shape, layer), shape, dt, sc, off)
        n, k = region.attr("out_features"), region.attr("in_features")
        return self._rand((name, n, k, layer), (n, k), dt, k ** -0.5)

    def inv_freq(self, head_dim: int) -> tuple[torch.Tensor, float]:
        if self.mw is not None:
            return self.mw.inv_freq, self.mw.attention_scaling
        return 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)), 1.0


def names_fusion(fused: bool | tuple[str, ...], kind: str) -> bool:
    """Whether ``fused`` lists ``kind`` among the kinds it fuses (a plain True lists none)."""
    return not isinstance(fused, bool) and kind in fused


def fuses_kind(fused: bool | tuple[str, ...], kind: str) -> bool:
    """Whether a candidate's ``fused`` (True: its region's one fusion; else the kinds it fuses)
    includes ``kind``."""
    return fused is True or names_fusion(fused, kind)


def _cache_position(capacity: int, trial: int) -> int:
    """The position a trial writes / attends up to: the middle, the first, the last, a third in."""
    positions = [capacity // 2 + 3, 0, capacity - 1, capacity // 3]
    return min(capacity - 1, positions[trial % len(positions)])


def make_args(region: Region, weights: RegionWeights, *, fused: bool | tuple[str, ...] = False, seed: int = 0, trial: int = 0,
              layer: int = 0) -> tuple:
    """Fresh arguments (new buffers every call) for ``region``'s call convention."""
    dev = weights.device
    dt = dtype_from_name(region.dtype)
    g = torch.Generator().manual_seed(1000003 * seed + 7919 * trial + layer)
    B = region.batch

    def randn(*shape, scale=1.0):
        return (torch.randn(shape, generator=g) * scale).to(dtype=dt, device=dev)

    k = region.kind
    if k == "embedding":
        v = region.attr("vocab")
        return (torch.randint(0, v, (B,), generator=g).to(dev), weights.get("embed", region, layer))
    if k in ("residual_rmsnorm", "final_norm"):
        h = region.attr("hidden")
        w = weights.get("final_norm" if k == "final_norm" else "in_norm", region, layer)
        return (randn(B, h), randn(B, h), w, region.attr("eps"))
    if fused and k in ref.NORM_FUSABLE:
        # the projection's input before the residual add + RMSNorm folded into it
        h = region.attr("in_features")
        plain = make_args(region, weights, fused=False, seed=seed, trial=trial, layer=layer)
        norm_w = weights.get(ref.NORM_FUSABLE[k], region, layer)
        return (randn(B, h), randn(B, h), norm_w, region.attr("norm_eps"), *plain[1:])
    if fused and k in ref.EPILOGUE_NORM:
        # the projection's own arguments, then the residual and the norm after it (down_proj's is
        # the next layer's input norm)
        plain = make_args(region, weights, fused=False, seed=seed, trial=trial, layer=layer)
        norm_w = weights.get(ref.EPILOGUE_NORM[k], region, layer + (k == "down_proj"))
        return (*plain, randn(B, region.attr("out_features")), norm_w, region.attr("norm_eps"))
    if k == "qkv_proj":
        return (randn(B, region.attr("in_features")), weights.get("qkv", region, layer), region.attr("q"),
                region.attr("kv"))
    if k in ("qk_norm", "rotary"):
        nq, nkv, hd = region.attr("heads"), region.attr("kv_heads"), region.attr("head_dim")
        qkv = randn(B, (nq + 2 * nkv) * hd)
        q = qkv[:, : nq * hd].view(B, nq, hd)
        kk = qkv[:, nq * hd : (nq + nkv) * hd].view(B, nkv, hd)
        qw, kw = weights.get("q_norm", region, layer), weights.get("k_norm", region, layer)
        if k == "qk_norm":
            return (q, kk, qw, kw, region.attr("eps"))
        inv, scaling = weights.inv_freq(hd)
        p = int(torch.randint(0, 4096, (1,), generator=g))
        freqs = torch.tensor([float(p)])[:, None] * inv.float().cpu()[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = (emb.cos() * scaling).to(dtype=dt, device=dev)
        sin = (emb.sin() * scaling).to(dtype=dt, device=dev)
        norms = (qw, kw) if fuses_kind(fused, "qk_norm") else (None, None)
        if names_fusion(fused, "kv_write"):
            nkv, cap = region.attr("kv_heads"), region.attr("capacity")
            v = qkv[:, (nq + nkv) * hd :].view(B, nkv, hd)  # a strided view, as in the runtime
            # with attention folded in, the history it reads: first, middle, last position
            at = _cache_position(cap, trial) if names_fusion(fused, "decode_attention") else cap // 2 + trial % 3
            pos = torch.tensor([at], dtype=torch.int64, device=dev)
            args = (q, kk, v, cos, sin, *norms, region.attr("eps"), randn(B, nkv, cap, hd), randn(B, nkv, cap, hd), pos)
            return (*args, hd ** -0.5) if names_fusion(fused, "decode_attention") else args
        return (q, kk, cos, sin, *norms, region.attr("eps"))
    if k in ("kv_write", "decode_attention"):
        nkv, hd, cap = region.attr("kv_heads"), region.attr("head_dim"), region.attr("capacity")
        pos = torch.tensor([_cache_position(cap, trial)], dtype=torch.int64, device=dev)
        if k == "kv_write":
            kv = randn(B, nkv, 2 * hd)  # v is a strided view, as in the runtime
            kt = randn(B, nkv, hd)
            return (kt, kv[..., :hd], torch.zeros(B, nkv, cap, hd, dtype=dt, device=dev),
                    torch.zeros(B, nkv, cap, hd, dtype=dt, device=dev), pos)
        nq = region.attr("heads")
        return (randn(B, nq, hd), randn(B, nkv, cap, hd), randn(B, nkv, cap, hd), pos, region.attr("scale"))
    if k in ("o_proj", "down_proj", "lm_head"):
        name = {"o_proj": "o", "down_proj": "down", "lm_head": "lm_head"}[k]
        return (randn(B, region.attr("in_features")), weights.get(name, region, layer))
    if k == "gate_up_silu_mul":
        return (randn(B, region.attr("in_features")), weights.get("gate_up", region, layer), region.attr("intermediate"))
    if k == "token_select":
        return (randn(B, region.attr("vocab"), scale=3.0), Sampling(), None)
    raise KeyError(k)


def reference_fn(region: Region, fused: bool | tuple[str, ...] = False) -> Callable:
    from .templates import fallback_template

    if region.kind == "rotary":
        if names_fusion(fused, "decode_attention"):
            return ref.rotary_kv_attention
        if names_fusion(fused, "kv_write"):
            return ref.rotary_kv_write
        return ref.rotary  # with norm weights in the args it is qk_norm + rotary
    if fused and region.kind in ref.NORM_FUSABLE:
        return ref.norm_then(fallback_template(region).fn)
    if fused and region.kind in ref.EPILOGUE_NORM:
        return ref.then_norm(fallback_template(region).fn)
    return fallback_template(region).fn


def run(fn: Callable, region: Region, args: tuple, fused: bool | tuple[str, ...] = False) -> Any:
    """Call ``fn``; for the in-place kv_write the 'output' is the two caches (and for a rotary that
    writes the cache: q and the two caches)."""
    out = fn(*args)
    if region.kind == "kv_write":
        return (args[2], args[3])
    if region.kind == "rotary" and names_fusion(fused, "kv_write"):
        return (out, args[8], args[9])  # (q, k, v, cos, sin, q_w, k_w, eps, k_cache, v_cache, pos[, scale])
    return out


def check(fn: Callable, region: Region, weights: RegionWeights, *, fused: bool | tuple[str, ...] = False, trials: int = 2,
          seed: int = 0) -> tuple[bool, float, str]:
    """Compare ``fn`` with the region's reference on ``trials`` fresh input sets."""
    rfn = reference_fn(region, fused)
    dt = dtype_from_name(region.dtype)
    worst = 0.0
    for t in range(trials):
        try:
            with torch.no_grad():
                expect = run(rfn, region, make_args(region, weights, fused=fused, seed=seed, trial=t), fused)
                got = run(fn, region, make_args(region, weights, fused=fused, seed=seed, trial=t), fused)
        except Exception as e:  # a crash is a failed check, recorded with its message
            return False, float("inf"), f"raised {type(e).__name__}: {str(e)[:300]}"
        ok, err, msg = ref.compare(got, expect, dt)
        worst = max(worst, err)
        if not ok:
            return False, worst, f"trial {t}: {msg}"
    return True, worst, ""
