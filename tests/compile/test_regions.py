from __future__ import annotations

import pytest

from hercules.compile.presets import get_preset
from hercules.compile.regions import REGION_KINDS, ModelSpec, UnsupportedModel, derive_regions, model_spec, step_bytes, weight_bytes


def test_llama_regions(tiny_models):
    m = tiny_models["tiny-llama"]
    s = model_spec(m)
    regs = derive_regions(m, batch=2, capacity=128)
    assert "qk_norm" not in regs
    assert set(regs) == set(REGION_KINDS) - {"qk_norm"}
    L, H, I = s.layers, s.hidden, s.intermediate
    assert regs["residual_rmsnorm"].count_per_token == 2 * L
    assert regs["final_norm"].count_per_token == 1 and regs["lm_head"].count_per_token == 1
    qkv = regs["qkv_proj"]
    assert qkv.input("weight").shape == (s.qkv_size, H)
    assert qkv.flops == 2 * 2 * H * s.qkv_size
    assert qkv.outputs[0].shape == (2, s.qkv_size)
    rot = regs["rotary"]
    q = rot.input("q")
    assert q.shape == (2, s.heads, s.head_dim) and q.stride == (s.qkv_size, s.head_dim, 1)
    assert not q.contiguous and q.last_dim_contiguous
    att = regs["decode_attention"]
    assert att.input("k_cache").shape == (2, s.kv_heads, 128, s.head_dim)
    assert att.attr("group") == s.heads // s.kv_heads
    assert regs["gate_up_silu_mul"].input("weight").shape == (2 * I, H)
    assert regs["token_select"].outputs[0].dtype == "int64"
    for r in regs.values():
        assert r.dtype == "float32" and r.batch == 2 and r.bytes > 0
        assert r.summary()["kind"] == r.kind


def test_qwen3_regions_have_qk_norm(tiny_models):
    regs = derive_regions(tiny_models["tiny-qwen3"], batch=1, capacity=256)
    assert set(regs) == set(REGION_KINDS)
    assert regs["qk_norm"].fusable_with == ("rotary",)
    assert regs["rotary"].attr("qk_norm_fusable") is True
    assert regs["lm_head"].attr("tied") is True


def test_published_shapes_and_weight_bytes():
    """Region bytes of the real configs add up to the weights read once per token."""
    p = get_preset("qwen3-4b")
    spec = ModelSpec("qwen3", p.hidden_size, p.intermediate_size, p.num_hidden_layers, p.num_attention_heads,
                     p.num_key_value_heads, p.head_dim, p.vocab_size, p.rms_norm_eps, True, "bfloat16", True)
    regs = derive_regions(spec, batch=1, capacity=256)
    assert regs["gate_up_silu_mul"].input("weight").shape == (2 * 9728, 2560)
    assert regs["qkv_proj"].input("weight").shape == ((32 + 16) * 128, 2560)
    wb = weight_bytes(spec)
    assert wb == pytest.approx(2 * p.weight_params(), rel=1e-3)
    # step bytes = weights + activations + KV cache: a bit above the weights
    assert wb < step_bytes(regs) < 1.1 * wb


def test_unsupported_model_is_rejected(tiny_models):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                      vocab_size=64, attention_bias=True)
    with pytest.raises(UnsupportedModel, match="bias"):
        model_spec(LlamaForCausalLM(cfg))
