"""The CUDA GEMV family's split-K-in-a-block (KSPLIT) and programmatic-dependent-launch (PDL)
points, without a GPU: they compile for sm_90 with nvcc, and the points without either keep the
source (and names) the templates rendered before these parameters existed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from compile_helpers import H200, gemv_split_pdl_bodies, gemv_split_pdl_points

from hercules.compile.constraints import check
from hercules.compile.regions import ModelSpec, derive_regions
from hercules.compile.templates import cuda_build
from hercules.compile.templates.cuda_templates import CUDA_TEMPLATES

GEMVS = [t for t in CUDA_TEMPLATES if "gemv" in t.name]


def test_plain_points_render_the_source_cached_plans_name():
    """KSPLIT 1 / PDL 0 renders exactly what a plan cached before these parameters renders from its
    params (no KSPLIT, no PDL): same source, same function name, so its module loads from cache."""
    for t, r, p in gemv_split_pdl_points():
        if p["KSPLIT"] == 1 and p["PDL"] == 0 and not getattr(t, "always_general", False):
            old = {k: v for k, v in p.items() if k not in ("KSPLIT", "PDL")}
            assert t.render(p, r) == t.render(old, r), (t.name, r.kind)
            assert "griddepcontrol" not in t.render(p, r)[0] and "KSPLIT" not in t.render(p, r)[0]
        else:
            src = t.render(p, r)[0]
            assert ("griddepcontrol.wait" in src) == bool(p["PDL"]), (t.name, p)
            assert f"constexpr int KSPLIT = {p['KSPLIT']};" in src, (t.name, p)


def test_split_k_points_need_whole_blocks_and_aligned_slices():
    spec = ModelSpec("llama", 2048, 8192, 16, 32, 8, 64, 128256, 1e-5, True, "bfloat16", False)
    r = derive_regions(spec, batch=1)["o_proj"]
    t = next(t for t in GEMVS if t.name == "cuda_gemv")
    ok = dict(WARPS=8, ROWS=2, UNROLL=2, KSPLIT=4, PDL=0)
    assert check(t, ok, r, H200) == []
    # K = 2040 is a multiple of the 8-element (16-byte) vector, not of 4 slices of vectors
    odd_k = derive_regions(ModelSpec("llama", 2040, 8192, 16, 30, 6, 68, 128256, 1e-5, True, "bfloat16", False),
                           batch=1)["o_proj"]
    rs = check(t, ok, odd_k, H200)
    assert any("in_features % (KSPLIT * vector width)" in x for x in rs), rs
    # 302 vocabulary rows do not fill blocks of 8 / 4 * 2 = 4 rows (a block's warps would not all
    # reach the reduction's barrier); without split-K the last block just stops early
    few = derive_regions(ModelSpec("llama", 256, 384, 2, 4, 2, 64, 302, 1e-6, False, "bfloat16", False),
                         batch=1)["lm_head"]
    rs = check(t, ok, few, H200)
    assert any("whole blocks" in x for x in rs), rs
    assert not any("whole blocks" in x for x in check(t, dict(ok, KSPLIT=1), few, H200))


@pytest.mark.slow
@pytest.mark.ondemand  # the shared sm_90 unit: ~100-160 s of nvcc on the CI machine (scripts/slow-tests)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_split_k_and_pdl_gemv_sources_compile_for_sm90(sm90_build):
    """Every (KSPLIT, PDL) pair of every CUDA GEMV template at Llama-3.2-1B shapes (bf16, batch 1)
    and a tiny fp32 shape (batch 3), every region it applies to, in one translation unit built for
    sm_90 (griddepcontrol needs it): catches C++/PTX errors without a GPU (no run). The unit is
    shared with test_rendered_cuda_sources_compile_with_nvcc (one nvcc run for both)."""
    pts = gemv_split_pdl_points()
    assert {(p["KSPLIT"], p["PDL"]) for _, _, p in pts} == {(k, d) for k in (1, 2, 4) for d in (0, 1)}
    assert {t.name for t, _, _ in pts} == {t.name for t in GEMVS}
    ok, log, compiled = sm90_build
    assert set(gemv_split_pdl_bodies()) <= compiled
    assert ok, log[-4000:]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_gemv_add_rmsnorm_device_code_compiles_for_sm90(tmp_path):
    """cuda_gemv_add_rmsnorm's kernels (the residual add + RMSNorm in o_proj's / down_proj's
    epilogue), every (KSPLIT, PDL) pair at Llama-3.2-1B's o_proj (bf16, batch 1) and one at a tiny
    fp32 down_proj (batch 3), compiled for sm_90 without ATen's headers (~5 s here; the whole
    sources, host code included, compile in the on-demand shared unit above). The source takes one
    ticket per row group and only the last normalises."""
    import torch

    pts = [(t, r, p) for t, r, p in gemv_split_pdl_points() if t.name == "cuda_gemv_add_rmsnorm"]
    chosen = [x for x in pts if x[1].kind == "o_proj" and x[1].dtype == "bfloat16"]
    chosen += [next(x for x in pts if x[1].kind == "down_proj" and x[1].dtype == "float32")]
    assert {(p["KSPLIT"], p["PDL"]) for _, _, p in chosen} == {(k, d) for k in (1, 2, 4) for d in (0, 1)}
    device_parts = []
    for t, r, p in chosen:
        src = t.render(p, r)[0]
        assert src.count("atomicAdd(ticket, 1)") == 1 and "if (ticket_no != (OUT + ROWS - 1) / ROWS - 1) return;" in src
        assert ("griddepcontrol.wait" in src) == bool(p["PDL"])
        # the kernel's namespace block (the launch helper's before it is host code over ATen's macros)
        start = src.rindex("namespace hercules_k {", 0, src.index("__global__"))
        device_parts.append(src[start:src.index("}  // namespace hercules_k", start) + 26])
    helpers = cuda_build.PRELUDE[cuda_build.PRELUDE.index("namespace hercules_k"):]
    unit = tmp_path / "gemv_add_rmsnorm.cu"
    unit.write_text("#include <c10/util/BFloat16.h>\n#include <cuda_runtime.h>\n#include <cstdint>\n" + helpers
                    + "\n".join(device_parts))
    inc = os.path.join(os.path.dirname(torch.__file__), "include")
    p = subprocess.run(["nvcc", "-c", str(unit), "-o", str(tmp_path / "k.o"), "-std=c++20", "-arch=sm_90", "-O1",
                        "-I", inc], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    assert len(re.findall(r"__global__ void", unit.read_text())) == len(chosen)
