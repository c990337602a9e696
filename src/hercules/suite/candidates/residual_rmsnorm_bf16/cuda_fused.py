"""CUDA candidate: residual add + RMSNorm fused in one kernel, one block per row: x and residual
are read once (16-byte loads of 8 bf16), h = bf16(x + residual) is kept in registers, the mean
square is reduced in fp32, and the normalised row is written once.

Rows whose length is a multiple of 8 and at most 8192 use the register path; other shapes use a
generic path that re-reads the inputs.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_bf16.h>
#include <cstdint>

namespace {

constexpr int THREADS = 256;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__device__ __forceinline__ float block_sum(float v, float* scratch) {
    v = warp_sum(v);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    const int nwarps = (blockDim.x + 31) >> 5;
    return warp_sum(lane < nwarps ? scratch[lane] : 0.f);
}

__device__ __forceinline__ void unpack8(const uint4 raw, float* f) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const float2 p = __bfloat1622float2(h[k]);
        f[2 * k] = p.x;
        f[2 * k + 1] = p.y;
    }
}

__device__ __forceinline__ uint4 pack8(const float* f) {
    uint4 raw;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
    for (int k = 0; k < 4; ++k) h[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
    return raw;
}

// The model stores h = x + residual in bf16; round it the same way before the statistics.
__device__ __forceinline__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16(v)); }

template <int ITEMS>
__global__ void __launch_bounds__(THREADS) add_rmsnorm_registers(
        const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ res,
        const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ y, int n_cols, float eps) {
    __shared__ float scratch[32];
    const int64_t row = blockIdx.x;
    const uint4* xv = reinterpret_cast<const uint4*>(x + row * n_cols);
    const uint4* rv = reinterpret_cast<const uint4*>(res + row * n_cols);
    const uint4* wv = reinterpret_cast<const uint4*>(w);
    uint4* yv = reinterpret_cast<uint4*>(y + row * n_cols);
    const int nv = n_cols / 8;
    float h[ITEMS][8];
    float sq = 0.f;
#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {
        const int i = threadIdx.x + it * THREADS;
        if (i < nv) {
            float a[8], r[8];
            unpack8(xv[i], a);
            unpack8(rv[i], r);
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                h[it][k] = round_bf16(a[k] + r[k]);
                sq += h[it][k] * h[it][k];
            }
        }
    }
    const float rrms = rsqrtf(block_sum(sq, scratch) / n_cols + eps);
#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {
        const int i = threadIdx.x + it * THREADS;
        if (i < nv) {
            float wf[8], o[8];
            unpack8(wv[i], wf);
#pragma unroll
            for (int k = 0; k < 8; ++k) o[k] = h[it][k] * rrms * wf[k];
            yv[i] = pack8(o);
        }
    }
}

__global__ void __launch_bounds__(THREADS) add_rmsnorm_generic(
        const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ res,
        const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ y, int64_t n_cols, float eps) {
    __shared__ float scratch[32];
    const int64_t row = blockIdx.x;
    const __nv_bfloat16* xr = x + row * n_cols;
    const __nv_bfloat16* rr = res + row * n_cols;
    __nv_bfloat16* yr = y + row * n_cols;
    float sq = 0.f;
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
        const float h = round_bf16(__bfloat162float(xr[i]) + __bfloat162float(rr[i]));
        sq += h * h;
    }
    const float rrms = rsqrtf(block_sum(sq, scratch) / n_cols + eps);
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
        const float h = round_bf16(__bfloat162float(xr[i]) + __bfloat162float(rr[i]));
        yr[i] = __float2bfloat16(h * rrms * __bfloat162float(w[i]));
    }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

torch::Tensor add_rmsnorm_bf16(torch::Tensor x, torch::Tensor residual, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.is_cuda() && residual.is_cuda() && weight.is_cuda(), "add_rmsnorm_bf16: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == at::kBFloat16 && residual.scalar_type() == at::kBFloat16 &&
                weight.scalar_type() == at::kBFloat16, "add_rmsnorm_bf16: bfloat16 tensors expected");
    TORCH_CHECK(x.sizes() == residual.sizes(), "add_rmsnorm_bf16: x and residual shapes differ");
    auto xc = x.contiguous();
    auto rc = residual.contiguous();
    auto wc = weight.contiguous();
    const int64_t n_cols = xc.size(-1);
    TORCH_CHECK(wc.numel() == n_cols, "add_rmsnorm_bf16: weight size mismatch");
    auto y = torch::empty_like(xc);
    if (xc.numel() == 0) return y;
    const int64_t n_rows = xc.numel() / n_cols;
    TORCH_CHECK(n_rows <= 2147483647LL, "add_rmsnorm_bf16: too many rows");
    const auto* xp = reinterpret_cast<const __nv_bfloat16*>(xc.data_ptr<at::BFloat16>());
    const auto* rp = reinterpret_cast<const __nv_bfloat16*>(rc.data_ptr<at::BFloat16>());
    const auto* wp = reinterpret_cast<const __nv_bfloat16*>(wc.data_ptr<at::BFloat16>());
    auto* yp = reinterpret_cast<__nv_bfloat16*>(y.data_ptr<at::BFloat16>());
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const bool vec_ok = n_cols % 8 == 0 && aligned16(xp) && aligned16(rp) && aligned16(wp) && aligned16(yp);
    const int64_t items = (n_cols / 8 + THREADS - 1) / THREADS;
    const dim3 grid(static_cast<unsigned>(n_rows));
    const int nc = static_cast<int>(n_cols);
    const float feps = static_cast<float>(eps);
    if (vec_ok && items <= 1) {
        add_rmsnorm_registers<1><<<grid, THREADS, 0, stream>>>(xp, rp, wp, yp, nc, feps);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    } else if (vec_ok && items <= 2) {
        add_rmsnorm_registers<2><<<grid, THREADS, 0, stream>>>(xp, rp, wp, yp, nc, feps);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    } else if (vec_ok && items <= 4) {
        add_rmsnorm_registers<4><<<grid, THREADS, 0, stream>>>(xp, rp, wp, yp, nc, feps);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    } else {
        add_rmsnorm_generic<<<grid, THREADS, 0, stream>>>(xp, rp, wp, yp, n_cols, feps);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

CPP_SRC = "torch::Tensor add_rmsnorm_bf16(torch::Tensor x, torch::Tensor residual, torch::Tensor weight, double eps);"

_ext = load_inline(
    name="hercules_suite_residual_rmsnorm_bf16_fused_v1",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["add_rmsnorm_bf16"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))

    def forward(self, x, residual):
        return _ext.add_rmsnorm_bf16(x, residual, self.weight, self.eps)
