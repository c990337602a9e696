"""Run a suite candidate against its problem's reference on the CPU (or any device), seeded the
way the harness seeds, and report how far apart they are.

This is the suite's own consistency check, used by its tests; it is not the evaluation core (no
anti-hacking checks, no timing). Triton candidates need ``TRITON_INTERPRET=1`` in the environment
on a machine without a GPU, set before triton is imported, so run this as a fresh process:

    TRITON_INTERPRET=1 python -m hercules.suite.selfcheck PROBLEM CANDIDATE_FILE [--device cpu]

It prints one JSON object per line. With ``--compile-triton`` (and *without* TRITON_INTERPRET) it
instead runs the candidate's forward so that it takes its CUDA branch (CPU tensors that report
``is_cuda``; no GPU needed), captures each Triton launch, specialises it as Triton's JIT would
(constexprs, 16-byte divisibility) and compiles it for sm_90 to PTX and cubin, so the GPU code
path, not the interpreter's, is at least known to compile, pipeline and use tensor cores.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import sys
from dataclasses import dataclass
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


@dataclass(frozen=True)
class _Reference:
    """A problem's inputs and reference outputs for one seed and device: the problem's dtype and float64."""

    inputs: list[Any]
    init: list[Any]
    dtype: torch.dtype
    tol: dict[str, float]
    ref: torch.Tensor
    ref64: torch.Tensor


@functools.lru_cache(maxsize=4)
def _reference(problem_path: Path, seed: int, device: str) -> _Reference:
    """Computed once a process for all of a problem's candidates: on a CPU without bfloat16 units
    the bf16 reference of matmul_bf16 alone takes 21 s (2048x1024x2048; float32: 0.08 s)."""
    problem = load_module(problem_path, f"hercules_suite_problem_{Path(problem_path).stem}")
    meta = problem.HERCULES
    dtype = getattr(torch, meta.get("dtype", "float32"))
    torch.manual_seed(seed + 1)
    inputs = problem.get_inputs()
    init = problem.get_init_inputs()
    with torch.no_grad():
        ref = build(problem.Model, init, seed, dtype, device)(*cast_inputs(inputs, dtype, device))
        ref64 = build(problem.Model, init, seed, torch.float64, device)(
            *cast_inputs(cast_inputs(inputs, dtype, "cpu"), torch.float64, device)
        )
    return _Reference(inputs, init, dtype, tolerance(meta), ref, ref64)


def reference_summary(ref: torch.Tensor) -> dict[str, Any]:
    """What the suite's tests ask of a problem's reference output: its type and dtype, whether it
    is finite, its mean magnitude (to set beside the tolerance)."""
    plain = type(ref) is torch.Tensor
    values = ref.detach().float() if plain else None
    return {"tensor": plain, "dtype": str(ref.dtype).replace("torch.", "") if plain else None,
            "finite": bool(torch.isfinite(values).all().item()) if plain else None,
            "mean_abs": values.abs().mean().item() if plain else None}


def check_candidate(problem_path: Path, candidate_path: Path, seed: int = 0, device: str = "cpu") -> dict[str, Any]:
    """Run Model and ModelNew on one input set; compare to Model in the problem dtype and in float64."""
    reference = _reference(Path(problem_path), seed, device)
    candidate = load_module(candidate_path)
    dtype, tol, ref, ref64 = reference.dtype, reference.tol, reference.ref, reference.ref64
    with torch.no_grad():
        new = build(candidate.ModelNew, reference.init, seed, dtype, device)
        # Copies: the inputs serve every candidate of the problem, and one may write into its own.
        out = new(*cast_inputs([x.clone() if isinstance(x, torch.Tensor) else x for x in reference.inputs],
                               dtype, device))
    result: dict[str, Any] = {
        "problem": Path(problem_path).stem,
        "candidate": Path(candidate_path).stem,
        "shape_ok": tuple(out.shape) == tuple(ref.shape),
        "dtype_ok": out.dtype == ref.dtype,
        "plain_tensor": type(out) is torch.Tensor,
        "vs_reference": compare(out, ref, tol) if out.shape == ref.shape else None,
        "vs_float64": compare(out, ref64, tol) if out.shape == ref64.shape else None,
        "reference_vs_float64": compare(ref, ref64, tol),
        "reference": reference_summary(ref),
    }
    result["ok"] = bool(
        result["shape_ok"] and result["dtype_ok"] and result["plain_tensor"]
        and result["vs_reference"]["ok"] and result["vs_float64"]["ok"]
    )
    return result


class _DevicePointer:
    """Stands for a CUDA tensor when Triton specialises a launch: its dtype and an address with
    the alignment a CUDA allocation has (plus the view's offset), which is all Triton reads."""

    def __init__(self, tensor: torch.Tensor):
        self.dtype = tensor.dtype
        self._address = (1 << 20) + tensor.storage_offset() * tensor.element_size()

    def data_ptr(self) -> int:
        return self._address


def compile_triton_candidate(problem_path: Path, candidate_path: Path, arch: int = 90) -> list[dict[str, Any]]:
    """Compile, for a CUDA GPU of compute capability ``arch``, every Triton kernel that the
    candidate launches on CUDA inputs, without a GPU: the forward takes its CUDA branch on CPU
    tensors, and each launch is bound, specialised and compiled as Triton's JIT would (not run)."""
    import os

    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        raise RuntimeError("compile_triton_candidate needs the real Triton JIT: unset TRITON_INTERPRET")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import JITFunction, create_function_from_signature

    problem = load_module(problem_path, f"hercules_suite_problem_{Path(problem_path).stem}")
    candidate = load_module(candidate_path)
    dtype = getattr(torch, problem.HERCULES.get("dtype", "float32"))
    compiled: list[dict[str, Any]] = []

    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)

    def fake_run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        # What JITFunction.run does before it needs a device: bind and specialise the arguments
        # (constexprs, values equal to 1, 16-byte divisibility), then compile for the target.
        args = tuple(_DevicePointer(a) if isinstance(a, torch.Tensor) else a for a in args)
        kwargs = {k: _DevicePointer(v) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        binder = create_function_from_signature(self.signature, self.params, backend)
        bound, specialization, options = binder(*args, **kwargs)
        options, signature, constexprs, attrs = self._pack_args(backend, kwargs, bound, specialization, options)
        kernel = triton.compile(ASTSource(self, signature, constexprs, attrs), target=target, options=options.__dict__)
        ttgir, ptx = kernel.asm["ttgir"], kernel.asm["ptx"]
        compiled.append({
            "kernel": self.__name__,
            "options": {k: getattr(options, k) for k in ("num_warps", "num_stages")},
            "ptx_bytes": len(ptx), "cubin_bytes": len(kernel.asm["cubin"]),
            "shared_bytes": kernel.metadata.shared,
            "mma": "wgmma" if "wgmma" in ptx else ("mma.sync" if "mma.sync" in ptx else None),
            "async_copies": ttgir.count("async_copy_global_to_local") + ttgir.count("async_tma_copy"),
        })
        return None

    saved = JITFunction.run
    JITFunction.run = fake_run  # only in this checking process, never in a candidate
    try:
        # The forward runs for real on CPU tensors that claim to be CUDA tensors (is_cuda is
        # patched in this checking process only), so the candidate takes its GPU branch: torch ops
        # run on the CPU, Triton launches are compiled for the GPU and not run (their outputs stay
        # uninitialised, which is fine: only shapes, strides, dtypes and alignment matter here).
        torch.manual_seed(0)
        model = candidate.ModelNew(*problem.get_init_inputs()).to(dtype).eval()
        inputs = cast_inputs(problem.get_inputs(), dtype, "cpu")
        torch.Tensor.is_cuda = property(lambda self: True)  # type: ignore[method-assign,assignment]
        with torch.no_grad():
            model(*inputs)
    finally:
        JITFunction.run = saved
        if "is_cuda" in torch.Tensor.__dict__:
            del torch.Tensor.is_cuda  # back to torch's own property
    if not compiled:
        raise RuntimeError(f"{candidate_path}: no Triton kernel was launched on CUDA inputs")
    return compiled


def _check_one(problem_path: Path, cand_path: Path, compile_triton: bool, seed: int, device: str) -> dict[str, Any]:
    if compile_triton:
        try:
            kernels = compile_triton_candidate(problem_path, cand_path)
            return {"problem": problem_path.stem, "candidate": cand_path.stem, "ok": True, "kernels": kernels}
        except Exception as exc:  # reported as data: this is a checking tool, not a candidate
            return {"problem": problem_path.stem, "candidate": cand_path.stem, "ok": False,
                    "error": f"{type(exc).__name__}: {exc}"[-4000:]}
    try:
        return check_candidate(problem_path, cand_path, seed=seed, device=device)
    except Exception:
        import traceback

        return {"problem": problem_path.stem, "candidate": cand_path.stem, "ok": False,
                "error": traceback.format_exc()[-4000:]}


def _resolve(problem: str, candidate: str) -> tuple[Path, Path]:
    problem_path = Path(problem)
    if not problem_path.exists():
        problem_path = suite_dir() / "problems" / f"{problem}.py"
    cand_path = Path(candidate)
    if not cand_path.exists():
        cand_path = suite_dir() / "candidates" / problem_path.stem / f"{candidate}.py"
    return problem_path, cand_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", nargs="?", help="problem name (or path)")
    parser.add_argument("candidates", nargs="*", help="candidate file paths or names")
    parser.add_argument("--pair", nargs=2, action="append", default=[], metavar=("PROBLEM", "CANDIDATE"),
                        help="check this (problem, candidate) pair too; repeatable")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile-triton", action="store_true",
                        help="compile the candidates' Triton kernels for sm_90 instead of running them")
    args = parser.parse_args(argv)
    pairs = [(args.problem, c) for c in args.candidates] if args.problem else []
    pairs += [tuple(p) for p in args.pair]
    if not pairs:
        parser.error("nothing to check: give PROBLEM CANDIDATE... or --pair PROBLEM CANDIDATE")
    failed = 0
    for problem, cand in pairs:
        problem_path, cand_path = _resolve(problem, cand)
        res = _check_one(problem_path, cand_path, args.compile_triton, args.seed, args.device)
        failed += not res["ok"]
        print(json.dumps(res), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
