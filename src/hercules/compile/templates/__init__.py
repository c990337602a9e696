"""Candidate templates per region kind: PyTorch (always present; one of them is the fallback),
Triton, CUDA C++, and maintained libraries' kernels (``expert_templates``: Liger, QuACK,
FlashInfer, SDPA's pinned backends).

``templates_for(region, languages)`` lists every template that applies and that ``languages``
selects (an expert: "expert", its kernels' language or its library; see
``ExpertTemplate.selected_by``); ``fallback_spec(region)`` is the PyTorch implementation the
runtime uses when nothing else is chosen.
"""

from __future__ import annotations

from .. import reference as ref
from ..regions import Region
from .base import Candidate, CandidateSpec, Requirements, Template, TorchVariant
from .cuda_templates import CUDA_TEMPLATES
from .expert_templates import EXPERT_TEMPLATES, ExpertTemplate
from .triton_templates import TRITON_TEMPLATES

TORCH_TEMPLATES: list[TorchVariant] = [
    TorchVariant(name="torch", kinds=("embedding",), fn=ref.embedding, description="F.embedding"),
    TorchVariant(name="torch", kinds=("residual_rmsnorm",), fn=ref.residual_rmsnorm,
                 description="residual add, then HF RMSNorm (fp32 statistics)"),
    TorchVariant(name="torch", kinds=("final_norm",), fn=ref.final_norm,
                 description="residual add, then HF RMSNorm (fp32 statistics)"),
    TorchVariant(name="torch", kinds=("qkv_proj",), fn=ref.qkv_proj_split,
                 description="three F.linear over views of the fused weight (HF op for op)"),
    TorchVariant(name="torch_fused", kinds=("qkv_proj",), fn=ref.qkv_proj_fused, fallback=False,
                 description="one F.linear over [Wq;Wk;Wv]"),
    TorchVariant(name="torch", kinds=("qk_norm",), fn=ref.qk_norm, description="HF q_norm / k_norm"),
    TorchVariant(name="torch", kinds=("rotary",), fn=ref.rotary, description="HF apply_rotary_pos_emb"),
    TorchVariant(name="torch", kinds=("kv_write",), fn=ref.kv_write, description="index_copy_ at a device position"),
    TorchVariant(name="torch", kinds=("decode_attention",), fn=ref.decode_attention,
                 description="masked matmul-softmax-matmul over the static cache (HF eager casts)"),
    TorchVariant(name="torch_sdpa", kinds=("decode_attention",), fn=ref.decode_attention_sdpa, fallback=False,
                 description="F.scaled_dot_product_attention with a boolean mask and enable_gqa"),
    TorchVariant(name="torch", kinds=("o_proj", "down_proj", "lm_head"), fn=ref.linear, description="F.linear"),
    TorchVariant(name="torch", kinds=("gate_up_silu_mul",), fn=ref.gate_up_silu_mul_split,
                 description="silu(F.linear(x, Wg)) * F.linear(x, Wu) (HF op for op)"),
    TorchVariant(name="torch_fused", kinds=("gate_up_silu_mul",), fn=ref.gate_up_silu_mul_fused, fallback=False,
                 description="one F.linear over [Wg;Wu], then silu * mul"),
    TorchVariant(name="torch", kinds=("token_select",), fn=ref.token_select,
                 description="argmax, or temperature/top-k/top-p + exponential race"),
]

# experts last: templates the advice does not rank are tried in this order, Hercules' own first
ALL_TEMPLATES: list[Template] = [*TORCH_TEMPLATES, *TRITON_TEMPLATES, *CUDA_TEMPLATES, *EXPERT_TEMPLATES]


def _selected(t: Template, languages: tuple[str, ...]) -> bool:
    return t.selected_by(languages) if isinstance(t, ExpertTemplate) else t.lang in languages


def templates_for(region: Region, languages: tuple[str, ...] = ("torch", "triton", "cuda")) -> list[Template]:
    return [t for t in ALL_TEMPLATES if t.applies(region) and _selected(t, languages)]


def fallback_template(region: Region) -> TorchVariant:
    for t in TORCH_TEMPLATES:
        if t.fallback and t.applies(region):
            return t
    raise KeyError(f"no PyTorch fallback for region kind {region.kind!r}")


def fallback_spec(region: Region) -> CandidateSpec:
    return fallback_template(region).spec({}, region)


def find_template(name: str, region: Region) -> Template | None:
    for t in ALL_TEMPLATES:
        if t.name == name and t.applies(region):
            return t
    return None


__all__ = [
    "ALL_TEMPLATES",
    "Candidate",
    "CandidateSpec",
    "ExpertTemplate",
    "Requirements",
    "Template",
    "TorchVariant",
    "fallback_spec",
    "fallback_template",
    "find_template",
    "templates_for",
]
