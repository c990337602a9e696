"""CUDA candidate: row sums with one warp per row (eight rows per block), 16-byte loads, four
independent loads in flight per lane, and a shuffle reduction: the memory-bound optimum is one
read of the matrix (64 MiB) and a 64 KiB write.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>

namespace {

constexpr int WARPS = 8;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

template <bool VEC>
__global__ void __launch_bounds__(WARPS * 32) row_sum_kernel(
        const float* __restrict__ x, float* __restrict__ out, int64_t n_rows, int64_t n_cols) {
    const int lane = threadIdx.x & 31;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * WARPS + (threadIdx.x >> 5);
    if (row >= n_rows) return;
    const float* xr = x + row * n_cols;
    float acc = 0.f;
    if (VEC) {
        const float4* xv = reinterpret_cast<const float4*>(xr);
        const int64_t nv = n_cols / 4;
#pragma unroll 4
        for (int64_t i = lane; i < nv; i += 32) {
            const float4 v = __ldg(xv + i);
            acc += (v.x + v.y) + (v.z + v.w);
        }
    } else {
        for (int64_t i = lane; i < n_cols; i += 32) acc += __ldg(xr + i);
    }
    acc = warp_sum(acc);
    if (lane == 0) out[row] = acc;
}

}  // namespace

torch::Tensor row_sum(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "row_sum: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "row_sum: x must be float32");
    TORCH_CHECK(x.dim() >= 1, "row_sum: x must have a last dimension");
    auto xc = x.contiguous();
    const int64_t n_cols = xc.size(-1);
    auto out_sizes = xc.sizes().vec();
    out_sizes.pop_back();
    auto out = torch::empty(out_sizes, xc.options());
    const int64_t n_rows = out.numel();
    if (n_rows == 0) return out;
    if (n_cols == 0) return out.zero_();
    const float* xp = xc.data_ptr<float>();
    float* op = out.data_ptr<float>();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int64_t blocks = (n_rows + WARPS - 1) / WARPS;
    TORCH_CHECK(blocks <= 2147483647LL, "row_sum: too many rows");
    const bool vec_ok = n_cols % 4 == 0 && reinterpret_cast<uintptr_t>(xp) % 16 == 0;
    if (vec_ok) {
        row_sum_kernel<true><<<static_cast<unsigned>(blocks), WARPS * 32, 0, stream>>>(xp, op, n_rows, n_cols);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    } else {
        row_sum_kernel<false><<<static_cast<unsigned>(blocks), WARPS * 32, 0, stream>>>(xp, op, n_rows, n_cols);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

CPP_SRC = "torch::Tensor row_sum(torch::Tensor x);"

_ext = load_inline(
    name="hercules_suite_row_sum_fp32_warp_v1",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["row_sum"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.row_sum(x)
