"""Run a suite candidate against its problem's reference on the CPU (or any device), seeded the
way the harness seeds, and report how far apart they are.

This is the suite's own consistency check, used by its tests; it is not the evaluation core (no
anti-hacking checks, no timing). Triton candidates need ``TRITON_INTERPRET=1`` in the environment
on a machine without a GPU, set before triton is imported, so run this as a fresh process:

    TRITON_INTERPRET=1 python -m hercules.suite.selfcheck PROBLEM CANDIDATE_FILE [--device cpu]

It prints one JSON object per line. With ``--compile-triton`` (and *without* TRITON_INTERPRET) it
instead runs the candidate's forward on fake CUDA tensors (``FakeTensorMode``, no GPU needed),
captures each Triton launch and compiles that kernel for sm_90 to PTX and cubin with Triton's own
compiler, so the GPU code path (not the interpreter's) is at least known to compile.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from hercules.suite.catalog import suite_dir

DEFAULT_TOLERANCE = {
    "float32": {"atol": 1e-3, "rtol": 1e-3, "rel_tol": 1e-3},
    "bfloat16": {"atol": 2e-2, "rtol": 2e-2, "rel_tol": 2e-2},
}


def load_module(path: Path, name: str | None = None) -> ModuleType:
    path = Path(path)
    name = name or f"hercules_suite_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton resolves a kernel's globals through its module
    spec.loader.exec_module(module)
    return module


def tolerance(meta: dict[str, Any]) -> dict[str, float]:
    tol = dict(DEFAULT_TOLERANCE[meta.get("dtype", "float32")])
    tol.update({k: float(meta[k]) for k in ("atol", "rtol", "rel_tol") if k in meta})
    return tol


def cast_inputs(inputs: list[Any], dtype: torch.dtype, device: str) -> list[Any]:
    return [
        x.to(device=device, dtype=dtype) if isinstance(x, torch.Tensor) and x.is_floating_point()
        else (x.to(device) if isinstance(x, torch.Tensor) else x)
        for x in inputs
    ]


def build(cls: type, init_inputs: list[Any], seed: int, dtype: torch.dtype, device: str) -> torch.nn.Module:
    torch.manual_seed(seed)
    return cls(*init_inputs).to(device=device, dtype=dtype).eval()


def compare(out: torch.Tensor, ref: torch.Tensor, tol: dict[str, float]) -> dict[str, Any]:
    out64, ref64 = out.detach().double().cpu(), ref.detach().double().cpu()
    diff = (out64 - ref64).abs()
    excess = diff - (tol["atol"] + tol["rtol"] * ref64.abs())
    rel = (diff.norm() / ref64.norm().clamp_min(1e-30)).item()
    return {
        "max_abs": diff.max().item(),
        "rel_norm": rel,
        "n_outside": int((excess > 0).sum().item()),
        "finite": bool(torch.isfinite(out64).all().item()),
        "ok": bool(torch.isfinite(out64).all().item() and (excess <= 0).all().item() and rel <= tol["rel_tol"]),
    }


def check_candidate(problem_path: Path, candidate_path: Path, seed: int = 0, device: str = "cpu") -> dict[str, Any]:
    """Run Model and ModelNew on one input set; compare to Model in the problem dtype and in float64."""
    problem = load_module(problem_path, f"hercules_suite_problem_{Path(problem_path).stem}")
    candidate = load_module(candidate_path)
    meta = problem.HERCULES
    dtype = getattr(torch, meta.get("dtype", "float32"))
    tol = tolerance(meta)
    torch.manual_seed(seed + 1)
    inputs = problem.get_inputs()
    init = problem.get_init_inputs()
    with torch.no_grad():
        ref = build(problem.Model, init, seed, dtype, device)(*cast_inputs(inputs, dtype, device))
        ref64 = build(problem.Model, init, seed, torch.float64, device)(
            *cast_inputs(cast_inputs(inputs, dtype, "cpu"), torch.float64, device)
        )
        new = build(candidate.ModelNew, init, seed, dtype, device)
        out = new(*cast_inputs(inputs, dtype, device))
    result: dict[str, Any] = {
        "problem": Path(problem_path).stem,
        "candidate": Path(candidate_path).stem,
        "shape_ok": tuple(out.shape) == tuple(ref.shape),
        "dtype_ok": out.dtype == ref.dtype,
        "plain_tensor": type(out) is torch.Tensor,
        "vs_reference": compare(out, ref, tol) if out.shape == ref.shape else None,
        "vs_float64": compare(out, ref64, tol) if out.shape == ref64.shape else None,
        "reference_vs_float64": compare(ref, ref64, tol),
    }
    result["ok"] = bool(
        result["shape_ok"] and result["dtype_ok"] and result["plain_tensor"]
        and result["vs_reference"]["ok"] and result["vs_float64"]["ok"]
    )
    return result


_TRITON_TYPES = {
    torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16", torch.float64: "fp64",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
    torch.uint8: "u8", torch.bool: "i1",
}


def _triton_signature(fn: Any, args: tuple, kwargs: dict) -> tuple[dict[str, str], dict[str, Any]]:
    import inspect

    params = {p.name: p for p in fn.params}
    bound = inspect.signature(fn.fn).bind(*args, **kwargs)
    bound.apply_defaults()
    signature: dict[str, str] = {}
    constexprs: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        if params[name].is_constexpr:
            signature[name] = "constexpr"
            constexprs[name] = value
        elif isinstance(value, torch.Tensor):
            signature[name] = "*" + _TRITON_TYPES[value.dtype]
        elif isinstance(value, bool):
            signature[name] = "i1"
        elif isinstance(value, int):
            signature[name] = "i32" if -(2**31) <= value < 2**31 else "i64"
        elif isinstance(value, float):
            signature[name] = "fp32"
        else:
            raise TypeError(f"{fn.__name__}: cannot type argument {name}={value!r}")
    return signature, constexprs


def compile_triton_candidate(problem_path: Path, candidate_path: Path, arch: int = 90) -> list[dict[str, Any]]:
    """Compile, for a CUDA GPU of compute capability ``arch``, every Triton kernel that the
    candidate launches on CUDA inputs, without a GPU: the forward runs on fake CUDA tensors and the
    launches are intercepted (nothing is executed)."""
    import os

    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        raise RuntimeError("compile_triton_candidate needs the real Triton JIT: unset TRITON_INTERPRET")
    import triton
    from torch._subclasses.fake_tensor import FakeTensorMode
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    problem = load_module(problem_path, f"hercules_suite_problem_{Path(problem_path).stem}")
    candidate = load_module(candidate_path)
    dtype = getattr(torch, problem.HERCULES.get("dtype", "float32"))
    compiled: list[dict[str, Any]] = []

    def fake_run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        options = {k: kwargs.pop(k) for k in ("num_warps", "num_stages", "num_ctas") if k in kwargs}
        signature, constexprs = _triton_signature(self, args, kwargs)
        kernel = triton.compile(
            ASTSource(fn=self, signature=signature, constexprs=constexprs),
            target=GPUTarget("cuda", arch, 32),
            options=options,
        )
        compiled.append({
            "kernel": self.__name__, "options": options,
            "ptx_bytes": len(kernel.asm["ptx"]), "cubin_bytes": len(kernel.asm["cubin"]),
            "shared_bytes": kernel.metadata.shared,
            "mma": "wgmma" if "wgmma" in kernel.asm["ptx"] else ("mma.sync" if "mma.sync" in kernel.asm["ptx"] else None),
        })
        return None

    saved = JITFunction.run
    JITFunction.run = fake_run  # only in this checking process, never in a candidate
    try:
        torch.manual_seed(0)
        model = candidate.ModelNew(*problem.get_init_inputs())
        real_inputs = problem.get_inputs()

        def fake_cuda(t: torch.Tensor) -> torch.Tensor:
            # Values do not matter (nothing runs); shape, strides and dtype do. A CPU-only torch
            # cannot move a tensor to CUDA, but FakeTensorMode can make an empty one there.
            return torch.empty_strided(t.shape, t.stride(), device="cuda",
                                       dtype=dtype if t.is_floating_point() else t.dtype)

        with FakeTensorMode(), torch.no_grad():
            model._apply(fake_cuda)
            inputs = [fake_cuda(x) if isinstance(x, torch.Tensor) else x for x in real_inputs]
            model(*inputs)
    finally:
        JITFunction.run = saved
    if not compiled:
        raise RuntimeError(f"{candidate_path}: no Triton kernel was launched on CUDA inputs")
    return compiled


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", help="problem name (or path)")
    parser.add_argument("candidates", nargs="+", help="candidate file paths or names")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile-triton", action="store_true",
                        help="compile the candidates' Triton kernels for sm_90 instead of running them")
    args = parser.parse_args(argv)
    problem_path = Path(args.problem)
    if not problem_path.exists():
        problem_path = suite_dir() / "problems" / f"{args.problem}.py"
    failed = 0
    for cand in args.candidates:
        cand_path = Path(cand)
        if not cand_path.exists():
            cand_path = suite_dir() / "candidates" / problem_path.stem / f"{cand}.py"
        if args.compile_triton:
            try:
                kernels = compile_triton_candidate(problem_path, cand_path)
                res = {"problem": problem_path.stem, "candidate": cand_path.stem, "ok": True, "kernels": kernels}
            except Exception as exc:  # reported as data: this is a checking tool, not a candidate
                res = {"problem": problem_path.stem, "candidate": cand_path.stem, "ok": False,
                       "error": f"{type(exc).__name__}: {exc}"[-4000:]}
        else:
            res = check_candidate(problem_path, cand_path, seed=args.seed, device=args.device)
        failed += not res["ok"]
        print(json.dumps(res), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
