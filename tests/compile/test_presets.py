from __future__ import annotations

import pytest
import torch

from hercules.compile.presets import PRESETS, build_model, get_preset, load_checkpoint
from hercules.compile.regions import model_spec, roofline_tok_s


def test_published_configs_match_known_values():
    l1 = get_preset("Llama-3.2-1B")
    assert (l1.hidden_size, l1.intermediate_size, l1.num_hidden_layers) == (2048, 8192, 16)
    assert (l1.num_attention_heads, l1.num_key_value_heads, l1.head_dim, l1.vocab_size) == (32, 8, 64, 128256)
    assert l1.rope_theta == 500000.0 and dict(l1.rope_scaling)["rope_type"] == "llama3"
    assert l1.tie_word_embeddings and l1.rms_norm_eps == 1e-5
    q17 = get_preset("qwen3-1.7b")
    assert (q17.hidden_size, q17.intermediate_size, q17.num_hidden_layers, q17.head_dim) == (2048, 6144, 28, 128)
    assert (q17.num_attention_heads, q17.num_key_value_heads, q17.vocab_size) == (16, 8, 151936)
    q4 = get_preset("qwen3-4b")
    assert (q4.hidden_size, q4.intermediate_size, q4.num_hidden_layers) == (2560, 9728, 36)
    assert (q4.num_attention_heads, q4.num_key_value_heads, q4.rope_theta) == (32, 8, 1_000_000.0)


@pytest.mark.parametrize("name, params_b, roofline", [
    ("llama-3.2-1b", 1.236, 1700), ("qwen3-1.7b", 1.721, 1230), ("qwen3-4b", 4.022, 530)])
def test_parameter_counts_give_the_design_roofline(name, params_b, roofline):
    """docs/design.md: bf16 weights read once per token at 4.24 TB/s -> ~1,700 / 1,230 / 530 tok/s."""
    p = get_preset(name)
    assert p.weight_params() / 1e9 == pytest.approx(params_b, rel=2e-3)
    with torch.device("meta"):
        from transformers import AutoModelForCausalLM

        m = AutoModelForCausalLM.from_config(p.hf_config(), dtype=torch.bfloat16)
    assert sum(t.numel() for t in m.parameters()) == p.weight_params()
    assert roofline_tok_s(model_spec(m), 4.24e12) == pytest.approx(roofline, rel=0.02)


def test_tiny_presets_are_gqa(tiny_models):
    for name, m in tiny_models.items():
        s = model_spec(m)
        assert s.kv_heads < s.heads and s.layers >= 2
        assert s.arch == PRESETS[name].arch


def test_build_model_is_seeded():
    a = build_model("tiny-qwen3", seed=3)
    b = build_model("tiny-qwen3", seed=3)
    c = build_model("tiny-qwen3", seed=4)
    wa, wb, wc = (m.model.layers[0].mlp.down_proj.weight for m in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)


def test_load_checkpoint_from_a_folder_the_test_writes(tmp_path, tiny_models):
    """No hub access: save a tiny model with save_pretrained, load it back locally, decode."""
    from hercules.compile import compile_model

    src = tiny_models["tiny-qwen3"]
    src.save_pretrained(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "config.json").exists()
    assert list((tmp_path / "ckpt").glob("*.safetensors"))
    m = load_checkpoint(tmp_path / "ckpt", dtype="fp32", device="cpu")
    assert m.config.model_type == "qwen3"
    for (n1, p1), (n2, p2) in zip(src.state_dict().items(), m.state_dict().items()):
        assert n1 == n2 and torch.equal(p1, p2)
    ids = torch.randint(0, 512, (1, 8), generator=torch.Generator().manual_seed(5))
    ref = m.generate(ids, max_new_tokens=32, do_sample=False)
    dec = compile_model(m, cache_dir=tmp_path / "cache")
    assert torch.equal(dec.generate(ids, 32), ref)


def test_load_checkpoint_rejects_a_folder_without_config(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path)
