"""Functional decode runtime over a Hugging Face Llama / Qwen3 model's own weights.

* Weights are the HF parameters themselves. q/k/v and gate/up are fused into one buffer each so a
  decode step runs one GEMM instead of three (two): the fused buffer is made once and the HF
  modules' parameters are re-pointed at views of it, so the model keeps working, its values are
  unchanged, and no second copy stays in memory.
* Static KV cache of a fixed capacity, preallocated per (batch, capacity).
* Prefill runs the PyTorch reference ops over the whole prompt (SDPA, causal); decode runs one
  token per step through a per-region implementation table (region kind -> callable). Missing
  entries fall back to the PyTorch reference.
* On CUDA the decode step -- token selection, feeding the token back and advancing the position
  included -- is captured once in a CUDA graph and replayed per token. Tokens are copied into a
  device buffer after each replay and read back once at the end: no host synchronisation per token.
* Batches must share one prompt length (no padding / attention masks).
* Decoding is fixed-length: there is no EOS stop (that would need a host sync per token).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F

from . import reference as ref
from .reference import Sampling
from .regions import ModelSpec, model_spec

NORM_QKV = ref.norm_fused_key("qkv_proj")
ROTARY_KV = ref.ROTARY_KV_KEY
ROTARY_KV_ATTN = ref.ROTARY_KV_ATTN_KEY
NORM_GATE_UP = ref.norm_fused_key("gate_up_silu_mul")
O_NORM = ref.add_norm_fused_key("o_proj")
DOWN_NORM = ref.add_norm_fused_key("down_proj")

DEFAULT_IMPLS: dict[str, Callable] = {
    "embedding": ref.embedding,
    "residual_rmsnorm": ref.residual_rmsnorm,
    "qkv_proj": ref.qkv_proj_split,
    "qk_norm": ref.qk_norm,
    "rotary": ref.rotary,
    "kv_write": ref.kv_write,
    "decode_attention": ref.decode_attention,
    "o_proj": ref.linear,
    "gate_up_silu_mul": ref.gate_up_silu_mul_split,
    "down_proj": ref.linear,
    "final_norm": ref.final_norm,
    "lm_head": ref.linear,
    "token_select": ref.token_select,
}


@dataclass
class LayerWeights:
    in_norm: torch.Tensor
    post_norm: torch.Tensor
    qkv: torch.Tensor  # [Q + 2KV, H]
    o: torch.Tensor
    gate_up: torch.Tensor  # [2I, H]
    down: torch.Tensor
    q_norm: torch.Tensor | None
    k_norm: torch.Tensor | None


@dataclass
class ModelWeights:
    embed: torch.Tensor
    layers: list[LayerWeights]
    final_norm: torch.Tensor
    lm_head: torch.Tensor
    inv_freq: torch.Tensor
    attention_scaling: float


def _adjacent_rows(parts: list[torch.Tensor]) -> torch.Tensor | None:
    """If ``parts`` are row blocks laid out back to back in one storage, a view over all of them."""
    first = parts[0]
    if not all(p.is_contiguous() and p.dtype == first.dtype and p.device == first.device for p in parts):
        return None
    if any(p.untyped_storage().data_ptr() != first.untyped_storage().data_ptr() for p in parts):
        return None
    off = first.storage_offset()
    for p in parts:
        if p.storage_offset() != off:
            return None
        off += p.numel()
    rows = sum(p.shape[0] for p in parts)
    return first.new_empty(0).set_(first.untyped_storage(), first.storage_offset(), (rows, first.shape[1]))


def fuse_rows(modules: list[torch.nn.Linear]) -> torch.Tensor:
    """One [sum(N_i), K] weight over several Linear layers; the layers' weights become views of it."""
    parts = [m.weight for m in modules]
    fused = _adjacent_rows([p.data for p in parts])
    if fused is not None:
        return fused
    fused = torch.cat([p.data for p in parts], dim=0)
    start = 0
    for m in modules:
        n = m.weight.shape[0]
        m.weight.data = fused[start : start + n]
        start += n
    return fused


