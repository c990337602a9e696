"""Run-time compilation of rendered CUDA C++ sources (torch.utils.cpp_extension.load_inline).

One module per rendered source; the module name carries a hash of the source, so torch's own
extension cache (``~/.cache/torch_extensions`` or ``TORCH_EXTENSIONS_DIR``) makes a second
compile of the same candidates a load, not a build. Several parameter points of one template are
rendered into one source and built together (one nvcc run instead of one per point).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import sysconfig
import threading
import time

PRELUDE = r"""
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <vector>

namespace hercules_k {

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block; every thread gets the total. THREADS must be a multiple of 32 (<= 1024).
template <int THREADS>
__device__ __forceinline__ float block_sum(float v) {
  v = warp_sum(v);
  if constexpr (THREADS <= 32) {
    return v;
  } else {
    __shared__ float red[32];
    const int lane = threadIdx.x & 31;
    const int wid = threadIdx.x >> 5;
    if (lane == 0) red[wid] = v;
    __syncthreads();
    float t = lane < (THREADS / 32) ? red[lane] : 0.f;
    return warp_sum(t);
  }
}

__host__ __forceinline__ bool aligned_to(const void* p, size_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) % bytes) == 0;
}

}  // namespace hercules_k
"""

_lock = threading.Lock()
_name_locks: dict[str, threading.Lock] = {}
_modules: dict[str, object] = {}


def cuda_type(dtype) -> tuple[str, str]:
    """(C++ scalar type, at::ScalarType) for a torch dtype."""
    import torch

    table = {
        torch.float32: ("float", "at::kFloat"),
        torch.float16: ("c10::Half", "at::kHalf"),
        torch.bfloat16: ("c10::BFloat16", "at::kBFloat16"),
    }
    if dtype not in table:
        raise ValueError(f"no CUDA scalar type for {dtype}")
    return table[dtype]


def full_source(cuda_body: str) -> str:
    return PRELUDE + "\n" + cuda_body


def module_name(prefix: str, cuda_body: str) -> str:
    return f"hercules_{prefix}_{hashlib.sha256(full_source(cuda_body).encode()).hexdigest()[:16]}"


def build(prefix: str, cuda_body: str, declarations: str, functions: list[str], verbose: bool = False):
    """Compile (or load from torch's extension cache) and return the module plus build seconds."""
    name = module_name(prefix, cuda_body)
    with _lock:  # one lock per module: different modules build in parallel threads
        lock = _name_locks.setdefault(name, threading.Lock())
    with lock:
        if name in _modules:
            return _modules[name], 0.0
        from torch.utils.cpp_extension import load_inline

        t0 = time.perf_counter()
        mod = load_inline(
            name=name,
            cpp_sources=declarations,
            cuda_sources=full_source(cuda_body),
            functions=functions,
            extra_cuda_cflags=["-O3", "-lineinfo"],  # torch picks the C++ standard (C++20 in 2.13)
            extra_cflags=["-O2"],
            verbose=verbose,
        )
        secs = time.perf_counter() - t0
        _modules[name] = mod
        return mod, secs


def syntax_check(cuda_body: str, nvcc: str = "nvcc", arch: str = "sm_90", timeout: float = 600) -> tuple[bool, str]:
    """Compile the rendered source to an object file with nvcc (no GPU needed): catches C++/CUDA
    errors on a machine without a GPU. Returns (ok, compiler output)."""
    import tempfile

    import torch

    inc = os.path.join(os.path.dirname(torch.__file__), "include")
    py_inc = sysconfig.get_paths()["include"]
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.cu")
        with open(src, "w") as f:
            f.write("#include <torch/types.h>\n" + full_source(cuda_body))
        # CPU builds of torch ship the c10/cuda headers without the generated cmake-macros header
        stub = os.path.join(d, "stub")
        if not os.path.exists(os.path.join(inc, "c10", "cuda", "impl", "cuda_cmake_macros.h")):
            os.makedirs(os.path.join(stub, "c10", "cuda", "impl"))
            with open(os.path.join(stub, "c10", "cuda", "impl", "cuda_cmake_macros.h"), "w") as f:
                f.write("#pragma once\n")
        cmd = [nvcc, "-c", src, "-o", os.path.join(d, "k.o"), "-std=c++20", f"-arch={arch}", "-O1",
               "-I", stub, "-I", inc, "-I", os.path.join(inc, "torch", "csrc", "api", "include"), "-I", py_inc,
               "-D_GLIBCXX_USE_CXX11_ABI=" + str(int(torch.compiled_with_cxx11_abi()))]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, f"{type(e).__name__}: {e}"
        return p.returncode == 0, (p.stdout + p.stderr)[-8000:]


if __name__ == "__main__":  # pragma: no cover
    print(PRELUDE, file=sys.stdout)
