"""What a candidate needs built, and where its build products are cached.

A candidate's extension modules are built by its own ``load_inline`` / ``load`` calls inside the
worker; the cache is a ``TORCH_EXTENSIONS_DIR`` keyed by the content hash of everything that can
change the binary (source, compiler-relevant environment, GPU arch, torch version), so a second
evaluation of the same source loads the built module instead of compiling it again. Triton keeps
its own content-keyed cache, pointed into the same cache root.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch

CUDA_MARKERS = re.compile(r"cuda_sources\s*=|\.cu['\"]|__global__|load_inline\s*\(.*cuda", re.S)
CPP_MARKERS = re.compile(r"load_inline\s*\(|cpp_extension\.load\s*\(")
TRITON_MARKERS = re.compile(r"@\s*triton\.jit|import\s+triton|from\s+triton")
BUILD_ENV_KEYS = ("CXXFLAGS", "NVCC_FLAGS", "TORCH_CUDA_ARCH_LIST", "CUDA_HOME")


def detect_language(code: str) -> str:
    if CUDA_MARKERS.search(code):
        return "cuda"
    if TRITON_MARKERS.search(code):
        return "triton"
    if CPP_MARKERS.search(code):
        return "cpp"
    return "pytorch"


def default_cache_dir() -> Path:
    root = os.environ.get("HERCULES_CACHE_DIR")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hercules"


def gpu_arch(device: torch.device) -> str:
    if device.type != "cuda":
        return "cpu"
    major, minor = torch.cuda.get_device_capability(device)
    return f"{major}.{minor}"


def usable_cpus() -> int:
    """Cores this process may run on (its affinity, e.g. under taskset), not the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def software_versions() -> dict[str, str]:
    versions = {"torch": torch.__version__, "cuda": str(torch.version.cuda)}
    try:
        import triton

        versions["triton"] = triton.__version__
    except Exception:
        versions["triton"] = "none"
    return versions


@dataclass(frozen=True)
class BuildPlan:
    language: str
    cache_key: str
    extensions_dir: Path
    env: dict[str, str]

    @property
    def cached(self) -> bool:
        """True when an earlier build of this exact content left a shared object behind."""
        return any(p for p in self.extensions_dir.rglob("*.so") if "triton" not in p.parts)


def plan_build(code: str, device: torch.device, cache_dir: Path, arch: str) -> BuildPlan:
    language = detect_language(code)
    relevant_env = {k: os.environ.get(k, "") for k in BUILD_ENV_KEYS}
    key_material = "\n".join([code, repr(sorted(relevant_env.items())), arch, torch.__version__])
    key = hashlib.sha256(key_material.encode()).hexdigest()[:20]
    extensions_dir = cache_dir / "extensions" / key
    env = {
        "TORCH_EXTENSIONS_DIR": str(extensions_dir),
        # Triton's cache inside the entry: the sandbox lets a candidate write only the entry it builds.
        "TRITON_CACHE_DIR": str(extensions_dir / "triton"),
    }
    if arch != "cpu":
        # Build for the present GPU only: every extra architecture is another full device compile.
        env["TORCH_CUDA_ARCH_LIST"] = arch
    if device.type == "cpu" and language == "triton":
        env["TRITON_INTERPRET"] = "1"
    return BuildPlan(language=language, cache_key=key, extensions_dir=extensions_dir, env=env)


def needs_missing_device(language: str, device: torch.device) -> str | None:
    """Why the candidate cannot run on this device, or None."""
    if device.type == "cpu" and language == "cuda":
        return "candidate builds CUDA code and needs a CUDA device"
    if device.type == "cpu" and language == "triton":
        try:
            import triton  # noqa: F401
        except Exception:
            return "candidate uses Triton, which is not installed (its CPU interpreter needs it)"
    return None
