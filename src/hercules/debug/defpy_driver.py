"""Driver for ``def.py`` tasks (a C launch signature, ``get_inputs``/``get_outputs``, a PyTorch
``reference_fn`` and ``TOLERANCES``; the testbench's ``reference.cu`` is the reference kernel).

    python -m hercules.debug.defpy_driver build solution.cu --arch 90   # nvcc -> libsolution.so
    python -m hercules.debug.defpy_driver test solution.cu --arch 90    # run, compare, time (GPU)

``test`` builds ``reference.cu`` the same way, checks the solution against ``reference_fn``, and
times solution and reference kernels alike (CUDA events, warm-up, median of 30) in one process.
Its last stdout line is one JSON object: correct, cand_ms, ref_ms, error.
"""

from __future__ import annotations

import argparse
import ast
import ctypes
import json
import re
import subprocess
import sys
from pathlib import Path


def _literal(tree: ast.Module, name: str, default):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return default
    return default


def build(source: str, out: str, arch: str) -> int:
    tree = ast.parse(Path("def.py").read_text())
    flags = [*_literal(tree, "REFERENCE_EXTRA_CUDA_FLAGS", []), *_literal(tree, "REFERENCE_EXTRA_LDFLAGS", [])]
    includes = [f"-I{p}" for p in _literal(tree, "REFERENCE_EXTRA_INCLUDES", [])]
    cmd = ["nvcc", "-shared", "-Xcompiler", "-fPIC", "-O3", f"-arch=sm_{arch}", *includes, "-o", out, source, *flags]
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=False).returncode


def _params(signature: str) -> tuple[str, list[tuple[str, str]]]:
    m = re.search(r"(\w+)\s*\((.*)\)", signature, re.DOTALL)
    if not m:
        raise SystemExit("def.py FUNCTION_SIGNATURE has no function")
    params = []
    for raw in m.group(2).split(","):
        words = raw.replace("*", " * ").split()
        params.append((words[-1], " ".join(words[:-1])))
    return m.group(1), params


def _time(fn) -> float:
    """Median ms per call, timed as the evaluation core times candidates (warm-up, an L2 flush
    before each repetition, CUDA events, repetitions fitted to a budget): the gate compares the
    repair with the reference measured the same way."""
    from hercules.harness.timing import time_callable

    return time_callable(fn, [()], device="cuda", budget_s=0.2, warmup_s=0.02, wall_check=False).median_ms


def test(source: str, arch: str) -> int:
    import importlib.util

    import torch

    if build("reference.cu", "./libreference.so", arch) != 0:
        print(json.dumps({"correct": None, "error": "reference.cu failed to build"}))
        return 2
    spec = importlib.util.spec_from_file_location("task_def", "def.py")
    task = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(task)
    fname, params = _params(task.FUNCTION_SIGNATURE)
    torch.manual_seed(0)
    inputs = task.get_inputs()

    def launcher(lib_path: str):
        lib = ctypes.CDLL(str(Path(lib_path).resolve()))
        fn = getattr(lib, fname)
        outputs = task.get_outputs(inputs)
        tensors = dict(inputs) | dict(outputs)
        args = []
        for name, ctype in params:
            if "*" in ctype:
                args.append(ctypes.c_void_p(tensors[name].data_ptr()))
            elif "cudaStream_t" in ctype:
                args.append(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
            else:
                args.append(ctypes.c_int(int(task.SCALAR_ARGS[name])))
        return (lambda: fn(*args)), outputs

    run_cand, cand_out = launcher("./libsolution.so")
    run_cand()
    torch.cuda.synchronize()
    expected = task.reference_fn(inputs)
    tol = getattr(task, "TOLERANCES", {"atol": 1e-3, "rtol": 1e-3})
    for (name, got), (_, want) in zip(cand_out, expected, strict=True):
        if not torch.allclose(got, want, **tol):
            err = (got - want).abs().max().item()
            print(json.dumps({"correct": False, "error": f"{name}: max abs error {err:.3g} beyond {tol}"}))
            return 1
    run_ref, _ = launcher("./libreference.so")
    report = {"correct": True, "cand_ms": _time(run_cand), "ref_ms": _time(run_ref), "error": None}
    print(json.dumps(report))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=("build", "test"))
    parser.add_argument("source")
    parser.add_argument("--arch", default="90")
    args = parser.parse_args(argv)
    if args.stage == "build":
        return build(args.source, "./libsolution.so", args.arch)
    return test(args.source, args.arch)


if __name__ == "__main__":
    sys.exit(main())
