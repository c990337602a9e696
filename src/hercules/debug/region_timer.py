"""The task's own benchmark region, timed: CUDABeaver test programs have a ``--perf`` mode whose
timed loop sits inside an NVTX range named ``bench_region`` (its authors' reference timings are
"region/bench_region"). ``nvtx_region_timer.c`` is an NVTX injection library that times that range
with the device synchronised at both ends; this module builds it once and reads what it wrote.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import threading
from pathlib import Path

from hercules.debug.corpus import Instance
from hercules.debug.toolchain import Toolchain

SOURCE = Path(__file__).with_name("nvtx_region_timer.c")
REGION = "bench_region"
PERF_FLAG = "--perf"
_SOURCES = ("*.cu", "*.cpp", "*.cc", "*.c", "*.cuh", "*.h", "*.hpp")
_build_lock = threading.Lock()


_PROGRAM = re.compile(r"(?:^|\s)(\./[\w./-]+)")


def perf_command(inst: Instance, test_command: str) -> str | None:
    """``<program> --perf`` when the testbench's program has that mode and an NVTX bench region.
    The program is the ``./...`` the test command runs, called directly: a wrapper such as
    ``python test/run_sanitizer.py ./test.out`` checks memory, it is not part of the timing."""
    if re.search(r"[;&|]", test_command):
        return None  # a pipeline of steps: no single program to time
    programs = _PROGRAM.findall(test_command)
    if len(programs) != 1:
        return None
    has_flag = has_region = False
    for pattern in _SOURCES:
        for path in inst.testbench.rglob(pattern):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            has_flag = has_flag or f'"{PERF_FLAG}"' in text
            has_region = has_region or f'"{REGION}"' in text
            if has_flag and has_region:
                return f"{programs[0]} {PERF_FLAG}"
    return None


def timer_library(tc: Toolchain, cache_dir: Path) -> tuple[Path | None, str]:
    """The injection library (built once per source version), or None and why not."""
    if tc.cuda_home is None or not (tc.cuda_home / "include" / "nvtx3" / "nvToolsExt.h").exists():
        return None, "no CUDA toolkit with nvtx3 headers"
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None, "no C compiler"
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    lib = cache_dir / "debug-nvtx" / f"libhercules_nvtx_{digest}.so"
    with _build_lock:
        if not lib.exists():
            lib.parent.mkdir(parents=True, exist_ok=True)
            tmp = lib.with_suffix(".tmp.so")
            proc = subprocess.run([cc, "-shared", "-fPIC", "-O2", f"-I{tc.cuda_home / 'include'}", str(SOURCE),
                                   "-o", str(tmp), "-ldl"], capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                return None, f"building the NVTX timer failed: {proc.stderr[-500:]}"
            tmp.replace(lib)
    return lib, ""


def region_environment(lib: Path, out_file: Path) -> dict[str, str]:
    return {"NVTX_INJECTION64_PATH": str(lib), "HERCULES_NVTX_OUT": str(out_file), "HERCULES_NVTX_REGION": REGION}


def read_region_ms(out_file: Path) -> float | None:
    """Total milliseconds of the timed regions the program finished (None: none recorded)."""
    if not out_file.exists():
        return None
    values = []
    for line in out_file.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == REGION:
            try:
                values.append(float(parts[1]))
            except ValueError:
                continue
    return sum(values) if values else None
