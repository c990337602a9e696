"""Compile-only check of a KernelBench candidate's native sources on a machine without a GPU.

The evaluation core reports a CUDA ``load_inline`` candidate ``skipped`` on CPU. To still get real
build evidence, this script (run as a subprocess in the attempt's workspace) imports the candidate
with ``torch.utils.cpp_extension``'s final build step replaced: torch itself writes ``main.cpp`` /
``cuda.cu`` exactly as it would, then each source is compiled (``-c``, no link) by g++ or nvcc for
sm_90. ``torch.cuda.is_available`` answers True here so candidates that guard their build on it
still build. What this can say: the sources compile. What it cannot: linking against CUDA torch,
loading, running, correctness, speed -- a build that succeeds here is never a pass.

    python -m hercules.debug.kbbuild solution.py BUILD_DIR [--arch 90]
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import runpy
import subprocess
import sys
import sysconfig
import traceback
from pathlib import Path

RESULT_MARK = "HERCULES-KBBUILD:"
# Exit statuses: the sources compiled (or there were none), a source failed to compile, or every
# source compiled and then the candidate's own import code failed (its traceback is the evidence).
COMPILED, FAILED, IMPORT_FAILED = 0, 1, 3


class CompileOnlyError(RuntimeError):
    """A source failed to compile (raised where torch's build would raise)."""


class _CompiledOnly:
    """What ``load_inline`` returns here: any call says the module was compiled, not linked."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr):
        def call(*_a, **_k):
            raise RuntimeError(f"{self._name}.{attr}: compiled for a compile-only check (no GPU), cannot run")
        return call


def _compile(source: str, flags: list[str], cuda_flags: list[str], includes: list[str], arch: str,
             name: str) -> tuple[int, str]:
    from torch.utils.cpp_extension import include_paths

    inc = [f"-I{p}" for p in [*include_paths(), sysconfig.get_path("include"), *includes]]
    defines = [f"-DTORCH_EXTENSION_NAME={name}", "-DTORCH_API_INCLUDE_EXTENSION_H", "-D_GLIBCXX_USE_CXX11_ABI=1"]
    obj = source + ".o"
    if source.endswith((".cu", ".cuh")):
        cmd = ["nvcc", "-c", source, "-o", obj, *inc, *defines, "-std=c++17", "--compiler-options", "-fPIC",
               f"-gencode=arch=compute_{arch},code=sm_{arch}", "-D__CUDA_NO_HALF_OPERATORS__",
               "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
               "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr", *cuda_flags]
    else:
        cmd = ["c++", "-c", source, "-o", obj, *inc, *defines, "-std=c++17", "-fPIC", *flags]
    print(f"$ {' '.join(cmd)}", flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    return proc.returncode, " ".join(cmd)


# Symbols a CPU-only torch, the CUDA runtime or the C++ runtime provide when the module loads.
_PROVIDED = re.compile(r"^(at::|c10::|torch::|caffe2::|pybind11::|std::|__gnu_cxx::|cuda|__cuda|__cxa|__gxx|_Py|Py|"
                       r"operator (new|delete)|__stack_chk|__dso_handle|_GLOBAL_OFFSET_TABLE_|__tls_get_addr|"
                       r"typeinfo|vtable|VTT|guard variable|__assert_fail|__errno_location|_Unwind|__popcount|"
                       r"[a-z_][a-z0-9_]*$)")
_LIB_NAMESPACE = re.compile(r"(^|[\s*&<])(at|c10|torch|caffe2|pybind11|std|__gnu_cxx|thrust|cub|cuda)::")


def unresolved_symbols(objects: list[str]) -> list[str]:
    """The candidate's own functions that are used but defined nowhere (a link error once loaded):
    e.g. a C++ declaration whose CUDA definition has other parameters."""
    def names(flag: str, fields: int) -> set[str]:
        out = subprocess.run(["nm", "-C", flag, *objects], capture_output=True, text=True, check=False).stdout
        rows = [line.split(None, fields - 1) for line in out.splitlines() if line.strip() and not line.endswith(":")]
        return {row[-1].strip() for row in rows if len(row) == fields}

    missing = names("-u", 2) - names("--defined-only", 3)
    def provided(name: str) -> bool:
        head = name.split("(", 1)[0]
        return bool(_PROVIDED.match(head) or _LIB_NAMESPACE.search(head))

    return sorted(n for n in missing if "(" in n and not provided(n))


def _install(arch: str, build_dir: Path, compiled: list[str]) -> None:
    import torch
    import torch.utils.cpp_extension as ext

    real = ext._jit_compile
    params = inspect.signature(real).parameters

    def jit_compile_only(*args, **kwargs):
        bound = dict(zip(params, args, strict=False))
        bound.update(kwargs)
        name = bound.get("name", "ext")
        failures = []
        # CUDA first: most candidate errors are there, and a failure stops before the slow
        # torch/extension.h + pybind11 compile of main.cpp.
        for src in sorted(bound.get("sources") or [], key=lambda s: not str(s).endswith(".cu")):
            rc, _ = _compile(str(src), list(bound.get("extra_cflags") or []),
                             list(bound.get("extra_cuda_cflags") or []),
                             list(bound.get("extra_include_paths") or []), arch, name)
            compiled.append(str(src))
            if rc != 0:
                failures.append(Path(str(src)).name)
                break
        if failures:
            raise CompileOnlyError(f"Error building extension '{name}': {', '.join(failures)} failed to compile")
        missing = unresolved_symbols([f"{src}.o" for src in bound.get("sources") or []])
        if missing:
            for sym in missing:
                print(f"{name}.so: error: undefined reference to `{sym}'", file=sys.stderr)
            raise CompileOnlyError(f"Error building extension '{name}': undefined symbols (link check)")
        return _CompiledOnly(name)

    ext._jit_compile = jit_compile_only
    # Each extension builds in its own folder under build_dir (never the user's torch_extensions).
    ext._get_build_directory = lambda name, verbose: str((build_dir / name).mkdir(parents=True, exist_ok=True)
                                                         or build_dir / name)
    torch.cuda.is_available = lambda: True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("solution")
    parser.add_argument("build_dir")
    parser.add_argument("--arch", default="90")
    args = parser.parse_args(argv)
    compiled: list[str] = []
    build_dir = Path(args.build_dir).resolve()
    _install(args.arch, build_dir, compiled)
    sys.path.insert(0, os.getcwd())
    status = COMPILED
    try:
        runpy.run_path(args.solution, run_name="solution")
    except CompileOnlyError as exc:
        print(f"{exc}", file=sys.stderr)
        status = FAILED
    except BaseException:  # noqa: BLE001 -- the candidate's own import failure is evidence (a traceback)
        traceback.print_exc()
        status = FAILED if not compiled else IMPORT_FAILED
    outcome = {COMPILED: "compiled" if compiled else "no-native-sources", FAILED: "failed",
               IMPORT_FAILED: "compiled-then-import-failed"}
    print(f"{RESULT_MARK} {outcome[status]} sources={len(compiled)} arch=sm_{args.arch}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
