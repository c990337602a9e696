"""Triton templates under the CPU interpreter (TRITON_INTERPRET=1 must be set before triton is
imported, so each check runs in a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton")


def _run(args: list[str], code: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, TRITON_INTERPRET="1", OMP_NUM_THREADS="1")
    cmd = [sys.executable, *(["-c", code] if code else args)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


NON_GEMV = "triton_add_rmsnorm,triton_swiglu,triton_qk_rotary,triton_qk_rotary_kv,triton_flash_decode,triton_kv_write"


@pytest.mark.parametrize("dtype, batches, templates, regions", [
    ("float32", "1,2", NON_GEMV, ""),
    # the GEMV in both modes, with and without split-K, plain and with the SwiGLU epilogue
    ("float32", "1,2", "triton_gemv", "gate_up_silu_mul,o_proj"),
    ("bfloat16", "2", NON_GEMV, ""),
    # residual add + RMSNorm folded into QKV and gate/up (with the SwiGLU epilogue)
    ("bfloat16", "1,3", "triton_norm_gemv", ""),
    # rotary + KV write + attention in one kernel (fp32: the interpreter truncates to bf16 where
    # GPUs round to nearest, and attention compounds that past the bf16 tolerance)
    ("float32", "1,3", "triton_rotary_flash_decode", ""),
    # greedy token selection: the first (one-launch) and the last (two-launch) point of the space
    ("bfloat16", "1,2", "triton_argmax", ""),
])
def test_triton_templates_match_references_under_interpreter(dtype, batches, templates, regions):
    per_template = "2" if templates == "triton_argmax" else "1"
    args = ["-m", "hercules.compile.selfcheck", "--lang", "triton", "--device", "cpu", "--dtype", dtype,
            "--per-template", per_template, "--batches", batches, "--templates", templates]
    if regions:
        args += ["--regions", regions]
    p = _run(args)
    assert p.stdout, p.stderr[-3000:]
    out = json.loads(p.stdout)
    bad = [r for r in out["results"] if r["ok"] is not True]
    assert not bad, bad[:5]
    kinds = {(r["template"], r["region"]) for r in out["results"]}
    if templates == NON_GEMV:
        assert ("triton_flash_decode", "decode_attention") in kinds
        assert ("triton_qk_rotary", "rotary") in kinds
        assert ("triton_add_rmsnorm", "final_norm") in kinds
        assert ("triton_swiglu", "gate_up_silu_mul") in kinds
        assert ("triton_kv_write", "kv_write") in kinds
        # fused q/k-norm + rotary was exercised on the Qwen3 shapes
        assert any(r["template"] == "triton_qk_rotary" and r["params"]["HAS_NORM"] == 1 for r in out["results"])
        # and the rotary that writes the KV cache, with and without the norm
        assert {r["params"]["HAS_NORM"] for r in out["results"] if r["template"] == "triton_qk_rotary_kv"} == {0, 1}
    elif templates == "triton_rotary_flash_decode":
        rows = [r for r in out["results"] if r["template"] == templates]
        assert {r["params"]["HAS_NORM"] for r in rows} == {0, 1}  # Llama without, Qwen3 with the q/k norm
        assert {r["params"]["SPLITS"] > 1 for r in rows} == {False, True}  # direct output and split + combine
    elif templates == "triton_argmax":
        assert kinds == {("triton_argmax", "token_select")}
        assert {r["params"]["ONE_LAUNCH"] for r in out["results"]} == {0, 1}
    elif templates == "triton_norm_gemv":
        assert kinds == {("triton_norm_gemv", "qkv_proj"), ("triton_norm_gemv", "gate_up_silu_mul")}
    else:
        modes = {(r["params"]["MODE"], r["params"]["SPLIT_K"] > 1) for r in out["results"] if r["template"] == "triton_gemv"}
        assert modes == {("reduce", False), ("reduce", True), ("dot", False), ("dot", True)}
    assert p.returncode == 0


def test_decode_with_triton_kernels_pinned_matches_hf_eager(tmp_path):
    """The runtime with Triton kernels (interpreted) in the decode step still reproduces HF's
    greedy tokens: fused add+RMSNorm, fused q/k-norm+rotary, flash-decoding attention, SwiGLU."""
    res = _decode_with_fusions_pinned({
        "residual_rmsnorm": "triton_add_rmsnorm", "final_norm": "triton_add_rmsnorm", "rotary": "triton_qk_rotary",
        "decode_attention": "triton_flash_decode", "gate_up_silu_mul": "triton_swiglu", "kv_write": "triton_kv_write",
    }, tmp_path)
    for name, r in res.items():
        assert r["match"], (name, r)
        assert r["plan"]["decode_attention"].startswith("triton_flash_decode"), r["plan"]
        assert r["plan"]["residual_rmsnorm"].startswith("triton_add_rmsnorm"), r["plan"]
        assert r["plan"]["gate_up_silu_mul"].startswith("triton_swiglu"), r["plan"]
        assert r["plan"]["rotary"].startswith("triton_qk_rotary"), r["plan"]
        assert r["plan"]["kv_write"].startswith("triton_kv_write"), r["plan"]
    assert res["tiny-qwen3"]["fused"] is True
    assert res["tiny-qwen3"]["plan"]["qk_norm"] == res["tiny-qwen3"]["plan"]["rotary"]


def _decode_with_fusions_pinned(force: dict, tmp_path, models=("tiny-llama", "tiny-qwen3")) -> dict:
    """Tiny Llama and Qwen3 decoded with ``force`` (interpreted Triton), against HF's greedy tokens;
    then compiled again to load the same choices from the decision cache."""
    code = textwrap.dedent(f"""
        import json, torch
        torch.set_num_threads(1)
        from hercules.compile import compile_model, build_model
        res = {{}}
        for name in {tuple(models)!r}:
            m = build_model(name, seed=1)
            ids = torch.randint(0, 512, (2, 6), generator=torch.Generator().manual_seed(0))
            ref = m.generate(ids, max_new_tokens=10, do_sample=False)
            kw = dict(languages=("torch", "triton"), budget=0, force={force!r}, max_seq_len=32, step_check=False,
                      batch_size=2, cache_dir=r"{tmp_path}")
            dec = compile_model(m, **kw)
            out = dec.generate(ids, 10)
            res[name] = dict(match=bool(torch.equal(out, ref)), plan=dec.plan.implementations(),
                             fuses={{k: d.fuses for k, d in dec.plan.decisions.items() if d.fuses}},
                             fused_into={{k: d.fused_into for k, d in dec.plan.decisions.items() if d.fused_into}},
                             impls=sorted(k for k in dec.runtime.impls if "+" in k),
                             fused=dec.runtime.fused_qk_rotary)
            again = compile_model(m, **kw)
            res[name]["cached"] = dict(hit=again.plan.cache_hit, match=bool(torch.equal(again.generate(ids, 10), ref)),
                                       impls=sorted(k for k in again.runtime.impls if "+" in k))
        print(json.dumps(res))
    """)
    p = _run([], code=code, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_decode_with_the_norm_folded_into_the_projections_matches_hf_eager(tmp_path):
    """triton_norm_gemv pinned on QKV and gate/up: the residual add + RMSNorm runs inside the
    projection kernels, the plan says so, HF's greedy tokens are reproduced, the cache reloads it."""
    res = _decode_with_fusions_pinned({"qkv_proj": "triton_norm_gemv", "gate_up_silu_mul": "triton_norm_gemv"},
                                      tmp_path)
    for name, r in res.items():
        assert r["match"], (name, r)
        assert r["fuses"]["qkv_proj"] == r["fuses"]["gate_up_silu_mul"] == ["residual_rmsnorm"], r
        assert r["plan"]["qkv_proj"].startswith("triton_norm_gemv"), r["plan"]
        assert r["fused_into"]["residual_rmsnorm"] == "qkv_proj, gate_up_silu_mul"
        assert r["impls"] == ["residual_rmsnorm+gate_up_silu_mul", "residual_rmsnorm+qkv_proj"], r
        assert r["cached"] == {"hit": True, "match": True, "impls": r["impls"]}, r["cached"]


