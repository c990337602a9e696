"""The build environment of a workspace: CUDA toolkit, GPU architecture, library headers, and
the adaptation of architecture flags written for another machine.

Instances were recorded on other GPUs (``-arch=native``, ``make GPU=RTX5070``). A command is
rewritten for the GPU present; with no GPU it targets sm_90 for a compile-only check, and every
rewrite is recorded as a note in the attempt's evidence.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from hercules.debug import cudalibs

COMPILE_ONLY_ARCH = "90"  # no GPU here: compile for Hopper (the H200 the benchmark is measured on)
# ThunderKittens' Makefiles name a GPU, not an architecture.
TK_GPU_BY_ARCH = {"80": "A100", "90": "H100", "100": "B200", "103": "B300", "120": "RTX5070"}
# CUDA math libraries shipped as Python wheels (``nvidia-cublas`` ...): used when the system
# toolkit lacks them (a CUDA build of torch installs them; the ``debug`` extra does too).
WHEEL_LIBS = ("cublas", "cufft", "cusolver", "cusparse", "curand", "nvjitlink", "cu13", "cuda_runtime")


@dataclass(frozen=True)
class Toolchain:
    cuda_home: Path | None
    arch: str  # compute capability without the dot, e.g. "90"
    gpu_present: bool
    env: tuple[tuple[str, str], ...]  # extra environment for build and test subprocesses
    # the architectures this nvcc can target ("75", "80", ... from ``nvcc --list-gpu-arch``); empty
    # when unknown (then no explicit architecture is rewritten)
    supported_archs: tuple[str, ...] = ()

    def environ(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(dict(self.env))
        return env


def find_cuda_home() -> Path | None:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var) and (Path(os.environ[var]) / "bin" / "nvcc").exists():
            return Path(os.environ[var])
    if Path("/usr/local/cuda/bin/nvcc").exists():
        return Path("/usr/local/cuda")
    nvcc = shutil.which("nvcc")
    return Path(nvcc).resolve().parent.parent if nvcc else None


def detect_gpu_arch() -> str | None:
    """Compute capability of GPU 0 (torch first, nvidia-smi second), or None without a GPU."""
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability(0)
            return f"{major}{minor}"
    except Exception:  # noqa: BLE001, S110 -- a broken torch install must not stop a compile-only run
        pass
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20, check=False).stdout.split()
            if out:
                return out[0].replace(".", "")
        except (OSError, subprocess.SubprocessError):
            pass
    return None


def _wheel_library_dirs() -> tuple[list[Path], list[Path]]:
    """include/ and lib/ folders of installed ``nvidia-*`` wheels."""
    includes: list[Path] = []
    libs: list[Path] = []
    for entry in sys.path:
        root = Path(entry or ".") / "nvidia"
        if not root.is_dir():
            continue
        for name in WHEEL_LIBS:
            if (root / name / "include").is_dir():
                includes.append(root / name / "include")
            if (root / name / "lib").is_dir():
                libs.append(root / name / "lib")
    return includes, libs


def _unversioned_links(libs: list[Path], cache: Path) -> Path | None:
    """Wheels ship ``libcublas.so.13`` only; ``-lcublas`` needs ``libcublas.so``: link it once."""
    if not libs:
        return None
    cache.mkdir(parents=True, exist_ok=True)
    for lib in libs:
        for so in lib.glob("lib*.so.*"):
            link = cache / (so.name.split(".so")[0] + ".so")
            if not link.exists():
                try:
                    link.symlink_to(so)
                except OSError:
                    pass
    return cache


def _torch_cuda_macros(cache: Path) -> Path | None:
    """An include folder with ``c10/cuda/impl/cuda_cmake_macros.h`` when torch lacks it.

    CMake generates that file only in CUDA builds of torch, and ``c10/cuda/CUDAMacros.h`` includes
    it, so with a CPU torch no CUDA extension that includes ``ATen/cuda/CUDAContext.h`` compiles.
    Its content in a CUDA build (torch 2.13, shared libraries) is the one define written here.
    """
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return None
    include = Path(spec.origin).parent / "include"
    if not (include / "c10/cuda/CUDAMacros.h").exists() or (include / _CUDA_MACROS).exists():
        return None
    folder = cache / "torch-cuda-macros" / "include"
    header = folder / _CUDA_MACROS
    if not header.exists():
        header.parent.mkdir(parents=True, exist_ok=True)
        header.write_text("#pragma once\n// what a CUDA build of torch generates; a CPU build has no such file\n"
                          "#define C10_CUDA_BUILD_SHARED_LIBS\n")
    return folder


_CUDA_MACROS = "c10/cuda/impl/cuda_cmake_macros.h"


@functools.lru_cache(maxsize=4)
def supported_archs(cuda_home: Path | None) -> tuple[str, ...]:
    """The compute capabilities this toolkit's nvcc can target, e.g. ("75", "80", ..., "121")."""
    nvcc = str(cuda_home / "bin" / "nvcc") if cuda_home else shutil.which("nvcc")
    if not nvcc:
        return ()
    try:
        out = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(sorted({m.group(1) for m in re.finditer(r"\bcompute_(\d+)", out.stdout)}, key=int))


