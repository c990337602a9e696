"""CUDA candidate: row softmax with one block per row, an online (max, sum) reduction and the row
kept in registers, so each element is read from memory once and written once (eager's softmax
kernel is also one launch; the point here is a hand-written single-read kernel to compare).

Rows whose length is a multiple of 4 and at most 8192 go through the register path (float4
loads); any other shape goes through a generic path that reads the row twice.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>

namespace {

constexpr int THREADS = 256;

// Merge the running (max, sum of exp(x - max)) pair (m2, s2) into (m, s).
__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
    const float mn = fmaxf(m, m2);
    if (mn == -INFINITY) return;  // both empty
    s = s * __expf(m - mn) + s2 * __expf(m2 - mn);
    m = mn;
}

// Block-wide (max, sum) reduction; every thread gets the result. Called once per kernel.
__device__ __forceinline__ void block_reduce_ms(float& m, float& s) {
    __shared__ float sh_m[32], sh_s[32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        combine(m, s, __shfl_xor_sync(0xffffffffu, m, off), __shfl_xor_sync(0xffffffffu, s, off));
    }
    if (lane == 0) { sh_m[warp] = m; sh_s[warp] = s; }
    __syncthreads();
    const int nwarps = (blockDim.x + 31) >> 5;
    m = lane < nwarps ? sh_m[lane] : -INFINITY;
    s = lane < nwarps ? sh_s[lane] : 0.f;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        combine(m, s, __shfl_xor_sync(0xffffffffu, m, off), __shfl_xor_sync(0xffffffffu, s, off));
    }
}

__device__ __forceinline__ void update4(float& m, float& s, const float4 v) {
    const float mn = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    if (mn == -INFINITY) return;
    s = s * __expf(m - mn) + __expf(v.x - mn) + __expf(v.y - mn) + __expf(v.z - mn) + __expf(v.w - mn);
    m = mn;
}

// Each thread holds ITEMS float4 of the row in registers between the two phases.
template <int ITEMS>
__global__ void __launch_bounds__(THREADS) softmax_rows_registers(
        const float* __restrict__ x, float* __restrict__ y, int n_cols) {
    const int64_t row = blockIdx.x;
    const float4* xv = reinterpret_cast<const float4*>(x + row * n_cols);
    float4* yv = reinterpret_cast<float4*>(y + row * n_cols);
    const int nv = n_cols / 4;
    float4 v[ITEMS];
    float m = -INFINITY, s = 0.f;
#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {
        const int i = threadIdx.x + it * THREADS;
        if (i < nv) {
            v[it] = xv[i];
            update4(m, s, v[it]);
        }
    }
    block_reduce_ms(m, s);
    const float inv = 1.f / s;
#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {
        const int i = threadIdx.x + it * THREADS;
        if (i < nv) {
            float4 o;
            o.x = __expf(v[it].x - m) * inv;
            o.y = __expf(v[it].y - m) * inv;
            o.z = __expf(v[it].z - m) * inv;
            o.w = __expf(v[it].w - m) * inv;
            yv[i] = o;
        }
    }
}

// Any row length: one pass for (max, sum), one pass to write.
__global__ void __launch_bounds__(THREADS) softmax_rows_generic(
        const float* __restrict__ x, float* __restrict__ y, int64_t n_cols) {
    const int64_t row = blockIdx.x;
    const float* xr = x + row * n_cols;
    float* yr = y + row * n_cols;
    float m = -INFINITY, s = 0.f;
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
        combine(m, s, xr[i], 1.f);
    }
    block_reduce_ms(m, s);
    const float inv = 1.f / s;
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
        yr[i] = __expf(xr[i] - m) * inv;
    }
}

}  // namespace

torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "softmax_rows: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "softmax_rows: x must be float32");
    TORCH_CHECK(x.dim() >= 1, "softmax_rows: x must have a last dimension");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n_cols = xc.size(-1);
    if (xc.numel() == 0) return y;
    const int64_t n_rows = xc.numel() / n_cols;
    TORCH_CHECK(n_rows <= 2147483647LL, "softmax_rows: too many rows");
    const float* xp = xc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const bool vec_ok = n_cols % 4 == 0 && reinterpret_cast<uintptr_t>(xp) % 16 == 0 &&
                        reinterpret_cast<uintptr_t>(yp) % 16 == 0;
    const int64_t items = (n_cols / 4 + THREADS - 1) / THREADS;
    const dim3 grid(static_cast<unsigned>(n_rows));
    const int nc = static_cast<int>(n_cols);
    if (vec_ok && items <= 1) {
        softmax_rows_registers<1><<<grid, THREADS, 0, stream>>>(xp, yp, nc);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    } else if (vec_ok && items <= 2) {
        softmax_rows_registers<2><<<grid, THREADS, 0, stream>>>(xp, yp, nc);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    } else if (vec_ok && items <= 4) {
        softmax_rows_registers<4><<<grid, THREADS, 0, stream>>>(xp, yp, nc);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    } else if (vec_ok && items <= 8) {
        softmax_rows_registers<8><<<grid, THREADS, 0, stream>>>(xp, yp, nc);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    } else {
        softmax_rows_generic<<<grid, THREADS, 0, stream>>>(xp, yp, n_cols);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

CPP_SRC = "torch::Tensor softmax_rows(torch::Tensor x);"

_ext = load_inline(
    name="hercules_suite_softmax_rows_fp32_online_v1",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["softmax_rows"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.softmax_rows(x)