def test_decode_with_the_kv_write_folded_into_rotary_matches_hf_eager(tmp_path):
    """triton_qk_rotary_kv pinned: the rotated k and the v go straight into the caches from the
    rotary kernel (with the q/k norm folded in too on Qwen3), HF's tokens are reproduced, the
    cache reloads it."""
    res = _decode_with_fusions_pinned({"rotary": "triton_qk_rotary_kv"}, tmp_path)
    for name, r in res.items():
        assert r["match"], (name, r)
        assert r["plan"]["rotary"].startswith("triton_qk_rotary_kv"), r["plan"]
        assert "kv_write" in r["fuses"]["rotary"] and r["fused_into"]["kv_write"] == "rotary", r
        assert r["plan"]["kv_write"] == r["plan"]["rotary"], r["plan"]
        assert r["impls"] == ["rotary+kv_write"], r
        assert r["cached"] == {"hit": True, "match": True, "impls": r["impls"]}, r["cached"]


def test_decode_with_rotary_kv_write_and_attention_in_one_kernel_matches_hf_eager(tmp_path):
    """triton_rotary_flash_decode pinned: rotary, the cache write and attention run as one kernel
    (the q/k norm too on Qwen3 when the pinned point has it); HF's greedy tokens are reproduced and
    the cache reloads it."""
    res = _decode_with_fusions_pinned({"rotary": "triton_rotary_flash_decode"}, tmp_path)
    for name, r in res.items():
        assert r["match"], (name, r)
        assert r["plan"]["rotary"].startswith("triton_rotary_flash_decode"), r["plan"]
        assert {"kv_write", "decode_attention"} <= set(r["fuses"]["rotary"]), r
        assert r["fused_into"]["kv_write"] == r["fused_into"]["decode_attention"] == "rotary", r
        # every folded region names the one kernel that runs its work
        assert r["plan"]["kv_write"] == r["plan"]["decode_attention"] == r["plan"]["rotary"], r["plan"]
        assert r["impls"] == ["rotary+kv_write+attention"], r
        assert r["cached"] == {"hit": True, "match": True, "impls": r["impls"]}, r["cached"]


