"""GPU checks of the issue-16 templates (skipped without CUDA): the two-stage argmax, one-launch
split-K and programmatic dependent launch inside the captured decode step, and their self-check
points against the PyTorch references."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from compile_helpers import prompt

pytestmark = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
needs_sm90 = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0),
                                reason="programmatic dependent launch needs SM 9.0+")


def _id(template: str, **params) -> str:
    from hercules.compile.templates.base import CandidateSpec, params_key

    return CandidateSpec(template, "", "", params_key(params)).id


# every region the new parameters reach, each pinned to a PDL point; split-K one launch (Triton) and
# inside a block (CUDA); the norm folded into QKV (CUDA) and gate/up (Triton)
PDL_PINS = {
    "token_select": _id("triton_argmax", CHUNK=1024, BLOCK=1024, num_warps=4, ONE_LAUNCH=1, PDL=1),
    "o_proj": _id("triton_gemv", MODE="dot", BLOCK_N=16, BLOCK_K=64, SPLIT_K=2, num_warps=4, SPLIT_REDUCE="last",
                  PDL=1),
    "down_proj": _id("cuda_gemv", WARPS=4, ROWS=1, UNROLL=2, KSPLIT=2, PDL=1),
    "lm_head": _id("cuda_gemv", WARPS=8, ROWS=2, UNROLL=2, KSPLIT=4, PDL=1),
    "qkv_proj": _id("cuda_norm_gemv", WARPS=4, ROWS=1, UNROLL=2, KSPLIT=2, PDL=1),
    "gate_up_silu_mul": _id("triton_norm_gemv", BLOCK_N=16, BLOCK_K=64, num_warps=4, PDL=1),
}


@needs_sm90
@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen3"])
def test_pdl_split_k_and_argmax_in_the_captured_step_match_eager(name, tmp_path):
    """The step with PDL kernels back to back (and one-launch reductions) captured in a CUDA graph
    reproduces HF's greedy tokens over 48 steps, twice in a row (the ticket counters reset)."""
    _captured_decode_matches_eager(name, tmp_path, PDL_PINS)


def _captured_decode_matches_eager(name, tmp_path, pins: dict, random_norms: bool = False):
    """The tiny model (fp32) compiled with ``pins`` (budget 0: only the pins and the fallbacks are
    built), decoded in the captured step twice over 48 tokens against HF's greedy tokens (the second
    run shows the ticket counters reset); ``random_norms``: every RMSNorm weight drawn first."""
    from hercules.compile import build_model, compile_model

    m = build_model(name, dtype="fp32", device="cuda", seed=1)
    if random_norms:
        g = torch.Generator().manual_seed(5)
        with torch.no_grad():
            for mod in m.modules():
                if type(mod).__name__.endswith("RMSNorm"):
                    mod.weight.copy_(1 + 0.5 * torch.randn(mod.weight.shape, generator=g).to(mod.weight.device))
    ids = prompt(2, 9).cuda()
    ref = m.generate(ids, max_new_tokens=48, do_sample=False)
    dec = compile_model(m, cache_dir=tmp_path, batch_size=2, max_seq_len=64, force=pins, budget=0, step_check=False)
    assert dec.runtime.use_cuda_graph
    plan = dec.plan.implementations()
    assert {k: plan[k] for k in pins} == pins, dec.plan.table()
    first, again = dec.generate(ids, 48), dec.generate(ids, 48)
    assert torch.equal(first, ref), dec.plan.table()
    assert torch.equal(again, ref)
    return dec


# the residual add + RMSNorm in the projections' epilogues, one in each language, both with PDL
EPILOGUE_PINS = {
    "o_proj": _id("triton_gemv_add_rmsnorm", BLOCK_N=16, BLOCK_K=64, num_warps=4, PDL=1),
    "down_proj": _id("cuda_gemv_add_rmsnorm", WARPS=4, ROWS=1, UNROLL=2, KSPLIT=2, PDL=1),
}


@needs_sm90
@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen3"])
def test_norm_in_the_projection_epilogues_in_the_captured_step_matches_eager(name, tmp_path):
    """o_proj and down_proj writing residual + W x and its RMSNorm (the last program / warp to take
    the ticket normalises), captured in the step's CUDA graph with PDL, reproduce HF's greedy tokens
    over 48 steps twice; every RMSNorm weight random (the tiny models' are all ones)."""
    dec = _captured_decode_matches_eager(name, tmp_path, EPILOGUE_PINS, random_norms=True)
    assert dec.plan.decisions["final_norm"].fused_into == "down_proj"


def _selfcheck(lang: str, templates: str, per_template: int) -> dict:
    p = subprocess.run([sys.executable, "-m", "hercules.compile.selfcheck", "--lang", lang, "--device", "cuda",
                        "--dtype", "bfloat16", "--per-template", str(per_template), "--batches", "1,2,8",
                        "--templates", templates], capture_output=True, text=True, timeout=1200, env=dict(os.environ))
    assert p.stdout, p.stderr[-4000:]
    return json.loads(p.stdout)


@needs_cuda
@pytest.mark.parametrize("lang, templates, per_template", [
    ("triton", "triton_argmax,triton_gemv,triton_norm_gemv,triton_gemv_add_rmsnorm", 6),
    ("cuda", "cuda_gemv,cuda_gemv_swiglu,cuda_norm_gemv,cuda_norm_gemv_swiglu,cuda_gemv_add_rmsnorm", 8),
])
def test_new_points_match_the_references_on_gpu(lang, templates, per_template):
    out = _selfcheck(lang, templates, per_template)
    failed = [r for r in out["results"] if r["ok"] is False]
    assert not failed, "\n".join(json.dumps(r) for r in failed)
    pts = [r["params"] for r in out["results"] if r["ok"]]
    if torch.cuda.get_device_capability() >= (9, 0):
        assert any(p.get("PDL") == 1 for p in pts)
    if lang == "cuda":
        assert {p["KSPLIT"] for p in pts} >= {1, 4}
