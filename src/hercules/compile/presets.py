"""Named model presets (published configs plus tiny CPU configs) and model construction.

The three published configs are written from the models' ``config.json`` files on the Hugging Face
hub (no hub access here): Llama-3.2-1B (meta-llama), Qwen3-1.7B and Qwen3-4B (Qwen). Weights are
random; only the shapes matter for decode speed. The weight bytes these configs give match the
roofline anchors in docs/design.md (bf16, read once per token at 4.24 TB/s): about 1,700 / 1,230 / 530
tokens/s.

``tiny-*`` presets are small enough to run eagerly on two CPU cores in well under a second per
32 tokens, and keep grouped-query attention (n_kv < n_heads) so the GQA paths are exercised.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass(frozen=True)
class Preset:
    name: str
    arch: str  # "llama" or "qwen3"
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    rope_theta: float
    rms_norm_eps: float
    tie_word_embeddings: bool
    max_position_embeddings: int
    # rope scaling as in config.json's "rope_scaling" (None = plain RoPE); a tuple of pairs so the
    # preset stays hashable and frozen
    rope_scaling: tuple[tuple[str, Any], ...] | None = None
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    initializer_range: float = 0.02
    source: str = ""  # where the numbers come from
    extra: tuple[tuple[str, Any], ...] = field(default=())

    def config_dict(self) -> dict[str, Any]:
        """Keyword arguments for the transformers config class (transformers 5.x field names)."""
        rope: dict[str, Any] = {"rope_type": "default", "rope_theta": float(self.rope_theta)}
        if self.rope_scaling:
            rope.update(dict(self.rope_scaling))
        d: dict[str, Any] = dict(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_key_value_heads,
            head_dim=self.head_dim,
            hidden_act="silu",
            max_position_embeddings=self.max_position_embeddings,
            rms_norm_eps=self.rms_norm_eps,
            tie_word_embeddings=self.tie_word_embeddings,
            rope_parameters=rope,
            attention_bias=False,
            bos_token_id=self.bos_token_id,
            eos_token_id=self.eos_token_id,
            initializer_range=self.initializer_range,
        )
        if self.arch == "llama":
            d["mlp_bias"] = False
        d.update(dict(self.extra))
        return d

    def hf_config(self):
        if self.arch == "llama":
            from transformers import LlamaConfig

            return LlamaConfig(**self.config_dict())
        if self.arch == "qwen3":
            from transformers import Qwen3Config

            return Qwen3Config(**self.config_dict())
        raise ValueError(f"unknown arch {self.arch!r}")

    def weight_params(self) -> int:
        """Parameter count (tied embeddings counted once)."""
        h, i, v = self.hidden_size, self.intermediate_size, self.vocab_size
        q = self.num_attention_heads * self.head_dim
        kv = self.num_key_value_heads * self.head_dim
        per_layer = h * (q + 2 * kv) + q * h + 3 * h * i + 2 * h
        if self.arch == "qwen3":
            per_layer += 2 * self.head_dim
        total = self.num_hidden_layers * per_layer + v * h + h
        if not self.tie_word_embeddings:
            total += v * h
        return total


PRESETS: dict[str, Preset] = {
    # meta-llama/Llama-3.2-1B config.json
    "llama-3.2-1b": Preset(
        name="llama-3.2-1b",
        arch="llama",
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,
        vocab_size=128256,
        rope_theta=500000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        max_position_embeddings=131072,
        rope_scaling=(
            ("rope_type", "llama3"),
            ("factor", 32.0),
            ("high_freq_factor", 4.0),
            ("low_freq_factor", 1.0),
            ("original_max_position_embeddings", 8192),
        ),
        bos_token_id=128000,
        eos_token_id=128001,
        source="meta-llama/Llama-3.2-1B config.json",
    ),
    # Qwen/Qwen3-1.7B config.json
    "qwen3-1.7b": Preset(
        name="qwen3-1.7b",
        arch="qwen3",
        hidden_size=2048,
        intermediate_size=6144,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        max_position_embeddings=40960,
        bos_token_id=151643,
        eos_token_id=151645,
        source="Qwen/Qwen3-1.7B config.json",
    ),
    # Qwen/Qwen3-4B config.json
    "qwen3-4b": Preset(
        name="qwen3-4b",
        arch="qwen3",
        hidden_size=2560,
        intermediate_size=9728,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        max_position_embeddings=40960,
        bos_token_id=151643,
        eos_token_id=151645,
        source="Qwen/Qwen3-4B config.json",
    ),
    # Tiny CPU configs: GQA (8 heads over 2 kv heads), head_dim 16, untied lm_head for llama and
    # tied for qwen3 so both paths are exercised. Llama keeps llama3 rope scaling. Init std 0.2
    # (HF default 0.02) so greedy decoding does not collapse onto one repeated token: at 0.02 a
    # tiny random model emits 1-6 distinct tokens in 32; at 0.2 it emits 25-31, with top-2 logit
    # gaps of 5e-3..1e-1, far above fp32 noise (~1e-6).
    "tiny-llama": Preset(
        name="tiny-llama",
        arch="llama",
        hidden_size=128,
        intermediate_size=352,
        num_hidden_layers=3,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=16,
        vocab_size=512,
        rope_theta=500000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        max_position_embeddings=2048,
        rope_scaling=(
            ("rope_type", "llama3"),
            ("factor", 32.0),
            ("high_freq_factor", 4.0),
            ("low_freq_factor", 1.0),
            ("original_max_position_embeddings", 256),
        ),
        initializer_range=0.2,
        source="tiny test config (Llama-3.2 layout)",
    ),
    "tiny-qwen3": Preset(
        name="tiny-qwen3",
        arch="qwen3",
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=3,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=32,
        vocab_size=512,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        max_position_embeddings=2048,
        initializer_range=0.2,
        source="tiny test config (Qwen3 layout)",
    ),
}

ALIASES = {
    "llama-3.2-1B": "llama-3.2-1b",
    "Llama-3.2-1B": "llama-3.2-1b",
    "Qwen3-1.7B": "qwen3-1.7b",
    "Qwen3-4B": "qwen3-4b",
}


def get_preset(name: str) -> Preset:
    key = ALIASES.get(name, name).lower()
    if key not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; known: {', '.join(sorted(PRESETS))}")
    return PRESETS[key]


def parse_dtype(dtype: str | torch.dtype | None, device: str | torch.device | None = None) -> torch.dtype:
    """'bf16'/'bfloat16'/'fp16'/'fp32'... to a torch dtype; None: bf16 on CUDA, fp32 on CPU."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype is None or dtype == "auto":
        dev = torch.device(device) if device is not None else torch.device("cpu")
        return torch.bfloat16 if dev.type == "cuda" else torch.float32
    table = {
        "bf16": torch.bfloat16,
        "bfloat16": torch.bfloat16,
        "fp16": torch.float16,
        "float16": torch.float16,
        "half": torch.float16,
        "fp32": torch.float32,
        "float32": torch.float32,
        "float": torch.float32,
    }
    if dtype not in table:
        raise ValueError(f"unknown dtype {dtype!r}")
    return table[dtype]