def extract_weights(model) -> ModelWeights:
    """The HF model's tensors, with q/k/v and gate/up fused (HF params re-pointed at the views)."""
    base = model.model
    layers = []
    for layer in base.layers:
        at, mlp = layer.self_attn, layer.mlp
        layers.append(
            LayerWeights(
                in_norm=layer.input_layernorm.weight.data,
                post_norm=layer.post_attention_layernorm.weight.data,
                qkv=fuse_rows([at.q_proj, at.k_proj, at.v_proj]),
                o=at.o_proj.weight.data,
                gate_up=fuse_rows([mlp.gate_proj, mlp.up_proj]),
                down=mlp.down_proj.weight.data,
                q_norm=at.q_norm.weight.data if hasattr(at, "q_norm") else None,
                k_norm=at.k_norm.weight.data if hasattr(at, "k_norm") else None,
            )
        )
    rot = base.rotary_emb
    return ModelWeights(
        embed=base.embed_tokens.weight.data,
        layers=layers,
        final_norm=base.norm.weight.data,
        lm_head=model.lm_head.weight.data,
        inv_freq=rot.inv_freq.detach().to(torch.float32),
        attention_scaling=float(getattr(rot, "attention_scaling", 1.0)),
    )


def rope_tables(inv_freq: torch.Tensor, attention_scaling: float, capacity: int, dtype, device):
    """cos/sin for positions 0..capacity-1, computed exactly as HF's rotary embedding does."""
    pos = torch.arange(capacity, device=device, dtype=torch.int64)
    freqs = pos[:, None].float() * inv_freq.to(device=device, dtype=torch.float32)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos() * attention_scaling
    sin = emb.sin() * attention_scaling
    return cos.to(dtype), sin.to(dtype)


@dataclass
class DecodeState:
    batch: int
    capacity: int
    k_cache: torch.Tensor  # [L, B, nkv, C, hd]
    v_cache: torch.Tensor
    cos: torch.Tensor  # [C, hd]
    sin: torch.Tensor
    token: torch.Tensor  # [B] int64: the token fed to the next step, then the token it selected
    pos: torch.Tensor  # [1] int64: position of the token fed to the next step
    zero_h: torch.Tensor  # [B, H] zeros: layer 0's residual
    noise: torch.Tensor  # [B, V] fp32 Exp(1) noise for sampling
    logits: torch.Tensor | None = None  # the last step's logits (static under a CUDA graph)
    graphs: dict = field(default_factory=dict)
    # prompt length -> (graph, static prompt ids [B, T], static logits [B, V]), oldest first
    prefill_graphs: dict = field(default_factory=dict)


