"""The built-in suite: every problem is well formed and its reference runs on the CPU; every
PyTorch and Triton candidate matches the reference on the CPU (Triton through its interpreter);
every Triton candidate's GPU code path compiles for sm_90; every CUDA candidate is a well-formed
``load_inline`` call and (slow test) its CUDA source compiles with nvcc for sm_90.

Candidates run in subprocesses (``python -m hercules.suite.selfcheck``): Triton reads
TRITON_INTERPRET when its kernels are defined, so the interpreter and the real JIT cannot share a
process, and a process of our own keeps other test modules' imports of triton out of the way.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

import pytest
import side_by_side
import torch

from hercules.problems.model import validate_problem_code
from hercules.suite.catalog import (
    candidate_language,
    suite_candidate_paths,
    suite_dir,
    suite_problem_names,
    suite_problem_paths,
)
from hercules.suite.selfcheck import load_module, reference_summary

PROBLEMS = suite_problem_names()
CANDIDATES = [(p, c) for p in PROBLEMS for c in suite_candidate_paths(p)]
RUNNABLE = [(p, c) for p, c in CANDIDATES if candidate_language(c) in ("torch", "triton")]
TRITON = [(p, c) for p, c in CANDIDATES if candidate_language(c) == "triton"]
CUDA = [(p, c) for p, c in CANDIDATES if candidate_language(c) == "cuda"]
WORKERS = max(2, min(4, os.cpu_count() or 2))


def _id(pair: tuple[str, Path]) -> str:
    return f"{pair[0]}/{pair[1].stem}"


# ----------------------------------------------------------------------------------------------
# Problems


def test_catalog_lists_the_suite():
    assert suite_dir().joinpath("problems").is_dir()
    assert len(PROBLEMS) >= 14
    assert [p.stem for p in suite_problem_paths()] == sorted(PROBLEMS)
    for name in PROBLEMS:
        paths = suite_candidate_paths(name)
        assert paths == sorted(paths)
        assert paths, f"{name} has no candidate"
    assert suite_candidate_paths("no_such_problem") == []


def test_suite_covers_the_required_mix():
    metas = {p.stem: validate_problem_code(p.read_text(), str(p)) for p in suite_problem_paths()}
    assert sum(m["dtype"] == "bfloat16" for m in metas.values()) >= 5
    assert {m["level"] for m in metas.values()} == {1, 2, 3}
    langs = {lang: {p for p, c in CANDIDATES if candidate_language(c) == lang} for lang in ("torch", "triton", "cuda")}
    assert len(langs["triton"]) >= 5 and len(langs["cuda"]) >= 5 and langs["torch"]


@pytest.mark.parametrize("path", suite_problem_paths(), ids=lambda p: p.stem)
def test_problem_is_well_formed_and_runs(path: Path):
    meta = validate_problem_code(path.read_text(), str(path))
    assert meta["level"] in (1, 2, 3)
    assert meta["tier"] in ("single_op", "fused", "block")
    assert {"single_op": 1, "fused": 2, "block": 3}[meta["tier"]] == meta["level"]
    assert meta["dtype"] in ("float32", "bfloat16")
    for key in ("atol", "rtol", "rel_tol"):
        if key in meta:
            assert 0 < float(meta[key]) <= 0.1
    dtype = getattr(torch, meta["dtype"])

    module = load_module(path, f"suite_test_problem_{path.stem}")
    assert module.HERCULES == meta
    init = module.get_init_inputs()
    assert isinstance(init, list)
    torch.manual_seed(0)
    inputs = module.get_inputs()
    assert isinstance(inputs, list) and inputs
    for x in inputs:
        assert isinstance(x, torch.Tensor) and x.device.type == "cpu"
        if x.is_floating_point():
            assert x.dtype == dtype, f"{path.stem}: input of dtype {x.dtype}, problem says {dtype}"
            xf = x.float()
            assert torch.isfinite(xf).all()
            assert 0.1 < xf.std().item() < 100, "inputs should be well scaled"
        else:
            assert x.dtype in (torch.int64, torch.int32)
        assert x.count_nonzero() > x.numel() // 2, "inputs must not be (mostly) zeros"
    # a fresh call draws fresh inputs
    assert any(not torch.equal(a, b) for a, b in zip(inputs, module.get_inputs()) if a.is_floating_point())

    torch.manual_seed(0)
    model = module.Model(*init).to(dtype).eval()
    assert all(p.dtype == dtype for p in model.parameters())
    runnable = [pair for pair in RUNNABLE if pair[0] == path.stem]
    if runnable:
        # The numerical self-check below runs this reference already (selfcheck.reference_summary):
        # on a CPU without bfloat16 units matmul_bf16's forward takes 21 s, so it runs once.
        result = _subprocess_results()["numerical"][_id(runnable[0])]
        summary = result.get("reference")
        assert summary, result
    else:
        with torch.no_grad():
            summary = reference_summary(model(*inputs))
    assert summary["tensor"] and summary["dtype"] == meta["dtype"], summary
    assert summary["finite"], summary
    atol = float(meta.get("atol", {"float32": 1e-3, "bfloat16": 2e-2}[meta["dtype"]]))
    assert summary["mean_abs"] > 2 * atol, "an output near zero next to atol makes the check meaningless"


# ----------------------------------------------------------------------------------------------
# Candidates: static checks (all languages)


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


def _call_name(call: ast.Call) -> str:
    f = call.func
    parts = []
    while isinstance(f, ast.Attribute):
        parts.append(f.attr)
        f = f.value
    if isinstance(f, ast.Name):
        parts.append(f.id)
    return ".".join(reversed(parts))


FORBIDDEN_NAMES = ("threading", "multiprocessing", "autocast", "Stream", "backends", "set_flush_denormal",
                   "get_inputs", "manual_seed", "_dynamo", "data_ptr")


@pytest.mark.parametrize("pair", CANDIDATES, ids=_id)
def test_candidate_source_is_honest_in_form(pair: tuple[str, Path]):
    problem, path = pair
    source = path.read_text()
    tree = ast.parse(source)
    top = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    assert "ModelNew" in top and "get_inputs" not in top and "Model" not in top
    assert ast.get_docstring(tree), "say what the candidate does differently"
    for node in ast.walk(tree):
        assert not isinstance(node, (ast.Try, ast.Global, ast.Nonlocal)), f"{path.name}: {type(node).__name__}"
        if isinstance(node, ast.Attribute):
            assert node.attr not in FORBIDDEN_NAMES, f"{path.name}: .{node.attr}"
        if isinstance(node, ast.Name):
            assert node.id not in FORBIDDEN_NAMES, f"{path.name}: {node.id}"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            assert not any(m.split(".")[0] in ("threading", "multiprocessing", "concurrent", "ctypes") for m in mods)
    # constructor signature mirrors the reference's
    prob_tree = ast.parse((suite_dir() / "problems" / f"{problem}.py").read_text())

    def init_args(t: ast.Module, cls: str) -> list[str]:
        for node in t.body:
            if isinstance(node, ast.ClassDef) and node.name == cls:
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                        return [a.arg for a in item.args.args]
        raise AssertionError(f"no {cls}.__init__")

    assert init_args(tree, "ModelNew") == init_args(prob_tree, "Model")
    lang = candidate_language(path)
    if lang == "triton":
        assert "@triton.jit" in source
    if lang == "cuda":
        assert [c for c in _calls(tree) if _call_name(c).endswith("load_inline")]
    meta = validate_problem_code((suite_dir() / "problems" / f"{problem}.py").read_text(), problem)
    if lang == "triton" and meta["dtype"] == "float32":
        for call in _calls(tree):
            if _call_name(call) == "tl.dot":
                kw = {k.arg: k.value for k in call.keywords}
                assert "input_precision" in kw and ast.literal_eval(kw["input_precision"]) == "ieee", (
                    f"{path.name}:{call.lineno}: fp32 tl.dot must pass input_precision='ieee' (TF32 is a downcast)"
                )


# ----------------------------------------------------------------------------------------------
# Candidates: numerical check on the CPU (PyTorch, and Triton through the interpreter)


def _run_selfcheck(pairs: list[tuple[str, Path]], *extra: str, interpret: bool) -> dict[str, dict]:
    """One ``python -m hercules.suite.selfcheck`` process for several (problem, candidate) pairs;
    results keyed ``problem/candidate``. A pair with no result line gets the process's stderr."""
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    env["OMP_NUM_THREADS"] = "1"  # the checks run side by side on a small machine
    cmd = [sys.executable, "-m", "hercules.suite.selfcheck", *extra]
    for problem, path in pairs:
        cmd += ["--pair", problem, str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    results = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            res = json.loads(line)
            results[f"{res['problem']}/{res['candidate']}"] = res
    for pair in pairs:
        results.setdefault(_id(pair), {"ok": False, "error": (proc.stderr or proc.stdout)[-4000:]})
    return results


def _by_problem(pairs: list[tuple[str, Path]], jobs: int) -> list[list[tuple[str, Path]]]:
    """``pairs`` in ``jobs`` lists, each problem's candidates in one of them (its reference is then
    computed once: selfcheck keeps it for the process), the problems dealt round-robin."""
    problems = sorted({problem for problem, _ in pairs})
    return [[pair for pair in pairs if problems.index(pair[0]) % jobs == k] for k in range(jobs)]


@lru_cache(maxsize=None)
def _subprocess_results() -> dict[str, dict[str, dict]]:
    """Every subprocess check, run once and side by side: the PyTorch and Triton candidates
    against their references under the Triton interpreter, and the Triton candidates' GPU code
    compiled for sm_90. Returns {"numerical": {...}, "compile": {...}}."""
    jobs = [("numerical", pairs, (), True) for pairs in _by_problem(RUNNABLE, WORKERS)]
    for k in range(WORKERS):
        jobs.append(("compile", TRITON[k::WORKERS], ("--compile-triton",), False))
    out: dict[str, dict[str, dict]] = {"numerical": {}, "compile": {}}
    with ThreadPoolExecutor(WORKERS) as pool:
        futures = [(kind, pool.submit(_run_selfcheck, pairs, *extra, interpret=interp))
                   for kind, pairs, extra, interp in jobs if pairs]
        for kind, fut in futures:
            out[kind].update(fut.result())
    return out


@pytest.mark.parametrize("pair", RUNNABLE, ids=_id)
def test_candidate_matches_reference_on_cpu(pair: tuple[str, Path]):
    res = _subprocess_results()["numerical"][_id(pair)]
    assert res["ok"], json.dumps(res, indent=1)[:6000]


# ----------------------------------------------------------------------------------------------
# Triton candidates: the GPU code path compiles for sm_90 (no GPU needed)


@pytest.mark.parametrize("pair", TRITON, ids=_id)
def test_triton_candidate_compiles_for_sm90(pair: tuple[str, Path]):
    pytest.importorskip("triton")
    res = _subprocess_results()["compile"][_id(pair)]
    assert res["ok"], res.get("error")
    problem = pair[0]
    meta = validate_problem_code((suite_dir() / "problems" / f"{problem}.py").read_text(), problem)
    for kernel in res["kernels"]:
        assert kernel["cubin_bytes"] > 0
        if meta["dtype"] == "bfloat16" and kernel["mma"] is not None:
            assert kernel["mma"] == "wgmma", "bf16 GEMMs should use Hopper tensor cores"


# ----------------------------------------------------------------------------------------------
# CUDA candidates: load_inline arguments, and the CUDA source compiles for sm_90


def load_inline_arguments(path: Path) -> dict:
    """The literal keyword arguments of the file's ``load_inline`` call, read without running it
    (module-level string constants are resolved)."""
    tree = ast.parse(path.read_text())
    constants = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                constants[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    calls = [c for c in _calls(tree) if _call_name(c).endswith("load_inline")]
    assert len(calls) == 1, f"{path.name}: expected one load_inline call"
    args = {}
    for kw in calls[0].keywords:
        if isinstance(kw.value, ast.Name):
            args[kw.arg] = constants[kw.value.id]
        else:
            args[kw.arg] = ast.literal_eval(kw.value)
    return args


def _as_text(value) -> str:
    return value if isinstance(value, str) else "\n".join(value)


def test_cuda_extension_names_are_unique():
    names = [load_inline_arguments(path)["name"] for _, path in CUDA]
    assert len(names) == len(set(names)), names


@pytest.mark.parametrize("pair", CUDA, ids=_id)
def test_cuda_candidate_load_inline_arguments(pair: tuple[str, Path]):
    args = load_inline_arguments(pair[1])
    assert args["name"].isidentifier()
    assert "-O3" in args.get("extra_cuda_cflags", [])
    assert args.get("functions")
    cuda = _as_text(args["cuda_sources"])
    cpp = _as_text(args.get("cpp_sources", ""))
    for fn in args["functions"]:
        assert f"{fn}(" in cpp, f"{fn} is not declared in cpp_sources"
        assert f"{fn}(" in cuda, f"{fn} is not defined in cuda_sources"
    assert "getCurrentCUDAStream" in cuda, "launch on the current stream"
    assert "C10_CUDA_KERNEL_LAUNCH_CHECK" in cuda, "check every launch"
    assert cuda.count("<<<") == cuda.count("C10_CUDA_KERNEL_LAUNCH_CHECK()"), "one check per launch"
    assert "cudaStreamCreate" not in cuda and "cudaDeviceSynchronize" not in cuda
    assert "std::thread" not in cuda


# Headers a CPU-only torch wheel lacks; torch's CUDA headers only need these type names to parse.
_STUB_HEADERS = {
    "cusparse.h": "typedef struct cusparseContext* cusparseHandle_t; typedef int cusparseStatus_t;\n"
                  "const char* cusparseGetErrorString(cusparseStatus_t);",
    "cublas_v2.h": "typedef struct cublasContext* cublasHandle_t; typedef int cublasStatus_t;",
    "cublasLt.h": "typedef struct cublasLtContext* cublasLtHandle_t;",
    "cusolver_common.h": "typedef int cusolverStatus_t;",
    "cusolverDn.h": '#include "cusolver_common.h"\ntypedef struct cusolverDnContext* cusolverDnHandle_t;',
    "c10/cuda/impl/cuda_cmake_macros.h": "#define C10_CUDA_BUILD_SHARED_LIBS",
}


def _nvcc() -> str | None:
    for candidate in (os.environ.get("NVCC"), "/usr/local/bin/nvcc", "/usr/local/cuda/bin/nvcc", shutil.which("nvcc")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def _cuda_translation_unit(paths: list[Path]) -> str:
    """One CUDA file holding every candidate's sources, each in a namespace of its own, laid out
    as ``load_inline`` lays out one (torch/types.h, cuda.h, cuda_runtime.h, then the
    cpp_sources declarations and the cuda_sources). Headers are parsed once, which turns minutes
    of nvcc time into well under one; ``#line`` directives make errors name the candidate file.
    Each bound function's address is taken, so a declaration in cpp_sources that does not match
    its definition fails to compile."""
    includes = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
    bodies = []
    for i, path in enumerate(paths):
        args = load_inline_arguments(path)
        parts = []
        for label in ("cpp_sources", "cuda_sources"):
            text = _as_text(args.get(label, ""))
            lines = text.splitlines()
            for j, line in enumerate(lines):
                if line.lstrip().startswith("#include"):
                    includes.append(line.strip())  # hoisted: a header is parsed once, outside any namespace
                    lines[j] = ""
            parts.append(f'#line 1 "{path.parent.name}/{path.name}:{label}"\n' + "\n".join(lines))
        bound = "\n".join(f"[[maybe_unused]] static auto* bound_{k} = &{fn};" for k, fn in enumerate(args["functions"]))
        bodies.append(f"namespace suite_candidate_{i} {{\n" + "\n".join(parts) + f"\n{bound}\n}}\n")
    unique = list(dict.fromkeys(includes))
    return "\n".join(unique) + "\n" + "\n".join(bodies)


def _compile_cuda(paths: list[Path], workdir: Path) -> tuple[int, str]:
    """Compile the candidates' CUDA sources for sm_90 with the flags torch's cpp_extension gives
    nvcc (its COMMON_NVCC_FLAGS, -std=c++20, the candidate's extra_cuda_cflags)."""
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS, include_paths

    stub = workdir / "stub"
    for rel, text in _STUB_HEADERS.items():
        target = stub / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("#pragma once\n" + text + "\n")
    extra = list(dict.fromkeys(f for path in paths for f in load_inline_arguments(path).get("extra_cuda_cflags", [])))
    src = workdir / "suite_cuda_candidates.cu"
    src.write_text(_cuda_translation_unit(paths))
    cmd = [
        _nvcc(), "-c", str(src), "-o", str(src.with_suffix(".o")),
        "-DTORCH_EXTENSION_NAME=suite_cuda_candidates", "-DTORCH_API_INCLUDE_EXTENSION_H",
        f"-I{stub}", *[a for p in include_paths() for a in ("-isystem", p)],
        *COMMON_NVCC_FLAGS, "--compiler-options", "-fPIC", "-std=c++20",
        "-gencode=arch=compute_90,code=sm_90", *extra,
        "-diag-suppress=3306",  # torch headers: bit-field initialisers
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    return proc.returncode, (proc.stdout + proc.stderr)[-12000:]


def _compile_suite_cuda(request) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as tmp:
        return _compile_cuda([path for _, path in CUDA], Path(tmp))


side_by_side.register(
    "sm_90 unit of the suite's CUDA candidates",
    lambda session: _nvcc() is not None and bool(CUDA)
    and any(getattr(item, "originalname", "") == "test_cuda_candidates_compile_for_sm90" for item in session.items),
    _compile_suite_cuda)


@pytest.mark.slow
@pytest.mark.ondemand  # one nvcc unit with torch's headers: ~56 s on the CI machine (scripts/slow-tests)
def test_cuda_candidates_compile_for_sm90(request):
    if _nvcc() is None:
        pytest.skip("nvcc not found")
    if not CUDA:
        pytest.skip("no CUDA candidates")
    rc, log = side_by_side.result("sm_90 unit of the suite's CUDA candidates", request)
    assert rc == 0, log


# ----------------------------------------------------------------------------------------------
# On a GPU machine: every candidate (CUDA ones included) against its reference on the device


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("pair", CANDIDATES, ids=_id)
def test_candidate_matches_reference_on_gpu(pair: tuple[str, Path]):
    # One process per candidate: an illegal memory access poisons a CUDA context for good.
    res = _run_selfcheck([pair], "--device", "cuda", interpret=False)[_id(pair)]
    assert res["ok"], json.dumps(res, indent=1)[:6000]
