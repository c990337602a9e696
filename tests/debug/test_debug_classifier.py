"""The classifier on real evidence: the corpus' broken instances built with the real nvcc (compile
errors are real on a CPU machine), and real host processes that crash, abort, fail a check or
hang. No log here is written by hand."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hercules.debug import classifier as cls
from hercules.debug.corpus import load_instance
from hercules.debug.toolchain import adapt_command, toolchain
from hercules.debug.workspace import prepare, run_command

CORPUS = Path(__file__).resolve().parents[2] / "corpora" / "cudabeaver"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                                reason="nvcc not installed")

# Cheap broken instances (each builds in about a second) and what their compiler says.
BROKEN = {
    "cuda_180__compile_error__76f2d111": ("api_misuse", "cudaMemcpyFromDevice"),
    "cuda_227__compile_error__d12728ed": ("syntax_type", "already been defined"),
    "cuda_173__compile_error__81485d75": ("api_misuse", "__nv_bfloat16"),
}


def _build(task: str, tmp_path: Path):
    inst = load_instance(CORPUS / task)
    tc = toolchain("cpu", tmp_path / "cache")
    ws = prepare(inst, inst.broken_code(), tmp_path / task)
    cmd, notes = adapt_command(inst.build_command, tc)
    return run_command("build", cmd, ws, tc.environ(), 300, tmp_path / task, notes)


@needs_nvcc
@pytest.mark.parametrize("task", sorted(BROKEN))
def test_real_nvcc_errors_classify_as_build(task, tmp_path):
    result = _build(task, tmp_path)
    assert not result.ok and result.returncode not in (None, 0)
    found = cls.classify_build(result.text)
    subtype, needle = BROKEN[task]
    assert (found.category, found.subtype) == (cls.BUILD, subtype)
    assert needle in result.text and "error" in found.reason
    assert found.label == "compile_error"


@needs_nvcc
def test_arch_native_is_adapted_for_a_compile_only_check(tmp_path):
    result = _build("cuda_180__compile_error__76f2d111", tmp_path)
    assert "-arch=sm_90" in result.command and "-arch=native" not in result.command
    assert any("compile-only" in n for n in result.notes)


@needs_nvcc
def test_missing_library_header_is_a_build_error_marked_environment_suspect(tmp_path):
    result = _build("cublas_applications_154__compile_error__83af4bad", tmp_path)
    found = cls.classify_build(result.text)
    assert found.category == cls.BUILD
    if "No such file or directory" in result.text:  # a machine without the cuBLAS headers
        assert found.subtype == "missing_header" and found.environment_suspect


def _host_program(tmp_path: Path, body: str) -> Path:
    src = tmp_path / "p.c"
    src.write_text("#include <assert.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n"
                   f"int main(void) {{ {body} }}\n")
    exe = tmp_path / "p.out"
    subprocess.run(["cc", str(src), "-o", str(exe)], check=True)
    return exe


@pytest.mark.parametrize("body,category", [
    ("int *p = (int *)0; *p = 1; return 0;", cls.ILLEGAL),                   # SIGSEGV
    ("int x = 1; assert(x == 2); return 0;", cls.WRONG),                      # failed check (SIGABRT)
    ('printf("Verification failed at 3\\n"); return 1;', cls.WRONG),
    ('fprintf(stderr, "CUDA Error: out of memory\\n"); return 2;', cls.OOM),
    ('fprintf(stderr, "CUDA Error: no CUDA-capable device is detected\\n"); return 100;', cls.ENV),
    ("sleep(30); return 0;", cls.TIMEOUT),
])
def test_real_process_failures(body, category, tmp_path):
    exe = _host_program(tmp_path, body)
    r = run_command("test", str(exe), tmp_path, {"PATH": "/usr/bin:/bin"}, 2.0, tmp_path / "logs")
    assert cls.classify_run(r.text, r.returncode, r.signal, r.timed_out).category == category


def test_python_and_link_and_toolchain_evidence(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n    pass\n")
    r = run_command("build", f"python3 {bad}", tmp_path, {"PATH": "/usr/bin:/bin"}, 30, tmp_path / "l1")
    assert (cls.classify_build(r.text).category, cls.classify_build(r.text).subtype) == (cls.BUILD, "python")
    src = tmp_path / "u.c"
    src.write_text("int missing(void);\nint main(void) { return missing(); }\n")
    r = run_command("build", f"cc {src} -o {tmp_path / 'u'}", tmp_path, {"PATH": "/usr/bin:/bin"}, 30, tmp_path / "l2")
    assert (cls.classify_build(r.text).category, cls.classify_build(r.text).subtype) == (cls.BUILD, "link")
    r = run_command("build", "no-such-compiler-xyz -c a.cu", tmp_path, {"PATH": "/usr/bin:/bin"}, 30, tmp_path / "l3")
    assert cls.classify_build(r.text).category == cls.ENV


def test_static_scan_rejects_kernelbench_fallback_bypasses_but_no_reference():
    """KernelBench's build step is a static checker that rejects try/except fallbacks to PyTorch;
    Hercules' static scan does the same on the corpus' real broken files, and accepts every
    KernelBench reference (the PyTorch problems themselves)."""
    from hercules.debug.attempt import static_rejection

    rejected = []
    for folder in sorted(CORPUS.glob("kernelbench_*")):
        inst = load_instance(folder)
        assert static_rejection(inst.reference_code()) is None, folder.name
        if static_rejection(inst.broken_code()):
            rejected.append(folder.name)
    assert {"kernelbench_level2_7__compile_error__f3b7b2e0", "kernelbench_level2_31__compile_error__3ae77b08",
            "kernelbench_level2_52__compile_error__e62e980c"} <= set(rejected)
    # Only labelled compile errors are rejected statically: the logic/memory/timeout ones got past
    # the real checker, so rejecting them here would contradict the corpus.
    assert all("__compile_error__" in name for name in rejected), rejected


def test_backend_requirement_comes_from_the_build_command_and_agrees_with_the_corpus():
    """The corpus' KernelBench build commands run the checker with backend='cuda': a file without a
    CUDA kernel (level1_58's broken file, every PyTorch reference) does not build; every broken file
    labelled logic/memory/timeout got past the real checker and must get past this one too."""
    from hercules.debug.attempt import required_backend, runs_kernelbench_checker, static_rejection

    rejected = {}
    for folder in sorted(CORPUS.glob("kernelbench_*")):
        inst = load_instance(folder)
        backend = required_backend(inst.build_command)
        assert backend == "cuda" and runs_kernelbench_checker(inst.build_command), folder.name
        assert "requires a __global__ kernel" in static_rejection(inst.reference_code(), backend, True)
        why = static_rejection(inst.broken_code(), backend, True)
        if why:
            rejected[folder.name] = why
    assert "kernelbench_level1_58__compile_error__5fed6fb1" in rejected
    assert all("__compile_error__" in name for name in rejected), rejected
    assert required_backend("python -m py_compile solution.py") is None


def test_checker_bypass_rule_matches_any_try_or_pass_outside_comments():
    from hercules.debug.attempt import bypass_rejection

    assert "try/except" in bypass_rejection("try:\n    import x\nexcept ImportError:\n    x = None\n")
    assert "'pass'" in bypass_rejection("class ModelNew(Model):\n    pass\n")
    assert bypass_rejection("x = 1  # try: nothing to pass here\ny = 'bypassed'  // pass\n") is None


# Build errors written fresh for this test (not from the corpus), each compiled by the real nvcc:
# the device assembler and linker, a toolkit that refuses the command's architecture, missing headers.
SHARED_TOO_BIG = ("__global__ void k(float* o) { __shared__ float s[100000]; s[threadIdx.x] = 1; o[0] = s[5]; }\n"
                  "int main() {}\n")
EXTERN_DEVICE = "extern __device__ void f();\n__global__ void k() { f(); }\nint main() { k<<<1, 1>>>(); }\n"
SM90_ONLY_PTX = '__global__ void k() { asm volatile("setmaxnreg.inc.sync.aligned.u32 240;"); }\nint main() {}\n'
REAL_BUILD_ERRORS = {
    "ptxas_resources": (SHARED_TOO_BIG, "-arch=sm_90", (cls.BUILD, "device_code", False), "too much shared data"),
    "ptxas_unresolved": (EXTERN_DEVICE, "-arch=sm_90", (cls.BUILD, "device_code", False), "Unresolved extern function"),
    "ptx_target": (SM90_ONLY_PTX, "-arch=sm_80", (cls.BUILD, "device_code", False), "not supported on .target"),
    "nvlink_undefined": (EXTERN_DEVICE, "-rdc=true -arch=sm_90", (cls.BUILD, "link", False), "Undefined reference"),
    "host_link": ("void f();\nint main() { f(); }\n", "-arch=sm_90", (cls.BUILD, "link", False), "undefined reference"),
    "own_header": ('#include "helpers_of_mine.cuh"\nint main() {}\n', "-arch=sm_90",
                   (cls.BUILD, "missing_header", False), "helpers_of_mine.cuh"),
    "library_header_in_a_folder": ("#include <cute/tensor.hpp>\nint main() {}\n", "-arch=sm_90",
                                   (cls.BUILD, "missing_header", True), "cute/tensor.hpp"),
    "dropped_architecture": ("int main() {}\n", "-arch=sm_60", (cls.ENV, "toolchain", False),
                             "Unsupported gpu architecture"),
}


@needs_nvcc
@pytest.mark.parametrize("case", sorted(REAL_BUILD_ERRORS))
def test_real_device_tool_and_toolkit_errors(case, tmp_path):
    source, flags, expected, evidence = REAL_BUILD_ERRORS[case]
    (tmp_path / "a.cu").write_text(source)
    tc = toolchain("cpu", tmp_path / "cache")
    r = run_command("build", f"nvcc {flags} -o a.out a.cu", tmp_path, tc.environ(), 300, tmp_path / "log")
    assert not r.ok, r.text
    found = cls.classify_build(r.text)
    assert (found.category, found.subtype, found.environment_suspect) == expected, found
    assert evidence in found.reason, found


@needs_nvcc
def test_an_architecture_this_nvcc_dropped_is_retargeted_and_builds(tmp_path):
    """A command written for a GPU this toolkit can no longer target (CUDA 13 dropped sm_50..sm_72)
    builds for the architecture used here, with a note; supported architectures stay as written."""
    tc = toolchain("cpu", tmp_path / "cache")
    assert "60" not in tc.supported_archs and "90" in tc.supported_archs
    (tmp_path / "a.cu").write_text("__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\nint main() {}\n")
    cmd, notes = adapt_command("nvcc -o a.out a.cu -gencode arch=compute_60,code=[sm_60,compute_60] "
                               "-gencode arch=compute_80,code=sm_80", tc)
    assert "compute_60" not in cmd and "arch=compute_90,code=[sm_90,compute_90]" in cmd and "code=sm_80" in cmd
    assert len(notes) == 1 and "compute_60, sm_60 -> sm_90" in notes[0]
    r = run_command("build", cmd, tmp_path, tc.environ(), 300, tmp_path / "log", notes)
    assert r.ok, r.text
    assert adapt_command("nvcc -arch=sm_80 -o x helper_sm_70.cu", tc) == ("nvcc -arch=sm_80 -o x helper_sm_70.cu", ())
