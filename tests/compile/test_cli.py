"""The click commands the lead registers in the top-level ``hercules`` group."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hercules.compile.cli import compile_cmd, generate_cmd


@pytest.mark.parametrize("preset", ["tiny-llama", "tiny-qwen3"])
def test_generate_json_compare_eager(preset, cache_dir):
    r = CliRunner().invoke(generate_cmd, ["--preset", preset, "--device", "cpu", "--new-tokens", "32",
                                          "--compare-eager", "--json", "--cache-dir", str(cache_dir)])
    assert r.exit_code == 0, r.output + str(r.exception)
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1  # exactly one JSON object on stdout
    d = json.loads(lines[0])
    assert d["tokens_match"] is True and d["token_agreement"] == 1.0 and d["first_mismatch"] is None
    assert d["new_tokens"] == 32 and d["tok_s"] > 0 and d["eager_tok_s"] > 0
    assert d["max_logit_diff"] < 1e-3 and len(d["max_logit_diff_per_step"]) == 32
    assert set(d["plan"]) >= {"embedding", "decode_attention", "lm_head", "token_select"}
    assert ("qk_norm" in d["plan"]) == (preset == "tiny-qwen3")


def test_generate_batch_and_sampling(cache_dir):
    r = CliRunner().invoke(generate_cmd, ["--preset", "tiny-llama", "--device", "cpu", "--new-tokens", "8",
                                          "--prompt-len", "5", "--batch", "2", "--sample", "--top-k", "20",
                                          "--compare-eager", "--json", "--cache-dir", str(cache_dir)])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["batch"] == 2 and d["tokens_match"] is None and "note" in d


def test_compile_prints_the_plan(cache_dir, tmp_path, tiny_models):
    tiny_models["tiny-qwen3"].save_pretrained(tmp_path / "ck")
    r = CliRunner().invoke(compile_cmd, ["--checkpoint", str(tmp_path / "ck"), "--device", "cpu", "--json",
                                         "--cache-dir", str(cache_dir)])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["plan"]["decisions"]["rotary"]["implementation"]
    r2 = CliRunner().invoke(compile_cmd, ["--preset", "tiny-qwen3", "--device", "cpu", "--cache-dir", str(cache_dir)])
    assert r2.exit_code == 0 and "decode_attention" in r2.stdout


def test_generate_fidelity_json(cache_dir):
    r = CliRunner().invoke(generate_cmd, ["--preset", "tiny-llama", "--device", "cpu", "--new-tokens", "8",
                                          "--fidelity", "--json", "--cache-dir", str(cache_dir)])
    assert r.exit_code == 0, r.output + str(r.exception)
    f = json.loads(r.stdout)["fidelity"]
    assert f["dtype"] == "float32" and f["positions"] == 9 and f["passed"] is True
    assert f["kl_hf_same_dtype"] == 0.0 and 0 <= f["kl_hercules"] < 1e-10 and f["tolerance"] > 0
    r = CliRunner().invoke(generate_cmd, ["--preset", "tiny-llama", "--device", "cpu", "--new-tokens", "4",
                                          "--fidelity", "--cache-dir", str(cache_dir)])
    assert r.exit_code == 0 and "fidelity gate: passed" in r.stdout and "kl_hf_same_dtype: 0" in r.stdout


def test_usage_errors():
    r = CliRunner().invoke(generate_cmd, ["--device", "cpu"])
    assert r.exit_code != 0 and "exactly one of --preset" in r.output
    r = CliRunner().invoke(generate_cmd, ["--preset", "gpt-17", "--device", "cpu"])
    assert r.exit_code != 0 and "unknown preset" in r.output