class DecodeRuntime:
    # Prefill graphs kept per state (each holds a memory pool for the prompt's activations).
    MAX_PREFILL_GRAPHS = 4

    def __init__(self, model, impls: dict[str, Callable] | None = None, *, fused_qk_rotary: bool = False,
                 use_cuda_graph: bool | None = None, exact: bool = False, graph_prefill: bool = True):
        self.model = model
        self.spec: ModelSpec = model_spec(model)
        self.weights = extract_weights(model)
        p = self.weights.embed
        self.device, self.dtype = p.device, p.dtype
        self.impls: dict[str, Callable] = dict(DEFAULT_IMPLS)
        if impls:
            self.impls.update({k: v for k, v in impls.items() if v is not None})
        self.fused_qk_rotary = fused_qk_rotary
        # exact mode: every region on its HF-identical PyTorch op, attention over exactly the valid
        # length (a host int, known without a sync) -- bit-identical to HF eager, but no CUDA graph
        self.exact = exact
        self._host_len = 0
        if exact:
            use_cuda_graph = False
            self.impls = dict(DEFAULT_IMPLS)
            self.impls["decode_attention"] = self._exact_attention
            self.fused_qk_rotary = False
        if use_cuda_graph is None:
            use_cuda_graph = self.device.type == "cuda"
        self.use_cuda_graph = use_cuda_graph and self.device.type == "cuda"
        # The prompt pass as a CUDA graph too, one per prompt length: eager, its ~20 PyTorch ops
        # a layer are launch-bound at short prompts (by subtraction on the H200: Qwen3-4B's 128-token
        # run took ~47 ms more than 128 graphed steps, Llama-3.2-1B's ~9 ms). A capture that fails
        # turns it off for this runtime, with a warning; the eager pass is the fallback.
        self.graph_prefill = graph_prefill and self.use_cuda_graph
        self._states: dict[tuple[int, int], DecodeState] = {}
        self.scale = self.spec.head_dim ** -0.5

    def _exact_attention(self, q, k_cache, v_cache, pos, scale):
        return ref.decode_attention_exact(q, k_cache, v_cache, self._host_len, scale)

    def set_impls(self, impls: dict[str, Callable], fused_qk_rotary: bool = False) -> None:
        if self.exact:
            return  # exact mode keeps its HF-identical table
        self.impls = dict(DEFAULT_IMPLS)
        self.impls.update({k: v for k, v in impls.items() if v is not None})
        self.fused_qk_rotary = fused_qk_rotary
        for st in self._states.values():
            st.graphs.clear()
            st.prefill_graphs.clear()

    # -- state --------------------------------------------------------------------------------

    def state(self, batch: int, capacity: int) -> DecodeState:
        key = (batch, capacity)
        if key not in self._states:
            # keep one cache alive at a time: large models cannot afford several
            self._states.clear()
            s, dev, dt = self.spec, self.device, self.dtype
            shape = (s.layers, batch, s.kv_heads, capacity, s.head_dim)
            cos, sin = rope_tables(self.weights.inv_freq, self.weights.attention_scaling, capacity, dt, dev)
            self._states[key] = DecodeState(
                batch=batch,
                capacity=capacity,
                k_cache=torch.zeros(shape, dtype=dt, device=dev),
                v_cache=torch.zeros(shape, dtype=dt, device=dev),
                cos=cos,
                sin=sin,
                token=torch.zeros(batch, dtype=torch.int64, device=dev),
                pos=torch.zeros(1, dtype=torch.int64, device=dev),
                zero_h=torch.zeros(batch, s.hidden, dtype=dt, device=dev),
                noise=torch.ones(batch, s.vocab, dtype=torch.float32, device=dev),
            )
        return self._states[key]

    @staticmethod
    def capacity_for(total_len: int, multiple: int = 128) -> int:
        return max(multiple, int(math.ceil(total_len / multiple)) * multiple)

    # -- prefill (PyTorch reference ops over the prompt) ---------------------------------------

    @torch.no_grad()
    def prefill(self, input_ids: torch.Tensor, st: DecodeState) -> torch.Tensor:
        """Fill the caches with the prompt; the logits [B, V] of its last position."""
        T = input_ids.shape[1]
        if T > st.capacity:
            raise ValueError(f"prompt of {T} tokens exceeds cache capacity {st.capacity}")
        if not self.graph_prefill:
            return self._prefill_body(input_ids, st)
        entry = st.prefill_graphs.pop(T, None)
        if entry is None:
            try:
                entry = self._capture_prefill(input_ids, st)
            except RuntimeError as exc:  # a capture failure: the eager pass from now on
                warnings.warn(f"prefill not captured as a CUDA graph ({exc}); running it eagerly", stacklevel=2)
                self.graph_prefill = False
                torch.cuda.synchronize(self.device)
                return self._prefill_body(input_ids, st)
            while len(st.prefill_graphs) >= self.MAX_PREFILL_GRAPHS:
                st.prefill_graphs.pop(next(iter(st.prefill_graphs)))
        st.prefill_graphs[T] = entry  # most recently used last
        graph, ids, logits = entry
        ids.copy_(input_ids)
        graph.replay()
        return logits

    def _capture_prefill(self, input_ids: torch.Tensor, st: DecodeState):
        ids = input_ids.clone()
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):  # warm-up: kernels chosen and libraries loaded before capture
            self._prefill_body(ids, st)
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            logits = self._prefill_body(ids, st)
        return graph, ids, logits

    def _prefill_body(self, input_ids: torch.Tensor, st: DecodeState) -> torch.Tensor:
        s, w = self.spec, self.weights
        B, T = input_ids.shape
        nq, nkv, hd = s.heads, s.kv_heads, s.head_dim
        x = ref.embedding(input_ids, w.embed)  # [B, T, H]
        h = torch.zeros_like(x)
        cos, sin = st.cos[:T], st.sin[:T]
        for li, lw in enumerate(w.layers):
            n, h = ref.residual_rmsnorm(x, h, lw.in_norm, s.eps)
            q, k, v = ref.qkv_proj_split(n, lw.qkv, s.q_size, s.kv_size)
            q = q.view(B, T, nq, hd)
            k = k.view(B, T, nkv, hd)
            v = v.view(B, T, nkv, hd)
            q, k = ref.rotary(q, k, cos, sin, lw.q_norm, lw.k_norm, s.eps)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, heads, T, hd]
            st.k_cache[li, :, :, :T].copy_(k)
            st.v_cache[li, :, :, :T].copy_(v)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale, enable_gqa=nq != nkv)
            o = o.transpose(1, 2).reshape(B, T, nq * hd)
            a = ref.linear(o, lw.o)
            n, h = ref.residual_rmsnorm(a, h, lw.post_norm, s.eps)
            x = ref.linear(ref.gate_up_silu_mul_split(n, lw.gate_up, s.intermediate), lw.down)
        n, h = ref.final_norm(x[:, -1], h[:, -1], w.final_norm, s.eps)
        return ref.linear(n, w.lm_head)  # [B, V]

    # -- one decode step through the implementation table --------------------------------------

    def decode_step(self, st: DecodeState) -> torch.Tensor:
        s, w, f = self.spec, self.weights, self.impls
        B = st.batch
        nq, nkv, hd, eps = s.heads, s.kv_heads, s.head_dim, s.eps
        x = f["embedding"](st.token, w.embed)
        h = st.zero_h
        n = None  # the normalised rows, when the projection before has already made them
        cos = st.cos.index_select(0, st.pos)  # [1, hd]; pos stays on the device
        sin = st.sin.index_select(0, st.pos)
        for li, lw in enumerate(w.layers):
            kc, vc = st.k_cache[li], st.v_cache[li]
            if n is not None:  # the previous down_proj did the residual add + this layer's norm
                q, k, v = f["qkv_proj"](n, lw.qkv, s.q_size, s.kv_size)
            elif NORM_QKV in f:  # residual add + RMSNorm folded into the QKV projection
                q, k, v, h = f[NORM_QKV](x, h, lw.in_norm, eps, lw.qkv, s.q_size, s.kv_size)
            else:
                n, h = f["residual_rmsnorm"](x, h, lw.in_norm, eps)
                q, k, v = f["qkv_proj"](n, lw.qkv, s.q_size, s.kv_size)
            q = q.view(B, nq, hd)
            k = k.view(B, nkv, hd)
            v = v.view(B, nkv, hd)
            norms = (lw.q_norm, lw.k_norm)
            if s.qk_norm and not self.fused_qk_rotary:
                q, k = f["qk_norm"](q, k, lw.q_norm, lw.k_norm, eps)
                norms = (None, None)
            if ROTARY_KV_ATTN in f:  # one kernel: rotary, the cache write and the attention
                o = f[ROTARY_KV_ATTN](q, k, v, cos, sin, *norms, eps, kc, vc, st.pos, self.scale)
            else:
                if ROTARY_KV in f:  # the rotary kernel writes k and v into the caches itself
                    q = f[ROTARY_KV](q, k, v, cos, sin, *norms, eps, kc, vc, st.pos)
                else:
                    q, k = f["rotary"](q, k, cos, sin, *norms, eps)
                    f["kv_write"](k, v, kc, vc, st.pos)
                o = f["decode_attention"](q, kc, vc, st.pos, self.scale)
            if O_NORM in f:  # the residual add + post-attention norm in o_proj's epilogue
                n, h = f[O_NORM](o.reshape(B, nq * hd), lw.o, h, lw.post_norm, eps)
                m = f["gate_up_silu_mul"](n, lw.gate_up, s.intermediate)
            else:
                a = f["o_proj"](o.reshape(B, nq * hd), lw.o)
                if NORM_GATE_UP in f:
                    m, h = f[NORM_GATE_UP](a, h, lw.post_norm, eps, lw.gate_up, s.intermediate)
                else:
                    n, h = f["residual_rmsnorm"](a, h, lw.post_norm, eps)
                    m = f["gate_up_silu_mul"](n, lw.gate_up, s.intermediate)
            if DOWN_NORM in f:  # the residual add + the next norm (the final one last) in the epilogue
                last = li + 1 == len(w.layers)
                n, h = f[DOWN_NORM](m, lw.down, h, w.final_norm if last else w.layers[li + 1].in_norm, eps)
            else:
                n = None
                x = f["down_proj"](m, lw.down)
        if n is None:
            n, h = f["final_norm"](x, h, w.final_norm, eps)
        return f["lm_head"](n, w.lm_head)

    def _step_body(self, st: DecodeState, sampling: Sampling, keep_logits: bool) -> None:
        """Decode one token and feed it back: the unit a CUDA graph captures."""
        logits = self.decode_step(st)
        tok = self.impls["token_select"](logits, sampling, st.noise)
        st.token.copy_(tok)
        st.pos.add_(1)
        if keep_logits:
            if st.logits is None or st.logits.shape != logits.shape:
                st.logits = torch.empty_like(logits)
            st.logits.copy_(logits)

    def _graph(self, st: DecodeState, sampling: Sampling, keep_logits: bool):
        key = (sampling.key(), keep_logits)
        if key in st.graphs:
            return st.graphs[key]
        saved_tok, saved_pos = st.token.clone(), st.pos.clone()
        if keep_logits and st.logits is None:
            st.logits = torch.empty(st.batch, self.spec.vocab, dtype=self.dtype, device=self.device)
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(2):  # compile Triton kernels / load extensions before capture
                self._step_body(st, sampling, keep_logits)
        torch.cuda.current_stream(self.device).wait_stream(side)
        st.token.copy_(saved_tok)
        st.pos.copy_(saved_pos)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self._step_body(st, sampling, keep_logits)
        st.graphs[key] = g
        return g

    # -- generation --------------------------------------------------------------------------

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int,
        sampling: Sampling = Sampling(),
        seed: int | None = None,
        forced: torch.Tensor | None = None,
        return_logits: bool = False,
        capacity: int | None = None,
    ):
        """New tokens [B, max_new_tokens] (and, with return_logits, fp32 logits [n, B, V]).

        ``forced`` [B, n] feeds given tokens instead of the selected ones (teacher forcing, for
        comparing logits with another implementation on identical contexts)."""
        input_ids = input_ids.to(self.device)
        if input_ids.dim() == 1:
            input_ids = input_ids[None]
        B, T = input_ids.shape
        n = int(max_new_tokens)
        if n < 1:
            return input_ids.new_empty(B, 0)
        cap = capacity or self.capacity_for(T + n)
        st = self.state(B, cap)
        if T + n > st.capacity:
            raise ValueError(f"{T}+{n} tokens exceed capacity {st.capacity}")
        gen = None
        if sampling.do_sample:
            gen = torch.Generator(device=self.device)
            gen.manual_seed(0 if seed is None else int(seed))
        graph = None
        if self.use_cuda_graph:
            graph = self._graph(st, sampling, return_logits)  # captured before prefill fills the cache
        out = torch.empty(B, n, dtype=torch.int64, device=self.device)
        all_logits = torch.empty(n, B, self.spec.vocab, dtype=torch.float32, device=self.device) if return_logits else None

        logits = self.prefill(input_ids, st)
        if sampling.do_sample:
            st.noise.exponential_(generator=gen)
        tok = self.impls["token_select"](logits, sampling, st.noise)
        if all_logits is not None:
            all_logits[0].copy_(logits)
        out[:, 0].copy_(tok)
        st.token.copy_(forced[:, 0] if forced is not None else tok)
        st.pos.fill_(T)
        for i in range(1, n):
            if sampling.do_sample:
                st.noise.exponential_(generator=gen)
            if graph is not None:
                graph.replay()
            else:
                self._host_len = T + i  # the step feeds position T+i-1
                self._step_body(st, sampling, return_logits)
            out[:, i].copy_(st.token)
            if all_logits is not None:
                all_logits[i].copy_(st.logits)
            if forced is not None and i < forced.shape[1]:
                st.token.copy_(forced[:, i])
        if return_logits:
            return out, all_logits
        return out
