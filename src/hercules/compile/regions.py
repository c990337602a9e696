"""Regions of one decode step of a Llama / Qwen3 decoder, as frozen records.

A region is one kind of work in the decode step (all layers share its shapes, so one record per
kind with ``count_per_token`` = calls per decode step). Shapes are those of the decode step for
``batch`` sequences; ``capacity`` is the static KV cache length. FLOPs and bytes are per call
(bytes: every tensor read or written once, weights included; the attention bytes assume the whole
cache capacity is live, the worst case of the step).

The decode step the runtime runs, in region order (``h`` is the residual stream)::

    x = embedding(token)                                   # once
    per layer:
      n, h = residual_rmsnorm(x_or_mlp_out, h)             # layer input norm (layer 0: h = 0)
      qkv  = qkv_proj(n)                                    # one GEMM over fused [Wq; Wk; Wv]
      q, k = qk_norm(q, k)                                  # Qwen3 only (may be fused into rotary)
      q, k = rotary(q, k, cos[pos], sin[pos])
      kv_write(k, v, cache, pos)
      o    = decode_attention(q, cache, pos)                # grouped-query, over the static cache
      a    = o_proj(o)                                      # (may take the add + norm below into
      n, h = residual_rmsnorm(a, h)                         #  its epilogue) post-attention norm
      m    = gate_up_silu_mul(n)                            # one GEMM over fused [Wg; Wu], silu(g)*u
      x    = down_proj(m)                                   # (likewise the next layer's input norm)
    n, h = final_norm(x, h)
    logits = lm_head(n); token = token_select(logits)
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

REGION_KINDS = (
    "embedding",
    "residual_rmsnorm",
    "qkv_proj",
    "qk_norm",
    "rotary",
    "kv_write",
    "decode_attention",
    "o_proj",
    "gate_up_silu_mul",
    "down_proj",
    "final_norm",
    "lm_head",
    "token_select",
)


def dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


def dtype_from_name(name: str) -> torch.dtype:
    return getattr(torch, name)


@dataclass(frozen=True)
class ModelSpec:
    """What the compiler needs to know about a decoder, read from its HF config and weights."""

    arch: str  # "llama" | "qwen3"
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    eps: float
    tied: bool
    dtype: str
    qk_norm: bool

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads

    @property
    def q_size(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def qkv_size(self) -> int:
        return self.q_size + 2 * self.kv_size


class UnsupportedModel(ValueError):
    pass


def model_spec(model) -> ModelSpec:
    """Read a ModelSpec from a transformers Llama / Qwen3 causal LM; reject what we do not handle."""
    cfg = model.config
    mt = getattr(cfg, "model_type", "")
    if mt not in ("llama", "qwen3"):
        raise UnsupportedModel(f"model_type {mt!r} is not supported (llama, qwen3)")
    if getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
        raise UnsupportedModel("attention/MLP biases are not supported")
    if getattr(cfg, "hidden_act", "silu") != "silu":
        raise UnsupportedModel(f"hidden_act {cfg.hidden_act!r} is not supported (silu)")
    if getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", False):
        raise UnsupportedModel("sliding-window attention is not supported")
    rope = getattr(cfg, "rope_parameters", None) or {}
    rtype = rope.get("rope_type", "default") if isinstance(rope, dict) else "default"
    if rtype not in ("default", "llama3", "linear"):
        # dynamic / yarn / longrope change inv_freq or scaling with the sequence length
        raise UnsupportedModel(f"rope_type {rtype!r} is not supported (default, llama3, linear)")
    if getattr(cfg, "pretraining_tp", 1) not in (None, 1):
        raise UnsupportedModel("pretraining_tp > 1 is not supported")
    heads = cfg.num_attention_heads
    kv = cfg.num_key_value_heads or heads
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    p = next(model.parameters())
    return ModelSpec(
        arch=mt,
        hidden=cfg.hidden_size,
        intermediate=cfg.intermediate_size,
        layers=cfg.num_hidden_layers,
        heads=heads,
        kv_heads=kv,
        head_dim=hd,
        vocab=cfg.vocab_size,
        eps=float(cfg.rms_norm_eps),
        tied=bool(getattr(cfg, "tie_word_embeddings", False)),
        dtype=dtype_name(p.dtype),
        qk_norm=(mt == "qwen3"),
    )


def config_hash(model) -> str:
    """Stable hash of the model's architecture config (names, paths and versions left out)."""
    d = model.config.to_dict()
    for k in ("_name_or_path", "transformers_version", "_commit_hash", "torch_dtype", "dtype",
              "architectures", "use_cache", "output_attentions", "output_hidden_states"):
        d.pop(k, None)
    blob = json.dumps(d, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str
    stride: tuple[int, ...]

    @property
    def contiguous(self) -> bool:
        expect, acc = [], 1
        for s in reversed(self.shape):
            expect.append(acc)
            acc *= s
        return tuple(reversed(expect)) == self.stride or _numel(self.shape) <= 1

    @property
    def last_dim_contiguous(self) -> bool:
        return not self.shape or self.stride[-1] == 1 or self.shape[-1] == 1


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _contig(name: str, shape: tuple[int, ...], dtype: str) -> TensorSpec:
    stride, acc = [], 1
    for s in reversed(shape):
        stride.append(acc)
        acc *= s
    return TensorSpec(name, tuple(shape), dtype, tuple(reversed(stride)))


@dataclass(frozen=True)
class Region:
    name: str
    kind: str
    count_per_token: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    attrs: tuple[tuple[str, Any], ...]
    flops: int  # per call
    bytes: int  # per call
    dtype: str
    batch: int
    fusable_with: tuple[str, ...] = field(default=())

    def attr(self, key: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    def input(self, name: str) -> TensorSpec:
        for t in self.inputs:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def bytes_per_token(self) -> int:
        return self.bytes * self.count_per_token

    def summary(self) -> dict[str, Any]:
        """The record as plain JSON (what the advisor sees)."""
        d = asdict(self)
        d["attrs"] = dict(self.attrs)
        d["inputs"] = [asdict(t) for t in self.inputs]
        d["outputs"] = [asdict(t) for t in self.outputs]
        d["arithmetic_intensity"] = round(self.flops / self.bytes, 3) if self.bytes else None
        return d


def derive_regions(model_or_spec, batch: int = 1, capacity: int = 256) -> dict[str, Region]:
    """Region records for one decode step of ``batch`` sequences over a cache of ``capacity``."""
    s = model_or_spec if isinstance(model_or_spec, ModelSpec) else model_spec(model_or_spec)
    dt = s.dtype
    es = torch.empty((), dtype=dtype_from_name(dt)).element_size()
    B, H, I, V, L = batch, s.hidden, s.intermediate, s.vocab, s.layers
    nq, nkv, hd, g = s.heads, s.kv_heads, s.head_dim, s.group
    Q, KV, QKV = s.q_size, s.kv_size, s.qkv_size
    regions: list[Region] = []

    def add(kind, count, inputs, outputs, attrs, flops, nbytes, fusable=()):
        regions.append(
            Region(kind, kind, count, tuple(inputs), tuple(outputs), tuple(attrs.items()), int(flops),
                   int(nbytes), dt, B, tuple(fusable))
        )

    norm_attrs = {"hidden": H, "eps": s.eps}
    add("embedding", 1,
        [_contig("token", (B,), "int64"), _contig("weight", (V, H), dt)],
        [_contig("x", (B, H), dt)],
        {"hidden": H, "vocab": V}, 0, B * 8 + 2 * B * H * es)
    add("residual_rmsnorm", 2 * L,
        [_contig("x", (B, H), dt), _contig("residual", (B, H), dt), _contig("weight", (H,), dt)],
        [_contig("normed", (B, H), dt), _contig("residual_out", (B, H), dt)],
        norm_attrs, 6 * B * H, (4 * B * H + H) * es)
    add("qkv_proj", L,
        [_contig("x", (B, H), dt), _contig("weight", (QKV, H), dt)],
        [_contig("qkv", (B, QKV), dt)],
        {"in_features": H, "out_features": QKV, "q": Q, "kv": KV, "norm_eps": s.eps}, 2 * B * H * QKV,
        (QKV * H + B * H + B * QKV) * es)
    q_view = TensorSpec("q", (B, nq, hd), dt, (QKV, hd, 1))
    k_view = TensorSpec("k", (B, nkv, hd), dt, (QKV, hd, 1))
    head_attrs = {"heads": nq, "kv_heads": nkv, "head_dim": hd, "eps": s.eps}
    if s.qk_norm:
        add("qk_norm", L,
            [q_view, k_view, _contig("q_weight", (hd,), dt), _contig("k_weight", (hd,), dt)],
            [_contig("q_out", (B, nq, hd), dt), _contig("k_out", (B, nkv, hd), dt)],
            head_attrs, 6 * B * (nq + nkv) * hd, (2 * B * (nq + nkv) * hd + 2 * hd) * es,
            fusable=("rotary",))
    add("rotary", L,
        [q_view, k_view, _contig("cos", (1, hd), dt), _contig("sin", (1, hd), dt)],
        [_contig("q_out", (B, nq, hd), dt), _contig("k_out", (B, nkv, hd), dt)],
        dict(head_attrs, qk_norm_fusable=s.qk_norm, capacity=capacity), 3 * B * (nq + nkv) * hd,
        (2 * B * (nq + nkv) * hd + 2 * hd) * es, fusable=("qk_norm",) if s.qk_norm else ())
    cache_shape = (B, nkv, capacity, hd)
    add("kv_write", L,
        [_contig("k", (B, nkv, hd), dt), TensorSpec("v", (B, nkv, hd), dt, (QKV, hd, 1)),
         _contig("k_cache", cache_shape, dt), _contig("v_cache", cache_shape, dt),
         _contig("pos", (1,), "int64")],
        [],
        {"kv_heads": nkv, "head_dim": hd, "capacity": capacity}, 0, 4 * B * KV * es)
    add("decode_attention", L,
        [_contig("q", (B, nq, hd), dt), _contig("k_cache", cache_shape, dt),
         _contig("v_cache", cache_shape, dt), _contig("pos", (1,), "int64")],
        [_contig("out", (B, nq, hd), dt)],
        {"heads": nq, "kv_heads": nkv, "group": g, "head_dim": hd, "capacity": capacity,
         "scale": hd ** -0.5},
        4 * B * nq * capacity * hd, (2 * B * nkv * capacity * hd + 2 * B * Q) * es)
    add("o_proj", L,
        [_contig("x", (B, Q), dt), _contig("weight", (H, Q), dt)],
        [_contig("out", (B, H), dt)],
        {"in_features": Q, "out_features": H, "hidden": H, "norm_eps": s.eps}, 2 * B * Q * H,
        (Q * H + B * Q + B * H) * es)
    add("gate_up_silu_mul", L,
        [_contig("x", (B, H), dt), _contig("weight", (2 * I, H), dt)],
        [_contig("out", (B, I), dt)],
        {"in_features": H, "out_features": 2 * I, "intermediate": I, "norm_eps": s.eps},
        2 * B * H * 2 * I + 5 * B * I, (2 * I * H + B * H + B * I) * es)
    add("down_proj", L,
        [_contig("x", (B, I), dt), _contig("weight", (H, I), dt)],
        [_contig("out", (B, H), dt)],
        {"in_features": I, "out_features": H, "hidden": H, "norm_eps": s.eps}, 2 * B * I * H,
        (I * H + B * I + B * H) * es)
    add("final_norm", 1,
        [_contig("x", (B, H), dt), _contig("residual", (B, H), dt), _contig("weight", (H,), dt)],
        [_contig("normed", (B, H), dt), _contig("residual_out", (B, H), dt)],
        norm_attrs, 6 * B * H, (4 * B * H + H) * es)
    add("lm_head", 1,
        [_contig("x", (B, H), dt), _contig("weight", (V, H), dt)],
        [_contig("logits", (B, V), dt)],
        {"in_features": H, "out_features": V, "tied": s.tied}, 2 * B * H * V, (V * H + B * H + B * V) * es)
    add("token_select", 1,
        [_contig("logits", (B, V), dt)],
        [_contig("token", (B,), "int64")],
        {"vocab": V}, 2 * B * V, B * V * es + B * 8)
    return {r.name: r for r in regions}


def step_bytes(regions: dict[str, Region]) -> int:
    """Bytes one decode step moves if every region reads/writes its tensors once."""
    return sum(r.bytes_per_token for r in regions.values())


def weight_bytes(spec: ModelSpec) -> int:
    es = torch.empty((), dtype=dtype_from_name(spec.dtype)).element_size()
    per_layer = spec.hidden * spec.qkv_size + spec.q_size * spec.hidden + 3 * spec.hidden * spec.intermediate
    per_layer += 2 * spec.hidden + (2 * spec.head_dim if spec.qk_norm else 0)
    # the lm_head matrix is read once per step (tied or not); the embedding only one row per token
    return (spec.layers * per_layer + spec.vocab * spec.hidden + spec.hidden) * es


def roofline_tok_s(spec: ModelSpec, bandwidth_bytes_s: float) -> float:
    """Tokens/s (batch 1) if the weights are read exactly once per token at ``bandwidth``."""
    return bandwidth_bytes_s / weight_bytes(spec)
