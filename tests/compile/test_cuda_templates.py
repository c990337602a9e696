"""CUDA C++ templates without a GPU: the rendered sources compile with nvcc (when present), and
the selection / build-grouping / decision-cache path for CUDA candidates runs end to end with the
compiled module replaced by a stand-in that calls the PyTorch references."""

from __future__ import annotations

import shutil

import pytest
import torch

from compile_helpers import H200, cuda_template_bodies, cuda_template_points

from hercules.compile import reference as ref
from hercules.compile.advisor import RuleAdvisor
from hercules.compile.constraints import check
from hercules.compile.regions import ModelSpec, derive_regions
from hercules.compile.selection import DecisionCache, load_cached, select
from hercules.compile.templates import cuda_build
from hercules.compile.templates.cuda_templates import CUDA_TEMPLATES
from hercules.compile.validate import RegionWeights


def spec(dtype="bfloat16"):
    return ModelSpec("qwen3", 256, 384, 2, 4, 2, 64, 300, 1e-6, True, dtype, True)


@pytest.mark.slow
@pytest.mark.ondemand  # the shared sm_90 unit: ~100-160 s of nvcc on the CI machine (scripts/slow-tests)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_rendered_cuda_sources_compile_with_nvcc(sm90_build):
    """One translation unit with feasible points of every CUDA template at Qwen3-1.7B shapes (bf16,
    batch 1) and a tiny fp32 shape (batch 3), every region a template applies to: catches C++/CUDA
    errors without a GPU (no run). The unit is shared with the split-K/PDL GEMV test (one nvcc run
    for both: the headers alone take ~30 s)."""
    points = cuda_template_points()
    for t, r, pts in points:
        assert r is not None, t.name  # every template applies to some region
        assert pts, (t.name, r.kind)
    assert {t.name for t, _, _ in points} == {t.name for t in CUDA_TEMPLATES}
    ok, log, compiled = sm90_build
    assert set(cuda_template_bodies()) <= compiled
    assert ok, log[-4000:]



