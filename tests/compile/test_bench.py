"""The measurement helpers the lead's benchmarks/decode.py uses (CPU smoke; the H200 numbers come
from the GPU run)."""

from __future__ import annotations

import pytest

from hercules.compile.bench import ablation, decode_row, measurements_to_reach
from hercules.compile.regions import model_spec, roofline_tok_s


def test_decode_row_on_cpu(tiny_models, cache_dir):
    row = decode_row(tiny_models["tiny-llama"], batch=1, prompt_len=8, new_tokens=16, baselines=("eager",),
                     compile_kwargs={"cache_dir": cache_dir}, warmup=1, reps=1)
    assert row["hercules_tok_s"] > 0 and row["eager_tok_s"] > 0 and row["roofline_tok_s"] > 0
    assert row["token_agreement"] == 1.0
    assert row["teacher_forced_agreement"] == 1.0  # fp32 on the CPU: the same argmax at every step
    assert not row["cache_hit"] and row["compile_again_cache_hit"]
    assert 0 <= row["median_step_max_logit_diff"] <= row["max_logit_diff"] < 1e-3
    assert 0 < row["hercules_roofline_fraction"]
    # the roofline divides by this device's own copy rate, measured for the row and said in it
    assert row["roofline_bandwidth_gbs"] > 0
    expected = roofline_tok_s(model_spec(tiny_models["tiny-llama"]), row["roofline_bandwidth_gbs"] * 1e9)
    assert row["roofline_tok_s"] == pytest.approx(expected, rel=1e-12)
    assert row["regions"]["lm_head"]["x_per_token"] == 1 and row["regions"]["lm_head"]["chosen_ms"] > 0
    # the step's budget by region: every kernel the plan launches, its bytes and time
    budget = row["budget"]
    assert budget["regions"]["lm_head"]["calls"] == 1 and budget["regions"]["lm_head"]["bytes"] > 0
    check = row["step_check"] or {}  # the step as the plan runs it (the fallback's if the check reverted it)
    assert budget["kernel_ms"] > 0
    assert budget["step_wall_ms"] == (check.get("plan_ms") if check.get("kept", True) else check.get("fallback_ms"))
    # the fidelity gate over the same prompt: fp32 HF is the reference itself (KL 0), Hercules float noise
    assert row["kl_hf_same_dtype"] == 0.0 and 0 <= row["kl_hercules"] < 1e-10 and row["fidelity_passed"]
    assert row["fidelity"]["positions"] == 17 and row["fidelity"]["argmax_agreement_hercules"] == 1.0
    assert row["position"] == 8 and row["roofline_kv_tok_s"] < row["roofline_tok_s"]


def test_ablation_structure(tiny_models):
    res = ablation(tiny_models["tiny-qwen3"], budget=3, seeds=(0, 1), max_seq_len=32)
    assert set(res["summary"]) == {"rules", "none"}
    assert res["summary"]["none"]["runs"] == 2 and res["summary"]["rules"]["runs"] == 1
    for r in res["runs"]:
        assert r["measurements"] <= 3
        assert r["to_own_final"] is not None and r["to_own_final"] <= r["measurements"]


def test_measurements_to_reach():
    trace = [{"measurements": 0, "step_estimate_ms": 10.0}, {"measurements": 1, "step_estimate_ms": 6.0},
             {"measurements": 2, "step_estimate_ms": 5.0}]
    assert measurements_to_reach(trace, 5.0, tol=0.0) == 2
    assert measurements_to_reach(trace, 5.8, tol=0.05) == 1
    assert measurements_to_reach(trace, 1.0) is None


def test_decode_script_runs_each_model_in_its_own_process(tmp_path):
    """benchmarks/decode.py on the CPU (tiny preset, fp32): the rows of a model that ran (the usual
    one and a long-context one), and a job that failed (an unknown preset) recorded as failed
    without losing the other."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "decode.py"
    out = tmp_path / "decode.json"
    p = subprocess.run([sys.executable, str(script), "--device", "cpu", "--dtype", "float32", "--models",
                        "tiny-llama,no-such-preset", "--batches", "1", "--new-tokens", "4", "--prompt-len", "4",
                        "--positions", "24", "--out", str(out)], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, HERCULES_COMPILE_CACHE=str(tmp_path / "cache")))
    assert p.returncode == 0, p.stderr[-2000:]
    result = json.loads(out.read_text())
    assert [(r["model"], r["row"], r["position"]) for r in result["rows"]] == [
        ("tiny-llama", "prompt", 4), ("tiny-llama", "long_context", 24)]
    assert result["rows"][0]["token_agreement"] == 1.0
    assert all(r["fidelity_passed"] for r in result["rows"])
    assert "| position |" in p.stdout  # the long-context table
    assert p.stdout.count(" region calls, ") == 2 and "us of kernel time" in p.stdout  # a budget after each row
    assert all(r["budget"]["regions"] for r in result["rows"])
    assert result["failed"] == [{"job": "model:no-such-preset", "exit_status": 1}]
    assert not list(tmp_path.glob("*.part.json"))  # merged into --out, then removed
