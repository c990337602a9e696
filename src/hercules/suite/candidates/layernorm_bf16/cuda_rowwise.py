"""CUDA candidate: bf16 LayerNorm with one block per row and the row held in registers (16-byte
loads of 8 bf16), fp32 statistics computed in two passes over the registers (mean, then the sum of
squared deviations: no E[x^2] - E[x]^2 cancellation), one read and one write of the activation.

Rows whose length is a multiple of 8 and at most 8192 use the register path; other shapes use a
generic path that re-reads the row from memory.
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

// Sum over the block, returned to every thread. `scratch` holds 32 floats; the leading barrier
// lets the same scratch be reused by consecutive calls.
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

template <int ITEMS>
__global__ void __launch_bounds__(THREADS) layernorm_registers(
        const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
        const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ y, int n_cols, float eps) {
    __shared__ float scratch[32];
    const int64_t row = blockIdx.x;
    const uint4* xv = reinterpret_cast<const uint4*>(x + row * n_cols);
    uint4* yv = reinterpret_cast<uint4*>(y + row * n_cols);
    const uint4* wv = reinterpret_cast<const uint4*>(w);
    const uint4* bv = reinterpret_cast<const uint4*>(b);
    const int nv = n_cols / 8;
    float v[ITEMS][8];
    float sum = 0.f;
#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {
        const int i = threadIdx.x + it * THREADS;
        if (i < nv) {
            unpack8(xv[i], v[it]);
#pragma unroll
            for (int k = 0; k < 8; ++k) sum += v[it][k];
        }
    }
    const float mean = block_sum(sum, scratch) / n_cols;
    float sq = 0.f;
#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {
        const int i = threadIdx.x + it * THREADS;
        if (i < nv) {
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                const float d = v[it][k] - mean;
                sq += d * d;
            }
        }
    }
    const float rstd = rsqrtf(block_sum(sq, scratch) / n_cols + eps);
#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {
        const int i = threadIdx.x + it * THREADS;
        if (i < nv) {
            float wf[8], bf[8], o[8];
            unpack8(wv[i], wf);
            unpack8(bv[i], bf);
#pragma unroll
            for (int k = 0; k < 8; ++k) o[k] = (v[it][k] - mean) * rstd * wf[k] + bf[k];
            yv[i] = pack8(o);
        }
    }
}

__global__ void __launch_bounds__(THREADS) layernorm_generic(
        const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
        const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ y, int64_t n_cols, float eps) {
    __shared__ float scratch[32];
    const int64_t row = blockIdx.x;
    const __nv_bfloat16* xr = x + row * n_cols;
    __nv_bfloat16* yr = y + row * n_cols;
    float sum = 0.f;
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) sum += __bfloat162float(xr[i]);
    const float mean = block_sum(sum, scratch) / n_cols;
    float sq = 0.f;
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
        const float d = __bfloat162float(xr[i]) - mean;
        sq += d * d;
    }
    const float rstd = rsqrtf(block_sum(sq, scratch) / n_cols + eps);
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
        const float o = (__bfloat162float(xr[i]) - mean) * rstd * __bfloat162float(w[i]) + __bfloat162float(b[i]);
        yr[i] = __float2bfloat16(o);
    }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

torch::Tensor layernorm_bf16(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "layernorm_bf16: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == at::kBFloat16 && weight.scalar_type() == at::kBFloat16 &&
                bias.scalar_type() == at::kBFloat16, "layernorm_bf16: bfloat16 tensors expected");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    const int64_t n_cols = xc.size(-1);
    TORCH_CHECK(wc.numel() == n_cols && bc.numel() == n_cols, "layernorm_bf16: weight/bias size mismatch");
    auto y = torch::empty_like(xc);
    if (xc.numel() == 0) return y;
    const int64_t n_rows = xc.numel() / n_cols;
    TORCH_CHECK(n_rows <= 2147483647LL, "layernorm_bf16: too many rows");
    const auto* xp = reinterpret_cast<const __nv_bfloat16*>(xc.data_ptr<at::BFloat16>());
    const auto* wp = reinterpret_cast<const __nv_bfloat16*>(wc.data_ptr<at::BFloat16>());
    const auto* bp = reinterpret_cast<const __nv_bfloat16*>(bc.data_ptr<at::BFloat16>());
    auto* yp = reinterpret_cast<__nv_bfloat16*>(y.data_ptr<at::BFloat16>());
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const bool vec_ok = n_cols % 8 == 0 && aligned16(xp) && aligned16(wp) && aligned16(bp) && aligned16(yp);
    const int64_t items = (n_cols / 8 + THREADS - 1) / THREADS;
    const dim3 grid(static_cast<unsigned>(n_rows));
    const int nc = static_cast<int>(n_cols);
    const float feps = static_cast<float>(eps);
    if (vec_ok && items <= 1) {
        layernorm_registers<1><<<grid, THREADS, 0, stream>>>(xp, wp, bp, yp, nc, feps);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    } else if (vec_ok && items <= 2) {
        layernorm_registers<2><<<grid, THREADS, 0, stream>>>(xp, wp, bp, yp, nc, feps);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    } else if (vec_ok && items <= 4) {
        layernorm_registers<4><<<grid, THREADS, 0, stream>>>(xp, wp, bp, yp, nc, feps);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    } else {
        layernorm_generic<<<grid, THREADS, 0, stream>>>(xp, wp, bp, yp, n_cols, feps);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

CPP_SRC = "torch::Tensor layernorm_bf16(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);"

_ext = load_inline(
    name="hercules_suite_layernorm_bf16_rowwise_v1",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["layernorm_bf16"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5)
        # Same parameter draws, in the same order, as the reference.
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(hidden))
            self.norm.bias.copy_(0.1 * torch.randn(hidden))

    def forward(self, x):
        return _ext.layernorm_bf16(x, self.norm.weight, self.norm.bias, self.norm.eps)