# The prelude's device helpers and a kernel using them, without torch's headers: the CI's nvcc
# check (4.4 s on the 2-core machine; with ATen's headers any unit costs ~30 s before its first
# kernel, and the templates' full unit above ~100-160 s, on demand).
_PRELUDE_KERNEL = r"""
template <int THREADS>
__global__ void row_sum(const float* __restrict__ x, float* __restrict__ out, int n) {
  using V = hercules_k::Vec<float, 4>;
  float acc = 0.f;
  for (int i = threadIdx.x; i < n / 4; i += THREADS) {
    const V v = reinterpret_cast<const V*>(x + blockIdx.x * n)[i];
    acc += v.v[0] + v.v[1] + v.v[2] + v.v[3];
  }
  acc = hercules_k::block_sum<THREADS>(acc);
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}
template __global__ void row_sum<256>(const float*, float*, int);
template __global__ void row_sum<32>(const float*, float*, int);
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_the_preludes_device_helpers_compile_for_sm90_with_nvcc(tmp_path):
    import subprocess

    prelude = cuda_build.PRELUDE
    helpers = prelude[prelude.index("namespace hercules_k"):]  # what follows torch's includes
    src = tmp_path / "prelude.cu"
    src.write_text("#include <cuda_runtime.h>\n#include <cstdint>\n" + helpers + _PRELUDE_KERNEL)
    # The flags of cuda_build.syntax_check (its torch include paths aside).
    p = subprocess.run(["nvcc", "-c", str(src), "-o", str(tmp_path / "prelude.o"), "-std=c++20", "-arch=sm_90", "-O1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    assert (tmp_path / "prelude.o").stat().st_size > 0

class FakeModule:
    """Stands in for a load_inline module: each rendered entry point calls the PyTorch reference."""

    def __getattr__(self, name):
        if name.startswith("add_rmsnorm_"):
            return lambda x, r, w, eps: list(ref.residual_rmsnorm(x, r, w, eps))
        if name.startswith("silu_mul_"):
            return ref.silu_mul
        if name.startswith("qk_rotary_"):
            def rot(q, k, cs, sn, qw, kw, eps):
                has_norm = qw is not cs
                return list(ref.rotary(q, k, cs, sn, qw if has_norm else None, kw if has_norm else None, eps))
            return rot
        if name.startswith("attention_"):
            return ref.decode_attention
        if name.startswith("norm_gemv_swiglu_"):
            return lambda x, r, nw, eps, w: list(ref.norm_then(ref.gate_up_silu_mul_fused)(x, r, nw, eps, w,
                                                                                              w.shape[0] // 2))
        if name.startswith("norm_gemv_"):
            return lambda x, r, nw, eps, w: list(ref.norm_then(ref.linear)(x, r, nw, eps, w))
        if name.startswith("gemv_add_rmsnorm_"):
            def gemv_add_rmsnorm(x, w, r, nw, eps, ticket):
                assert ticket.dtype == torch.int32 and int(ticket[0]) == 0  # zero between calls
                return list(ref.then_norm(ref.linear)(x, w, r, nw, eps))
            return gemv_add_rmsnorm
        if name.startswith("gemv_swiglu_"):
            return lambda x, w: ref.silu_mul(torch.nn.functional.linear(x, w))
        if name.startswith("gemv_"):
            return torch.nn.functional.linear
        raise AttributeError(name)


@pytest.fixture()
def fake_nvcc(monkeypatch):
    calls = []

    def fake_build(prefix, body, decls, functions, verbose=False):
        calls.append((prefix, body, tuple(functions)))
        for f in functions:  # every entry point is declared and defined in the body
            assert f in decls and f in body
        return FakeModule(), 0.5

    monkeypatch.setattr(cuda_build, "build", fake_build)
    return calls


def test_cuda_candidates_selected_grouped_and_cached(fake_nvcc, tmp_path):
    s = spec()
    regions = derive_regions(s, batch=1, capacity=64)
    weights = RegionWeights(None, s, device="cpu", seed=0)
    res = select(regions, weights, device=torch.device("cpu"), device_info=H200, advisor=RuleAdvisor(),
                 budget=24, languages=("torch", "cuda"), force={"decode_attention": "cuda_flash_decode",
                                                                "rotary": "cuda_qk_rotary",
                                                                "residual_rmsnorm": "cuda_add_rmsnorm",
                                                                "final_norm": "cuda_add_rmsnorm",
                                                                "gate_up_silu_mul": "cuda_swiglu"})
    plan = res.plan
    # one module per CUDA template, shared across regions (residual_rmsnorm + final_norm)
    prefixes = [c[0] for c in fake_nvcc]
    assert sorted(prefixes) == sorted(set(prefixes))
    assert {"add_rmsnorm", "silu_mul", "qk_rotary", "attention"} <= set(prefixes) <= {
        "add_rmsnorm", "silu_mul", "qk_rotary", "attention", "gemv", "gemv_swiglu", "norm_gemv", "norm_gemv_swiglu",
        "gemv_add_rmsnorm"}
    tried = {t.template for d in plan.decisions.values() for t in d.tried}
    assert {"cuda_add_rmsnorm", "cuda_swiglu", "cuda_qk_rotary", "cuda_flash_decode"} <= tried
    for n in ("decode_attention", "residual_rmsnorm", "final_norm", "gate_up_silu_mul", "rotary"):
        d = plan.decisions[n]
        assert d.lang == "cuda", (n, d.why)
        assert d.build_group and [n, d.params] in d.build_group
    assert res.fused_qk_rotary and plan.decisions["qk_norm"].fused_into == "rotary"
    # every CUDA trial passed the reference check through the stand-in
    assert all(t.status == "ok" for d in plan.decisions.values() for t in d.tried if t.lang == "cuda")

    # the decision cache rebuilds the exact same module sources (=> torch extension-cache hits)
    DecisionCache(tmp_path).put("k", plan)
    bodies_before = {c[1] for c in fake_nvcc}
    fake_nvcc.clear()
    again = load_cached(DecisionCache(tmp_path).get("k"), regions, weights)
    assert again is not None and again.plan.cache_hit and again.fused_qk_rotary
    assert {c[1] for c in fake_nvcc} <= bodies_before
    assert set(again.impls) >= {"decode_attention", "rotary", "residual_rmsnorm", "final_norm", "gate_up_silu_mul"}


def test_cuda_build_failure_is_data(monkeypatch):
    def broken(prefix, body, decls, functions, verbose=False):
        raise RuntimeError("nvcc: error: something")

    monkeypatch.setattr(cuda_build, "build", broken)
    s = spec()
    regions = derive_regions(s, batch=1, capacity=64)
    res = select(regions, RegionWeights(None, s), device=torch.device("cpu"), device_info=H200,
                 advisor=RuleAdvisor(), budget=8, languages=("torch", "cuda"),
                 force={"decode_attention": "cuda_flash_decode"})
    d = res.plan.decisions["decode_attention"]
    assert d.implementation.startswith("torch")
    bad = [t for t in d.tried if t.lang == "cuda"]
    assert bad and bad[0].status == "build_error" and "nvcc: error" in bad[0].reason


def test_gemv_templates_plug_into_the_linear_regions(fake_nvcc):
    """cuda_gemv on the projections and cuda_gemv_swiglu on gate/up, through the stand-in module:
    the wrappers keep each region's interface (q/k/v views, the SwiGLU output)."""
    s = spec()
    regions = derive_regions(s, batch=2, capacity=64)
    weights = RegionWeights(None, s, device="cpu", seed=0)
    force = {"qkv_proj": "cuda_gemv", "o_proj": "cuda_gemv", "down_proj": "cuda_gemv", "lm_head": "cuda_gemv",
             "gate_up_silu_mul": "cuda_gemv_swiglu"}
    res = select(regions, weights, device=torch.device("cpu"), device_info=H200, advisor=RuleAdvisor(),
                 budget=24, languages=("torch", "cuda"), force=force)
    for region, template in force.items():
        d = res.plan.decisions[region]
        assert d.template == template and d.lang == "cuda", (region, d.why)
        assert all(t.status == "ok" for t in d.tried if t.template == template)
    assert {c[0] for c in fake_nvcc} >= {"gemv", "gemv_swiglu"}
    gemv_body = next(c[1] for c in fake_nvcc if c[0] == "gemv_swiglu")
    assert "constexpr bool SWIGLU = true" in gemv_body