@functools.lru_cache(maxsize=4)
def toolchain(device: str, cache_dir: Path) -> Toolchain:
    """Toolchain for ``device`` ("cpu": compile-only for sm_90; "cuda"/"auto": the GPU present)."""
    cuda_home = find_cuda_home()
    arch = None if device == "cpu" else detect_gpu_arch()
    paths = [str(Path(sys.executable).parent)]  # ``python`` in a testbench means this interpreter
    if cuda_home:
        paths += [str(cuda_home / "bin"), str(cuda_home / "compute-sanitizer")]
    env = {"PATH": os.pathsep.join([*paths, os.environ.get("PATH", "")])}
    if cuda_home:
        env["CUDA_HOME"] = str(cuda_home)
    includes, libs = _wheel_library_dirs()
    links = _unversioned_links(libs, cache_dir / "debug-libs")
    # after the wheels' (real) files: the headers and link stubs scripts/setup installs (cudalibs.py)
    # and the one generated header a CPU build of torch lacks for its CUDA headers
    dev = cudalibs.installed(cudalibs.nvcc_release(cuda_home)) if cuda_home else None
    includes += [d for d in (dev / "include" if dev else None, _torch_cuda_macros(cache_dir)) if d]
    if includes:
        env["CPATH"] = os.pathsep.join([*map(str, includes), os.environ.get("CPATH", "")]).rstrip(os.pathsep)
    if links or dev:
        # stubs only link: LIBRARY_PATH, never LD_LIBRARY_PATH (a GPU machine loads the real libraries)
        lib_path = [str(links), *map(str, libs)] if links else []
        link_path = [*lib_path, *([str(dev / "lib")] if dev else [])]
        env["LIBRARY_PATH"] = os.pathsep.join([*link_path, os.environ.get("LIBRARY_PATH", "")]).rstrip(os.pathsep)
        if lib_path:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(
                [*lib_path, os.environ.get("LD_LIBRARY_PATH", "")]).rstrip(os.pathsep)
    return Toolchain(cuda_home=cuda_home, arch=arch or COMPILE_ONLY_ARCH, gpu_present=arch is not None,
                     env=tuple(sorted(env.items())), supported_archs=supported_archs(cuda_home))


_NATIVE = re.compile(r"-arch[= ]native\b")
_TK_GPU = re.compile(r"\bGPU=(\w+)")
# an architecture named in a command: -arch=sm_70, -gencode arch=compute_70,code=[sm_70,compute_70], lto_70
_ARCH_NAME = re.compile(r"\b(sm|compute|lto)_(\d+)([af]?)\b")


def adapt_command(command: str, tc: Toolchain) -> tuple[str, tuple[str, ...]]:
    """Rewrite architecture flags for the GPU present; returns the command and what changed."""
    notes: list[str] = []
    why = "the GPU present" if tc.gpu_present else "no GPU here: compile-only check"
    if _NATIVE.search(command):
        command = _NATIVE.sub(f"-arch=sm_{tc.arch}", command)
        notes.append(f"-arch=native -> -arch=sm_{tc.arch} ({why})")
    if tc.supported_archs:
        # an architecture this toolkit cannot target (dropped, as CUDA 13 dropped sm_50 to sm_72, or
        # newer than it): the command was written for another machine; target the one used here
        dropped = sorted({m.group(0) for m in _ARCH_NAME.finditer(command) if m.group(2) not in tc.supported_archs})
        if dropped:
            command = _ARCH_NAME.sub(lambda m: m.group(0) if m.group(2) in tc.supported_archs
                                     else f"{m.group(1)}_{tc.arch}", command)
            notes.append(f"{', '.join(dropped)} -> sm_{tc.arch} (not supported by this nvcc; {why})")
    wanted = TK_GPU_BY_ARCH.get(tc.arch)
    for match in set(_TK_GPU.findall(command)):
        if wanted and match != wanted:
            command = command.replace(f"GPU={match}", f"GPU={wanted}")
            notes.append(f"GPU={match} -> GPU={wanted} (sm_{tc.arch}, {why})")
    return command, tuple(notes)


# -- identity: what a cached result holds for --------------------------------------------------

def _first_line(cmd: list[str], env: dict[str, str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False, env=env)
    except (OSError, subprocess.SubprocessError):
        return "absent"
    lines = [ln.strip() for ln in (out.stdout or out.stderr).splitlines() if ln.strip()]
    return lines[0] if lines else "absent"


@functools.lru_cache(maxsize=8)
def _toolchain_identity(cuda_home: str | None, arch: str, gpu_present: bool, path: str) -> tuple[str, str, str]:
    env = {"PATH": path}
    nvcc = str(Path(cuda_home) / "bin" / "nvcc") if cuda_home else "nvcc"
    release = "nvcc absent"
    try:
        text = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60, check=False).stdout
        for line in text.splitlines():
            if "release" in line:  # "Cuda compilation tools, release 13.0, V13.0.88"
                release = "nvcc " + line.split("release", 1)[1].strip().replace(", ", " ")
    except OSError:
        pass
    cxx = _first_line(["g++", "--version"], env)
    if gpu_present:
        name = _first_line(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], env)
        device = f"{name}, sm_{arch}"
    else:
        device = f"cpu: no GPU, compile-only for sm_{arch}"
    identity = f"{release}; {cxx}; CUDA at {cuda_home}; sm_{arch}"
    short = release.split(" (")[0]
    return identity, device, short


def toolchain_identity(tc: Toolchain) -> tuple[str, str, str]:
    """(full identity, device description, short compiler name such as 'nvcc 13.0 V13.0.88')."""
    return _toolchain_identity(str(tc.cuda_home) if tc.cuda_home else None, tc.arch, tc.gpu_present,
                               tc.environ().get("PATH", ""))