def build_model(
    preset: Preset | str,
    dtype: str | torch.dtype | None = None,
    device: str | torch.device = "cpu",
    seed: int = 0,
):
    """A ``LlamaForCausalLM`` / ``Qwen3ForCausalLM`` with random weights (HF's own init, seeded).

    The model is created directly on ``device`` in ``dtype`` (no fp32 CPU copy of a 4B model),
    in eval mode, with eager-comparable defaults (sdpa attention, which is HF's default).
    """
    from transformers import AutoModelForCausalLM

    if isinstance(preset, str):
        preset = get_preset(preset)
    dt = parse_dtype(dtype, device)
    config = preset.hf_config()
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dt)
    model.eval()
    model.requires_grad_(False)
    _prepare_generation_config(model)
    return model


def load_checkpoint(folder: str | os.PathLike, dtype: str | torch.dtype | None = None, device: str | torch.device = "cpu"):
    """Load a local checkpoint folder (config.json + safetensors); never touches the network."""
    from transformers import AutoModelForCausalLM

    folder = os.fspath(folder)
    if not os.path.isfile(os.path.join(folder, "config.json")):
        raise FileNotFoundError(f"{folder} has no config.json")
    dt = parse_dtype(dtype, device)
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=dt)
    model.to(device)
    model.eval()
    model.requires_grad_(False)
    _prepare_generation_config(model)
    return model


def _prepare_generation_config(model) -> None:
    """Fixed-length decoding for comparisons: no EOS stop, a pad token so HF does not warn."""
    gc = model.generation_config
    gc.eos_token_id = None
    if gc.pad_token_id is None:
        gc.pad_token_id = 0


def preset_names() -> list[str]:
    return sorted(PRESETS)


def describe(preset: Preset) -> dict[str, Any]:
    d = dataclasses.asdict(preset)
    d["params"] = preset.weight_params()
    return d
