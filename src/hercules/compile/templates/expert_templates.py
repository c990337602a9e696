"""Maintained libraries' kernels as region candidates, measured and checked like Hercules' own.

Each template wraps one library entry point that computes exactly a region's call convention
(``compile/reference.py``); it goes through the same constraints, reference check and timing as
every other candidate, so an expert that is slower loses and one that is wrong is rejected with
its error. Which expert serves which region:

=================  ==========================================================================
residual_rmsnorm,  ``liger.fused_add_rms_norm``: liger_kernel.transformers.functional.
final_norm         liger_fused_add_rms_norm, casting_mode="llama" (fp32 statistics, normalised
                   row cast to the model dtype, then times the weight: HF Llama / Qwen3 RMSNorm);
                   ``quack.rms_norm``: quack.rmsnorm(residual=..., prenorm=True) (CuTe DSL, SM90+)
qk_norm            ``liger.rms_norm`` / ``quack.rms_norm``: one call for q, one for k
rotary             ``liger.rope``: liger_kernel.transformers.functional.liger_rope (HF's
                   rotate-half layout; q, k get a length-1 sequence axis)
gate_up_silu_mul   ``liger.swiglu``: liger_swiglu (LigerSiLUMulFunction) after one GEMM over
                   [Wg; Wu] or two GEMMs over its halves
decode_attention   ``flashinfer.batch_decode``: BatchDecodeWithPagedKVCacheWrapper (fa2, HND,
                   CUDA-graph buffers); ``torch.sdpa.{flash,cudnn,efficient}``: SDPA with the
                   boolean mask and native GQA, pinned to one backend
=================  ==========================================================================

A template's ``lang`` is its library's label (the plan says which library ran), its parameters
carry the distribution and its installed version (the plan says which version; a cached plan
made with another version does not rebuild), and ``unavailable`` gives the reason it cannot run
here: the library is missing, or a trial call at the region's shapes fails (Liger's RMSNorm and
SwiGLU under Triton's CPU interpreter).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .. import reference as ref
from ..regions import Region
from .base import Candidate, Requirements, Template, triton_interpreting

EXPERT = "expert"  # the `languages` name that selects every expert template


@dataclass(frozen=True)
class Library:
    distribution: str  # whose version is reported and keys the decision cache
    module: str  # imported to tell whether it is usable here
    label: str  # the candidates' lang

    def version(self) -> str | None:
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None

    def missing(self) -> str | None:
        """Why the library cannot be used here (None: it imports)."""
        try:
            importlib.import_module(self.module)
        except ModuleNotFoundError as e:
            if e.name and e.name.split(".")[0] == self.module.split(".")[0]:
                return f"{self.distribution} is not installed"
            return f"{self.distribution} {self.version()} does not import: {e}"
        except Exception as e:  # a broken install is a reason too, not a failed compile
            return f"{self.distribution} {self.version()} does not import: {type(e).__name__}: {e}"
        return None


LIGER = Library("liger-kernel", "liger_kernel", "liger")
QUACK = Library("quack-kernels", "quack", "quack")
FLASHINFER = Library("flashinfer-python", "flashinfer", "flashinfer")
TORCH = Library("torch", "torch", "torch")
# torch's version is already in every plan and cache key
OPTIONAL_LIBRARIES = (LIGER, QUACK, FLASHINFER)


def library_versions() -> dict[str, str]:
    """The installed version of every optional expert library ("none" where it is missing): part
    of the decision-cache key, so an upgraded library invalidates the decisions made with it."""
    return {lib.distribution: lib.version() or "none" for lib in OPTIONAL_LIBRARIES}


Build = Callable[[dict[str, Any], Region], Callable]


@dataclass
class ExpertTemplate(Template):
    name: str = ""
    kinds: tuple[str, ...] = ()
    library: Library = TORCH
    entry: str = ""  # the library call, for the plan
    make: Build | None = None  # (variant params, region) -> candidate fn; imports the library inside
    kernel_lang: str = "cuda"  # what its kernels are written in: a `languages` name that selects it
    variants: list[dict[str, Any]] = field(default_factory=lambda: [{}])
    dtypes: tuple[str, ...] = ("float32", "float16", "bfloat16")
    backend: str = "any"  # Requirements.backend: "triton" (CUDA or the interpreter), "cuda", "any"
    min_sm: tuple[int, int] | None = None
    # a trial call at the region's shapes before the candidate is scheduled: cheap where the
    # library runs without compiling (SDPA), and where a known failure is cheap to find (Triton's
    # CPU interpreter); elsewhere a failure shows in the measurement (the reference check's error)
    probe: Callable[[str], bool] = lambda device_type: False

    @property
    def lang(self) -> str:  # type: ignore[override]
        return self.library.label

    def selected_by(self, languages: tuple[str, ...]) -> bool:
        """Taken when ``languages`` names "expert", the language of its kernels (so the default
        torch,triton,cuda includes every expert), or its library (torch excepted: every compile
        includes "torch", and that must not switch SDPA's pinned backends on by itself)."""
        return (EXPERT in languages or self.kernel_lang in languages
                or (self.library is not TORCH and self.library.label in languages))

    def space(self, region: Region) -> list[dict[str, Any]]:
        tag = {"library": self.library.distribution, "version": self.library.version() or "none"}
        return [{**tag, **v} for v in self.variants]

    def requirements(self, params: dict[str, Any], region: Region) -> Requirements:
        return Requirements(dtypes=self.dtypes, backend=self.backend, min_sm=self.min_sm)

    def materialise(self, params: dict[str, Any], region: Region) -> Candidate:
        installed = self.library.version() or "none"
        if params.get("version") != installed:
            raise RuntimeError(f"{self.name} was planned with {self.library.distribution} {params.get('version')}, "
                               f"{installed} is installed")
        variant = {k: v for k, v in params.items() if k not in ("library", "version")}
        return Candidate(self.spec(params, region), self.make(variant, region))


# ---------------------------------------------------------------------------------------------
# entry points, each in the region's call convention


def _liger(name: str) -> Callable:
    from liger_kernel.transformers import functional

    return getattr(functional, name)


def _liger_add_rms_norm(variant, region):
    fn = _liger("liger_fused_add_rms_norm")
    # "llama" casting is HF's LlamaRMSNorm / Qwen3RMSNorm: statistics in fp32, the normalised row
    # cast to the model dtype, then times the weight; offset 0 (Gemma's 1 + w is "gemma")
    return lambda x, residual, weight, eps: fn(x, residual, weight, eps, offset=0.0, casting_mode="llama",
                                               in_place=False)


def _liger_qk_norm(variant, region):
    fn = _liger("liger_rms_norm")
    return lambda q, k, qw, kw, eps: (fn(q, qw, eps, offset=0.0, casting_mode="llama", in_place=False),
                                      fn(k, kw, eps, offset=0.0, casting_mode="llama", in_place=False))


def _quack_add_rms_norm(variant, region):
    from quack import rmsnorm

    def add_rms_norm(x, residual, weight, eps):
        normed, summed = rmsnorm(x, weight, residual=residual, eps=eps, prenorm=True)
        return normed, summed

    return add_rms_norm


def _quack_qk_norm(variant, region):
    from quack import rmsnorm

    def qk(q, k, qw, kw, eps):
        # the kernel takes [rows, hd]; q and k are strided views of the QKV output (reshape copies)
        return (rmsnorm(q.reshape(-1, q.shape[-1]), qw, eps=eps).view(q.shape),
                rmsnorm(k.reshape(-1, k.shape[-1]), kw, eps=eps).view(k.shape))

    return qk


def _liger_rope(variant, region):
    fn = _liger("liger_rope")

    def rotary(q, k, cos, sin, q_weight=None, k_weight=None, eps=1e-6):
        if q_weight is not None:  # the region's fused semantics: q/k RMSNorm first
            q, k = ref.qk_norm(q, k, q_weight, k_weight, eps)
        qo, ko = fn(_with_seq_axis(q), _with_seq_axis(k), cos, sin)
        return qo.squeeze(2), ko.squeeze(2)

    return rotary


def _with_seq_axis(x: torch.Tensor) -> torch.Tensor:
    """[B, heads, hd] as Liger's [B, heads, T=1, hd]. Its kernel steps from one (batch, position)
    row to the next by the stride of the T axis of the [B, T, heads, hd] view, which for a
    length-1 axis is whatever the tensor says: a plain ``unsqueeze`` of a contiguous q gives hd
    and every batch row past the first reads the wrong heads. The view of a contiguous copy has
    the standard stride (heads * hd). Liger rotates that buffer in place (no copy where q is
    already contiguous: the split QKV projection's output, used once)."""
    B, h, d = x.shape
    return x.contiguous().view(B, 1, h, d).transpose(1, 2)


def _liger_swiglu(variant, region):
    fn = _liger("liger_swiglu")
    if variant["GEMM"] == "split":  # two GEMMs: contiguous gate and up, as HF computes them
        return lambda x, weight, i: fn(torch.nn.functional.linear(x, weight[:i]),
                                       torch.nn.functional.linear(x, weight[i:]))

    def fused(x, weight, i):
        gu = torch.nn.functional.linear(x, weight)
        return fn(gu[..., :i], gu[..., i:])  # Liger makes the halves contiguous (no copy at batch 1)

    return fused


def _sdpa(backend: str) -> Build:
    def make(variant, region):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        chosen = [getattr(SDPBackend, backend)]

        def attention(q, k_cache, v_cache, pos, scale):
            with sdpa_kernel(chosen):
                return ref.decode_attention_sdpa(q, k_cache, v_cache, pos, scale)

        return attention

    return make


FLASHINFER_WORKSPACE_BYTES = 128 << 20  # the size FlashInfer's documentation recommends


class _FlashInferDecode:
    """FlashInfer's batch decode over the static cache: each sequence's cache [nkv, C, hd] is one
    HND page of C tokens, so the page table never changes; the valid length is the last page's
    length, written on the device from ``pos`` on every call. The plan (host work, split
    schedule) depends only on the page table, so it is made once and the call is CUDA-graph safe."""

    def __init__(self, device: torch.device, region: Region, dtype: torch.dtype, scale: float):
        import flashinfer

        B, nq, nkv = region.batch, region.attr("heads"), region.attr("kv_heads")
        hd, cap = region.attr("head_dim"), region.attr("capacity")
        i32 = dict(dtype=torch.int32, device=device)
        self.indptr, self.indices = torch.arange(B + 1, **i32), torch.arange(B, **i32)
        self.last_len = torch.full((B,), cap, **i32)
        workspace = torch.zeros(FLASHINFER_WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        self.wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
            workspace, "HND", use_cuda_graph=True, paged_kv_indptr_buffer=self.indptr,
            paged_kv_indices_buffer=self.indices, paged_kv_last_page_len_buffer=self.last_len, backend="fa2")
        self.wrapper.plan(self.indptr.cpu(), self.indices.cpu(), self.last_len.cpu(), nq, nkv, hd, cap,
                          pos_encoding_mode="NONE", q_data_type=dtype, kv_data_type=dtype, sm_scale=scale)
        self.scale, self.batch = scale, B

    def __call__(self, q, k_cache, v_cache, pos, scale):
        if scale != self.scale:
            raise ValueError(f"planned with sm_scale {self.scale}, called with {scale}")
        self.last_len.copy_((pos + 1).expand(self.batch))  # attend to positions 0..pos
        return self.wrapper.run(q, (k_cache, v_cache))


def _flashinfer_decode(variant, region):
    import flashinfer  # noqa: F401 -- a missing library fails the build, not the first call

    planned: dict[tuple, _FlashInferDecode] = {}

    def attention(q, k_cache, v_cache, pos, scale):
        # planned at the first call (the reference check, outside any graph capture), on its device
        key = (q.device, q.dtype)
        if key not in planned:
            planned[key] = _FlashInferDecode(q.device, region, q.dtype, scale)
        return planned[key](q, k_cache, v_cache, pos, scale)

    return attention


# ---------------------------------------------------------------------------------------------
# the templates


def _on_cpu(device_type: str) -> bool:
    return device_type == "cpu"


def _always(device_type: str) -> bool:
    return True


_NORMS = ("residual_rmsnorm", "final_norm")
_HALF = ("float16", "bfloat16")

EXPERT_TEMPLATES: list[ExpertTemplate] = [
    ExpertTemplate(name="liger.fused_add_rms_norm", kinds=_NORMS, library=LIGER, make=_liger_add_rms_norm,
                   entry="liger_kernel.transformers.functional.liger_fused_add_rms_norm(casting_mode='llama')",
                   kernel_lang="triton", backend="triton", probe=_on_cpu),
    ExpertTemplate(name="quack.rms_norm", kinds=_NORMS, library=QUACK, make=_quack_add_rms_norm,
                   entry="quack.rmsnorm(residual=..., prenorm=True)", backend="cuda", min_sm=(9, 0)),
    ExpertTemplate(name="liger.rms_norm", kinds=("qk_norm",), library=LIGER, make=_liger_qk_norm,
                   entry="liger_kernel.transformers.functional.liger_rms_norm(casting_mode='llama'), q and k",
                   kernel_lang="triton", backend="triton", probe=_on_cpu),
    ExpertTemplate(name="quack.rms_norm", kinds=("qk_norm",), library=QUACK, make=_quack_qk_norm,
                   entry="quack.rmsnorm, q and k", backend="cuda", min_sm=(9, 0)),
    ExpertTemplate(name="liger.rope", kinds=("rotary",), library=LIGER, make=_liger_rope,
                   entry="liger_kernel.transformers.functional.liger_rope", kernel_lang="triton", backend="triton",
                   probe=_on_cpu),
    ExpertTemplate(name="liger.swiglu", kinds=("gate_up_silu_mul",), library=LIGER, make=_liger_swiglu,
                   entry="torch.nn.functional.linear, then liger_kernel.transformers.functional.liger_swiglu",
                   kernel_lang="triton", variants=[{"GEMM": "fused"}, {"GEMM": "split"}], backend="triton",
                   probe=_on_cpu),
    ExpertTemplate(name="flashinfer.batch_decode", kinds=("decode_attention",), library=FLASHINFER,
                   make=_flashinfer_decode, dtypes=_HALF, backend="cuda", min_sm=(8, 0),
                   entry="flashinfer.BatchDecodeWithPagedKVCacheWrapper(kv_layout='HND', use_cuda_graph=True, "
                         "backend='fa2'), one page per sequence"),
    *[ExpertTemplate(name=f"torch.sdpa.{label}", kinds=("decode_attention",), library=TORCH, make=_sdpa(backend),
                     entry=f"torch.nn.functional.scaled_dot_product_attention(attn_mask, enable_gqa=True), "
                           f"SDPBackend.{backend}",
                     backend="any" if label == "flash" else "cuda", probe=_always)
      for label, backend in (("flash", "FLASH_ATTENTION"), ("cudnn", "CUDNN_ATTENTION"),
                             ("efficient", "EFFICIENT_ATTENTION"))],
]

EXPERT_NAMES = frozenset(t.name for t in EXPERT_TEMPLATES)


def is_expert(template: Template) -> bool:
    return isinstance(template, ExpertTemplate)


def is_expert_id(candidate_id: str) -> bool:
    return candidate_id.split("[", 1)[0] in EXPERT_NAMES


# ---------------------------------------------------------------------------------------------
# availability


_probed: dict[tuple, str | None] = {}


def _probe_reason(t: ExpertTemplate, params: dict[str, Any], region: Region, device_type: str) -> str | None:
    from ..validate import RegionWeights, make_args

    key = (t.name, tuple(sorted(params.items())), region.kind, region.inputs, region.dtype, device_type,
           triton_interpreting())
    if key not in _probed:
        try:
            c = t.materialise(params, region)
            args = make_args(region, RegionWeights(device=device_type), seed=0)
            with torch.no_grad():
                c.fn(*args)
            if device_type == "cuda":
                torch.cuda.synchronize()
            _probed[key] = None
        except Exception as e:  # noqa: BLE001 -- what the library says is the reason it is unavailable
            where = "under the Triton CPU interpreter" if device_type == "cpu" and t.backend == "triton" else \
                f"on {device_type}"
            _probed[key] = (f"{t.library.distribution} {params.get('version')}: {t.name} fails a trial call {where}: "
                            f"{type(e).__name__}: {e}")[:400]
    return _probed[key]


def unavailable(template: Template, params: dict[str, Any], region: Region, device_type: str,
                trial_call: bool = True) -> list[str]:
    """Reasons an expert candidate cannot run here (empty: it can be measured; always empty for
    Hercules' own templates). ``trial_call``: the point passed the constraints, so a template that
    probes may try one call."""
    if not isinstance(template, ExpertTemplate):
        return []
    missing = template.library.missing()
    if missing:
        return [f"unavailable: {missing}"]
    if trial_call and template.probe(device_type):
        reason = _probe_reason(template, params, region, device_type)
        if reason:
            return [f"unavailable: {reason}"]
    return []


def expert_note(template_name: str, params: dict[str, Any]) -> str | None:
    """The library, version and entry point of a chosen expert candidate, for its decision's why."""
    for t in EXPERT_TEMPLATES:
        if t.name == template_name:
            return f"expert {t.name}: {params.get('library')} {params.get('version')}, {t.entry}"
    return None


def chosen_experts(plan_json: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Regions of a plan (``Plan.to_json()``) that run an expert: region -> template, library,
    version. Read from the decisions alone, so a saved plan answers too."""
    out = {}
    for name, d in plan_json.get("decisions", {}).items():
        if d.get("template") in EXPERT_NAMES and not d.get("fused_into"):
            p = d.get("params", {})
            out[name] = {"template": d["template"], "library": p.get("library"), "version": p.get("version")}
    return out
