"""Helpers shared by the compiler tests (a plain module: conftest modules are not importable by
name when several test folders have one)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch


def prompt(batch: int, length: int, vocab: int = 512, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


def _load_scripted_server():
    name = "scripted_llm_server"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parent.parent / "llm" / "scripted_llm_server.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


_srv = _load_scripted_server()
ScriptedServer = _srv.ScriptedServer
Scripted = _srv.Scripted


# -- CUDA sources compiled for sm_90 with nvcc, without a GPU -----------------------------------
# Two tests check rendered CUDA sources this way. The torch/ATen headers alone take ~30 s of each
# nvcc run on the 2-core CI machine, so both sets go into one translation unit, built once per
# session (``sm90_build`` in conftest.py); each test checks that its own sources were in it.


def _stand_ins():
    from hercules.compile.constraints import DeviceInfo
    from hercules.compile.regions import ModelSpec

    h200 = DeviceInfo(type="cuda", name="NVIDIA H200 (stand-in)", sm=(9, 0), smem_per_block_optin=227 * 1024,
                      sm_count=132)
    llama_1b = ModelSpec("llama", 2048, 8192, 16, 32, 8, 64, 128256, 1e-5, True, "bfloat16", False)
    qwen3_1p7b = ModelSpec("qwen3", 2048, 6144, 28, 16, 8, 128, 151936, 1e-6, True, "bfloat16", True)
    tiny_fp32 = ModelSpec("qwen3", 256, 384, 2, 4, 2, 64, 300, 1e-6, True, "float32", True)
    return h200, llama_1b, qwen3_1p7b, tiny_fp32


H200, LLAMA_1B, QWEN3_1P7B, TINY_FP32 = _stand_ins()


def cuda_template_points():
    """(template, region, feasible points on the H200) for every CUDA template and every region it
    applies to, at Qwen3-1.7B shapes (bf16, batch 1) and a tiny fp32 shape (batch 3); a template
    that applies to no region is listed with region None."""
    from hercules.compile.constraints import check
    from hercules.compile.regions import derive_regions
    from hercules.compile.templates.cuda_templates import CUDA_TEMPLATES

    out = []
    for s, batch in ((QWEN3_1P7B, 1), (TINY_FP32, 3)):
        regs = derive_regions(s, batch=batch, capacity=256)
        for t in CUDA_TEMPLATES:
            applicable = [r for r in regs.values() if t.applies(r)]
            if not applicable:
                out.append((t, None, []))
            for r in applicable:
                out.append((t, r, [p for p in t.space(r) if not check(t, p, r, H200)]))
    return out


def cuda_template_bodies() -> list[str]:
    """The sources of the first and the last feasible point of each (template, region)."""
    return [t.render(p, r)[0] for t, r, pts in cuda_template_points() if pts for p in (pts[0], pts[-1])]


def gemv_split_pdl_points(batch_specs=((LLAMA_1B, 1), (TINY_FP32, 3))):
    """(template, region, point) for every feasible (KSPLIT, PDL) pair of every CUDA GEMV template."""
    from hercules.compile.constraints import check
    from hercules.compile.regions import derive_regions
    from hercules.compile.templates.cuda_templates import CUDA_TEMPLATES

    out = []
    for spec, batch in batch_specs:
        for r in derive_regions(spec, batch=batch).values():
            for t in (t for t in CUDA_TEMPLATES if "gemv" in t.name):
                if not t.applies(r):
                    continue
                feasible = [p for p in t.space(r) if not check(t, p, r, H200)]
                for pair in {(p["KSPLIT"], p["PDL"]) for p in feasible}:
                    out.append((t, r, next(p for p in feasible if (p["KSPLIT"], p["PDL"]) == pair)))
    return out


def gemv_split_pdl_bodies() -> list[str]:
    return [t.render(p, r)[0] for t, r, p in gemv_split_pdl_points()]
