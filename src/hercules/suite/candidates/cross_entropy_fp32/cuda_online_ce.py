"""CUDA candidate: per-token cross-entropy in one pass per row: a block reads its row of logits
once (float4 loads) keeping a running (max, sum of exp) pair, then writes
logsumexp - logit[target]. Eager's log_softmax writes and re-reads the whole (4096, 8192) matrix.

Targets equal to ignore_index (-100) give 0, as ``F.cross_entropy(reduction="none")`` does; a
target outside [0, vocab) gives NaN rather than reading out of bounds.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>

namespace {

constexpr int THREADS = 256;

__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
    const float mn = fmaxf(m, m2);
    if (mn == -INFINITY) return;
    s = s * __expf(m - mn) + s2 * __expf(m2 - mn);
    m = mn;
}

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

template <bool VEC>
__global__ void __launch_bounds__(THREADS) cross_entropy_kernel(
        const float* __restrict__ logits, const int64_t* __restrict__ targets, float* __restrict__ loss,
        int64_t n_cols, int64_t ignore_index) {
    const int64_t row = blockIdx.x;
    const float* xr = logits + row * n_cols;
    float m = -INFINITY, s = 0.f;
    if (VEC) {
        const float4* xv = reinterpret_cast<const float4*>(xr);
        const int64_t nv = n_cols / 4;
#pragma unroll 4
        for (int64_t i = threadIdx.x; i < nv; i += THREADS) {
            const float4 v = __ldg(xv + i);
            const float mn = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
            if (mn != -INFINITY) {
                s = s * __expf(m - mn) + __expf(v.x - mn) + __expf(v.y - mn) + __expf(v.z - mn) + __expf(v.w - mn);
                m = mn;
            }
        }
    } else {
        for (int64_t i = threadIdx.x; i < n_cols; i += THREADS) combine(m, s, __ldg(xr + i), 1.f);
    }
    block_reduce_ms(m, s);
    if (threadIdx.x == 0) {
        const int64_t t = targets[row];
        float out;
        if (t == ignore_index) {
            out = 0.f;
        } else if (t < 0 || t >= n_cols) {
            out = NAN;
        } else {
            out = (m + logf(s)) - xr[t];
        }
        loss[row] = out;
    }
}

}  // namespace

torch::Tensor cross_entropy_rows(torch::Tensor logits, torch::Tensor targets, int64_t ignore_index) {
    TORCH_CHECK(logits.is_cuda() && targets.is_cuda(), "cross_entropy_rows: CUDA tensors expected");
    TORCH_CHECK(logits.scalar_type() == at::kFloat, "cross_entropy_rows: logits must be float32");
    TORCH_CHECK(targets.scalar_type() == at::kLong, "cross_entropy_rows: targets must be int64");
    TORCH_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0),
                "cross_entropy_rows: expected logits (N, C) and targets (N,)");
    auto lc = logits.contiguous();
    auto tc = targets.contiguous();
    const int64_t n_rows = lc.size(0), n_cols = lc.size(1);
    auto loss = torch::empty({n_rows}, lc.options());
    if (n_rows == 0) return loss;
    TORCH_CHECK(n_cols > 0, "cross_entropy_rows: no classes");
    TORCH_CHECK(n_rows <= 2147483647LL, "cross_entropy_rows: too many rows");
    const float* lp = lc.data_ptr<float>();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const bool vec_ok = n_cols % 4 == 0 && reinterpret_cast<uintptr_t>(lp) % 16 == 0;
    const dim3 grid(static_cast<unsigned>(n_rows));
    if (vec_ok) {
        cross_entropy_kernel<true><<<grid, THREADS, 0, stream>>>(
            lp, tc.data_ptr<int64_t>(), loss.data_ptr<float>(), n_cols, ignore_index);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    } else {
        cross_entropy_kernel<false><<<grid, THREADS, 0, stream>>>(
            lp, tc.data_ptr<int64_t>(), loss.data_ptr<float>(), n_cols, ignore_index);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return loss;
}
"""

CPP_SRC = "torch::Tensor cross_entropy_rows(torch::Tensor logits, torch::Tensor targets, int64_t ignore_index);"

_ext = load_inline(
    name="hercules_suite_cross_entropy_fp32_online_v1",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["cross_entropy_rows"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)

IGNORE_INDEX = -100


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, targets):
        return _ext.cross_entropy_rows(logits, targets, IGNORE_INDEX)
