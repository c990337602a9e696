"""The CUDA math libraries' headers and link stubs that scripts/setup installs (``debug/cudalibs.py``),
used by real nvcc builds on a machine without a GPU, as the debugging benchmark's builds use them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hercules.debug import cudalibs, kbbuild
from hercules.debug.toolchain import find_cuda_home, toolchain

pytestmark = pytest.mark.skipif(find_cuda_home() is None, reason="nvcc not installed")

# ATen/cuda/CUDAContextLight.h includes cusparse.h, cublas_v2.h, cublasLt.h and cusolverDn.h, and
# c10/cuda/CUDAMacros.h the header only a CUDA build of torch generates: before the install, the
# first of them stopped every such extension on CPU ("fatal error: cusparse.h: No such file").
EXTENSION = """
#include <ATen/cuda/CUDAContextLight.h>
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
cusparseHandle_t sparse_handle() { return at::cuda::getCurrentCUDASparseHandle(); }
"""

# what the corpus's cuSOLVER/cuFFT instances do: include the library and link it (-lcusolver ...)
PROGRAM = """
#include <cublas_v2.h>
#include <cufft.h>
#include <curand_kernel.h>
#include <cusolverDn.h>
#include <cusparse.h>
__global__ void noise(float* x) {
  curandState s; curand_init(1, threadIdx.x, 0, &s); x[threadIdx.x] = curand_uniform(&s);
}
int main() {
  cusolverDnHandle_t solver; cublasHandle_t blas; cusparseHandle_t sparse; cufftHandle plan;
  cusolverDnCreate(&solver); cublasCreate(&blas); cusparseCreate(&sparse); cufftPlan1d(&plan, 8, CUFFT_C2C, 1);
  return 0;
}
"""


@pytest.fixture(scope="module")
def tc(tmp_path_factory):
    if cudalibs.installed(cudalibs.nvcc_release(find_cuda_home())) is None:
        pytest.skip("no CUDA library headers installed (scripts/setup printed why)")
    return toolchain("cpu", tmp_path_factory.mktemp("cache"))


def test_a_cuda_extension_including_torch_cuda_headers_compiles_on_cpu(tc, tmp_path, monkeypatch, capfd):
    source = tmp_path / "ext.cu"
    source.write_text(EXTENSION)
    for key, value in tc.env:
        monkeypatch.setenv(key, value)
    # the debugging benchmark's compile check: torch's include paths and flags, -c for sm_90
    rc, _ = kbbuild._compile(str(source), [], [], [], tc.arch, "ext")
    assert rc == 0, capfd.readouterr().err[-2000:]
    symbols = subprocess.run(["nm", "-C", f"{source}.o"], capture_output=True, text=True, check=True).stdout
    assert "at::cuda::getCurrentCUDASparseHandle()" in symbols and "scale(float*, float, int)" in symbols


def test_a_program_using_the_libraries_builds_and_links_against_the_stubs(tc, tmp_path):
    (tmp_path / "app.cu").write_text(PROGRAM)
    env = tc.environ()
    proc = subprocess.run(["nvcc", f"-arch=sm_{tc.arch}", "-o", "app", "app.cu", "-lcusolver", "-lcublas",
                           "-lcusparse", "-lcufft", "-lcurand"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    needed = subprocess.run(["readelf", "-d", str(tmp_path / "app")], capture_output=True, text=True,
                            check=True).stdout
    # the real libraries' names, so a machine with the real ones loads them
    assert "libcusolver.so.12" in needed and "libcublas.so.13" in needed and "libcufft.so.12" in needed
    dev = cudalibs.installed(cudalibs.nvcc_release(tc.cuda_home))
    assert str(dev / "lib") in env["LIBRARY_PATH"].split(os.pathsep)
    assert str(dev / "lib") not in env.get("LD_LIBRARY_PATH", "").split(os.pathsep)  # stubs never load


def test_without_the_package_index_setup_prints_a_note_and_succeeds(tmp_path):
    """pip cannot reach any index: one line, exit status 0, no folder claiming to be complete."""
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(tmp_path / "none"))
    code = (f"import sys; sys.prefix = {str(tmp_path)!r}; "  # install into tmp_path, not this venv
            "from hercules.debug import cudalibs; sys.exit(cudalibs.main([]))")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("note: CUDA library headers for nvcc ") and "not installed" in proc.stdout
    assert not list((tmp_path / "cuda-libs").glob(f"*/{cudalibs.COMPLETE}"))
