"""GPU checks (skipped without CUDA). Written without a GPU at hand: they are the lead's first
verification of the CUDA/Triton paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from compile_helpers import prompt

pytestmark = pytest.mark.gpu


def _selfcheck(lang: str, dtype: str, per_template: int = 3) -> dict:
    p = subprocess.run([sys.executable, "-m", "hercules.compile.selfcheck", "--lang", lang, "--device", "cuda",
                        "--dtype", dtype, "--per-template", str(per_template), "--batches", "1,2,8"],
                       capture_output=True, text=True, timeout=1800, env=dict(os.environ))
    assert p.stdout, p.stderr[-4000:]
    return json.loads(p.stdout)


def _failures(out: dict) -> str:
    """Each failed point in full (template, params, error): the default repr cuts them short."""
    return "\n".join(json.dumps(r) for r in out["results"] if r["ok"] is False)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_triton_templates_on_gpu(dtype):
    out = _selfcheck("triton", dtype)
    assert out["failed"] == 0, _failures(out)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_cuda_templates_on_gpu(dtype):
    out = _selfcheck("cuda", dtype)
    assert out["failed"] == 0, _failures(out)
    assert out["checked"] > 0


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen3"])
def test_tiny_fp32_on_cuda_with_graphs_matches_eager(name, tmp_path):
    from hercules.compile import build_model, compile_model

    m = build_model(name, dtype="fp32", device="cuda", seed=1)
    ids = prompt(2, 9).cuda()
    ref = m.generate(ids, max_new_tokens=48, do_sample=False)
    dec = compile_model(m, cache_dir=tmp_path, batch_size=2, max_seq_len=64)
    assert dec.runtime.use_cuda_graph
    out = dec.generate(ids, 48)
    assert torch.equal(out, ref), dec.plan.table()
    # pinned Triton + CUDA kernels in the captured step
    force = {"residual_rmsnorm": "cuda_add_rmsnorm", "final_norm": "triton_add_rmsnorm", "rotary": "triton_qk_rotary",
             "decode_attention": "cuda_flash_decode", "gate_up_silu_mul": "triton_gemv", "o_proj": "triton_gemv"}
    dec2 = compile_model(m, cache_dir=tmp_path, batch_size=2, max_seq_len=64, force=force, step_check=False)
    assert torch.equal(dec2.generate(ids, 48), ref), dec2.plan.table()
    # rotary, the cache write and attention as one kernel in the captured step
    dec3 = compile_model(m, cache_dir=tmp_path, batch_size=2, max_seq_len=64,
                         force={"rotary": "triton_rotary_flash_decode"}, step_check=False)
    assert "rotary+kv_write+attention" in dec3.runtime.impls, dec3.plan.table()
    assert torch.equal(dec3.generate(ids, 48), ref), dec3.plan.table()


def test_decode_loop_does_not_synchronise(tmp_path):
    from hercules.compile import build_model, compile_model

    m = build_model("tiny-qwen3", dtype="bf16", device="cuda", seed=1)
    dec = compile_model(m, cache_dir=tmp_path)
    ids = prompt(1, 8).cuda()
    dec.generate(ids, 16)  # capture
    dec.generate(ids, 16, do_sample=True, top_p=0.9, seed=1)  # capture the sampling graph
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        dec.generate(ids, 16)
        dec.generate(ids, 16, do_sample=True, top_p=0.9, seed=1)
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["llama-3.2-1b", "qwen3-1.7b"])
def test_published_config_bf16_agreement_and_speed(preset, tmp_path):
    """bf16, batch 1: token agreement with eager over 128 tokens, logit differences on identical
    contexts (teacher forcing), and tok/s of eager vs compiled (printed for the record)."""
    import time

    from hercules.compile import build_model, compile_model

    m = build_model(preset, dtype="bf16", device="cuda", seed=0)
    ids = prompt(1, 32, vocab=m.config.vocab_size).cuda()
    hf = m.generate(ids, max_new_tokens=128, do_sample=False, output_logits=True, return_dict_in_generate=True)
    dec = compile_model(m, cache_dir=tmp_path, max_seq_len=160)
    out = dec.generate(ids, 128)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = dec.generate(ids, 128)
    torch.cuda.synchronize()
    tok_s = 128 / (time.perf_counter() - t0)
    agree = (out[:, 32:] == hf.sequences[:, 32:]).float().mean().item()
    _, logits = dec.generate(ids, 128, forced=hf.sequences[:, 32:], return_logits=True)
    diff = (logits - torch.stack(hf.logits).float()).abs().amax(dim=(1, 2))
    print(json.dumps({"preset": preset, "tok_s": tok_s, "agreement": agree, "max_logit_diff": diff.max().item(),
                      "plan": dec.plan.implementations(), "step_check": dec.plan.step_check}))
    assert out[0, 32] == hf.sequences[0, 32]
    assert diff.max().item() < 0.5


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["qwen3-1.7b"])
def test_exact_mode_is_bit_identical_on_gpu_bf16(preset, tmp_path):
    from hercules.compile import build_model, compile_model

    m = build_model(preset, dtype="bf16", device="cuda", seed=0)
    ids = prompt(1, 32, vocab=m.config.vocab_size).cuda()
    hf = m.generate(ids, max_new_tokens=128, do_sample=False, output_logits=True, return_dict_in_generate=True)
    dec = compile_model(m, exact=True, cache_dir=tmp_path)
    out, logits = dec.generate(ids, 128, return_logits=True)
    assert torch.equal(out, hf.sequences)
    assert (logits - torch.stack(hf.logits).float()).abs().max().item() == 0.0


def test_graphed_prefill_matches_the_eager_pass_across_prompt_lengths():
    """One prefill graph per prompt length, replayed with new prompt contents; its logits and caches
    equal the eager pass's, and only the most recent lengths keep a graph."""
    from hercules.compile import build_model
    from hercules.compile.runtime import DecodeRuntime

    m = build_model("tiny-qwen3", dtype="fp32", device="cuda", seed=1)
    graphed, eager = DecodeRuntime(m), DecodeRuntime(m, graph_prefill=False)
    assert graphed.graph_prefill and not eager.graph_prefill
    lengths = [9, 5, 9, 3, 7, 11, 13, 5]
    for i, T in enumerate(lengths):
        ids = prompt(2, T, seed=i).cuda()
        sg, se = graphed.state(2, 64), eager.state(2, 64)
        got, want = graphed.prefill(ids, sg).clone(), eager.prefill(ids, se)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(sg.k_cache[:, :, :, :T], se.k_cache[:, :, :, :T], rtol=1e-5, atol=1e-5)
    assert graphed.graph_prefill  # no capture failed
    assert DecodeRuntime.MAX_PREFILL_GRAPHS == 4
    assert list(graphed.state(2, 64).prefill_graphs) == [7, 11, 13, 5]  # least recently used first