def test_gemv_space_respects_batch_and_alignment():
    from hercules.compile.templates.cuda_templates import CudaGemv

    t = CudaGemv()
    r = derive_regions(spec(), batch=16, capacity=64)["o_proj"]
    assert any("batch 16 exceeds" in x for x in check(t, t.space(r)[0], r, H200))
    odd = derive_regions(ModelSpec("qwen3", 260, 384, 2, 4, 2, 64, 300, 1e-6, True, "bfloat16", True), batch=1,
                         capacity=64)["down_proj"]  # in_features 384: fine; o_proj in_features 256: fine
    assert check(t, t.space(odd)[0], odd, H200) == []
    unaligned = derive_regions(ModelSpec("qwen3", 260, 388, 2, 4, 2, 64, 300, 1e-6, True, "bfloat16", True),
                               batch=1, capacity=64)["down_proj"]  # in_features 388 is not a multiple of 8
    assert any("in_features %" in x for x in check(t, t.space(unaligned)[0], unaligned, H200))


def _pinned_select(force):
    """Selection at batch 2 with only the pinned CUDA points measured: (result, regions, weights)."""
    s = spec()
    regions = derive_regions(s, batch=2, capacity=64)
    weights = RegionWeights(None, s, device="cpu", seed=0)
    res = select(regions, weights, device=torch.device("cpu"), device_info=H200, advisor=RuleAdvisor(),
                 budget=0, languages=("torch", "cuda"), force=force)
    return res, regions, weights


def test_norm_gemv_templates_fold_the_norm_into_the_projections(fake_nvcc):
    """cuda_norm_gemv(_swiglu) pinned, through the stand-in module: both projections carry the
    residual add + RMSNorm, the implementation table gets the folded entries and no plain ones."""
    force = {"qkv_proj": "cuda_norm_gemv", "gate_up_silu_mul": "cuda_norm_gemv_swiglu"}
    res = _pinned_select(force)[0]
    for region, template in force.items():
        d = res.plan.decisions[region]
        assert d.template == template and d.fuses == ["residual_rmsnorm"], (region, d.why)
        assert "folded in" in d.why
        assert ref.norm_fused_key(region) in res.impls and region not in res.impls
    # both of the norm's uses run inside the projections now: the plan says so, the table drops it
    assert res.plan.decisions["residual_rmsnorm"].fused_into == "qkv_proj, gate_up_silu_mul"
    assert "residual_rmsnorm" not in res.impls and "final_norm" in res.plan.decisions


def test_gemv_add_rmsnorm_folds_the_norm_into_the_epilogues_and_reloads(fake_nvcc, tmp_path):
    """cuda_gemv_add_rmsnorm pinned on o_proj and down_proj, through the stand-in module: both carry
    the residual add + RMSNorm after them, the table gets the epilogue entries and no plain ones,
    the final norm runs inside down_proj; the cached plan rebuilds the same module and entries."""
    force = {"o_proj": "cuda_gemv_add_rmsnorm", "down_proj": "cuda_gemv_add_rmsnorm"}
    res, regions, weights = _pinned_select(force)
    for region in force:
        d = res.plan.decisions[region]
        assert d.template == "cuda_gemv_add_rmsnorm" and d.fuses == ["residual_rmsnorm"], (region, d.why)
        assert "folded into the epilogue" in d.why and "(pinned)" in d.why
        assert ref.add_norm_fused_key(region) in res.impls and region not in res.impls
    assert res.plan.decisions["final_norm"].fused_into == "down_proj" and "final_norm" not in res.impls
    assert res.plan.decisions["residual_rmsnorm"].fused_into is None  # layer 0's input norm
    cache = DecisionCache(tmp_path)
    cache.put("k", res.plan)
    built = len(fake_nvcc)
    again = load_cached(cache.get("k"), regions, weights)
    assert again is not None and len(fake_nvcc) > built
    assert sorted(k for k in again.impls if "+" in k) == ["down_proj+residual_rmsnorm", "o_proj+residual_rmsnorm"]