def _gemv_id(split_reduce: str, split_k: int, block_k: int = 64) -> str:
    """A triton_gemv candidate id (dot mode: the tests decode two rows)."""
    return (f"triton_gemv[BLOCK_K={block_k},BLOCK_N=16,MODE=dot,PDL=0,SPLIT_K={split_k},"
            f"SPLIT_REDUCE={split_reduce},num_warps=4]")


def test_decode_with_argmax_and_one_launch_split_k_pinned_matches_hf_eager(tmp_path):
    """triton_argmax on token selection and the one-launch split-K GEMV (the last split reduces)
    on o_proj, down_proj and gate/up: HF's greedy tokens are reproduced and the cached plan
    reloads the same candidates (their ticket counters made anew)."""
    # the one-launch point by its id: a template name alone pins the advisor's first point
    argmax = "triton_argmax[BLOCK=1024,CHUNK=1024,ONE_LAUNCH=1,PDL=0,num_warps=4]"
    force = {"token_select": argmax, "o_proj": _gemv_id("last", 2), "down_proj": _gemv_id("last", 4),
             "gate_up_silu_mul": _gemv_id("last", 2)}
    # one model: the kernels are the same for both, and interpreted split-K on three regions of
    # both models took 116 s of the CI run
    res = _decode_with_fusions_pinned(force, tmp_path, models=("tiny-qwen3",))
    assert set(res) == {"tiny-qwen3"}
    for name, r in res.items():
        assert r["match"], (name, r)
        for kind in ("token_select", "o_proj", "down_proj", "gate_up_silu_mul"):
            assert r["plan"][kind] == force[kind], (kind, r["plan"])
        assert r["cached"]["hit"] and r["cached"]["match"], r["cached"]
