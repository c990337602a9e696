"""CUDA C++ kernel templates, compiled at run time with load_inline.

Each template is a ``string.Template`` source with its parameters (threads, vector width, split
count, ...) and the region's fixed sizes substituted as compile-time constants; ``${ID}`` makes
the names of one parameter point unique so several points share one module (one nvcc run).

Numerics: fp32 accumulation everywhere, and the reference's rounding points are reproduced
(``static_cast<T>`` where PyTorch rounds to the model dtype), so results track the PyTorch
reference closely in bf16/fp16.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from string import Template as S
from typing import Any

import torch

from ..reference import split_qkv
from ..regions import Region, dtype_from_name
from . import cuda_build
from .base import Candidate, Requirements, Template, Tickets, grid

# ---------------------------------------------------------------------------------------------
# sources

ADD_RMSNORM = S(r"""
namespace hercules_k {
__global__ void __launch_bounds__(${THREADS}) add_rmsnorm_k_${ID}(
    const ${T}* __restrict__ x, const ${T}* __restrict__ r, const ${T}* __restrict__ w,
    ${T}* __restrict__ out, ${T}* __restrict__ rout,
    int64_t sx, int64_t sr, int64_t so, int64_t sro, int n, float eps) {
  using T = ${T};
  constexpr int THREADS = ${THREADS};
  constexpr int VEC = ${VEC};
  constexpr int ITEMS = ${ITEMS};
  using V = Vec<T, VEC>;
  const int row = blockIdx.x;
  const T* xr = x + row * sx;
  const T* rr = r + row * sr;
  T* orow = out + row * so;
  T* rorow = rout + row * sro;
  float hv[ITEMS][VEC];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int col = (i * THREADS + static_cast<int>(threadIdx.x)) * VEC;
    if (col < n) {
      const V xv = *reinterpret_cast<const V*>(xr + col);
      const V rv = *reinterpret_cast<const V*>(rr + col);
      V hvec;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const T h = static_cast<T>(static_cast<float>(rv.v[j]) + static_cast<float>(xv.v[j]));
        hvec.v[j] = h;
        const float hf = static_cast<float>(h);
        hv[i][j] = hf;
        ss += hf * hf;
      }
      *reinterpret_cast<V*>(rorow + col) = hvec;
    }
  }
  ss = block_sum<THREADS>(ss);
  const float rstd = rsqrtf(ss / static_cast<float>(n) + eps);
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int col = (i * THREADS + static_cast<int>(threadIdx.x)) * VEC;
    if (col < n) {
      const V wv = *reinterpret_cast<const V*>(w + col);
      V ov;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const T nrm = static_cast<T>(hv[i][j] * rstd);
        ov.v[j] = static_cast<T>(static_cast<float>(wv.v[j]) * static_cast<float>(nrm));
      }
      *reinterpret_cast<V*>(orow + col) = ov;
    }
  }
}
}  // namespace hercules_k

std::vector<at::Tensor> add_rmsnorm_${ID}(at::Tensor x, at::Tensor r, at::Tensor w, double eps) {
  using T = ${T};
  constexpr int VEC = ${VEC};
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && r.dim() == 2 && w.dim() == 1, "add_rmsnorm: expects x[B,H], r[B,H], w[H] on CUDA");
  TORCH_CHECK(x.scalar_type() == ${ST} && r.scalar_type() == ${ST} && w.scalar_type() == ${ST}, "add_rmsnorm: dtype mismatch");
  TORCH_CHECK(x.size(1) == ${N} && r.size(1) == ${N} && w.size(0) == ${N}, "add_rmsnorm: built for hidden size ${N}");
  TORCH_CHECK(x.stride(1) == 1 && r.stride(1) == 1 && w.is_contiguous(), "add_rmsnorm: last dim must be contiguous");
  TORCH_CHECK(x.stride(0) % VEC == 0 && r.stride(0) % VEC == 0, "add_rmsnorm: row stride not a multiple of VEC");
  TORCH_CHECK(hercules_k::aligned_to(x.data_ptr(), VEC * sizeof(T)) && hercules_k::aligned_to(r.data_ptr(), VEC * sizeof(T)) &&
              hercules_k::aligned_to(w.data_ptr(), VEC * sizeof(T)), "add_rmsnorm: misaligned pointer");
  const int64_t B = x.size(0);
  auto out = at::empty({B, ${N}}, x.options());
  auto rout = at::empty({B, ${N}}, x.options());
  if (B == 0) return {out, rout};
  const c10::cuda::CUDAGuard guard(x.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  hercules_k::add_rmsnorm_k_${ID}<<<static_cast<unsigned>(B), ${THREADS}, 0, stream>>>(
      x.data_ptr<T>(), r.data_ptr<T>(), w.data_ptr<T>(), out.data_ptr<T>(), rout.data_ptr<T>(),
      x.stride(0), r.stride(0), out.stride(0), rout.stride(0), ${N}, static_cast<float>(eps));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {out, rout};
}
""")

SILU_MUL = S(r"""
namespace hercules_k {
__global__ void __launch_bounds__(${THREADS}) silu_mul_k_${ID}(
    const ${T}* __restrict__ gu, ${T}* __restrict__ out, int64_t sg, int64_t so, int inter) {
  using T = ${T};
  constexpr int THREADS = ${THREADS};
  constexpr int VEC = ${VEC};
  using V = Vec<T, VEC>;
  const int row = blockIdx.y;
  const int col = (static_cast<int>(blockIdx.x) * THREADS + static_cast<int>(threadIdx.x)) * VEC;
  if (col >= inter) return;
  const V gv = *reinterpret_cast<const V*>(gu + row * sg + col);
  const V uv = *reinterpret_cast<const V*>(gu + row * sg + inter + col);
  V ov;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    const float g = static_cast<float>(gv.v[j]);
    const T s = static_cast<T>(g / (1.f + ${EXP}(-g)));
    ov.v[j] = static_cast<T>(static_cast<float>(s) * static_cast<float>(uv.v[j]));
  }
  *reinterpret_cast<V*>(out + row * so + col) = ov;
}
}  // namespace hercules_k

at::Tensor silu_mul_${ID}(at::Tensor gu) {
  using T = ${T};
  constexpr int VEC = ${VEC};
  TORCH_CHECK(gu.is_cuda() && gu.dim() == 2 && gu.size(1) == 2 * ${I}, "silu_mul: expects gu[B, 2*${I}] on CUDA");
  TORCH_CHECK(gu.scalar_type() == ${ST}, "silu_mul: dtype mismatch");
  TORCH_CHECK(gu.stride(1) == 1 && gu.stride(0) % VEC == 0, "silu_mul: layout");
  TORCH_CHECK(hercules_k::aligned_to(gu.data_ptr(), VEC * sizeof(T)), "silu_mul: misaligned pointer");
  const int64_t B = gu.size(0);
  auto out = at::empty({B, ${I}}, gu.options());
  if (B == 0) return out;
  const c10::cuda::CUDAGuard guard(gu.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const unsigned blocks = static_cast<unsigned>((${I} / VEC + ${THREADS} - 1) / ${THREADS});
  dim3 grid(blocks, static_cast<unsigned>(B));
  hercules_k::silu_mul_k_${ID}<<<grid, ${THREADS}, 0, stream>>>(gu.data_ptr<T>(), out.data_ptr<T>(), gu.stride(0), out.stride(0), ${I});
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
""")

QK_ROTARY = S(r"""
namespace hercules_k {
// One warp per head; lane l holds elements d = l + 32*j (j < HD/32). The rotate-half partner of
// d is d + HD/2 (mod HD), i.e. j + EPL/2 (mod EPL) in the same lane: no shuffles for the rotation.
__global__ void __launch_bounds__(${WARPS} * 32) qk_rotary_k_${ID}(
    const ${T}* __restrict__ q, const ${T}* __restrict__ k, const ${T}* __restrict__ cs,
    const ${T}* __restrict__ sn, const ${T}* __restrict__ qw, const ${T}* __restrict__ kw,
    ${T}* __restrict__ qo, ${T}* __restrict__ ko, int batch,
    int64_t sqb, int64_t sqh, int64_t skb, int64_t skh, float eps) {
  using T = ${T};
  constexpr int HD = ${HD};
  constexpr int EPL = HD / 32;
  constexpr int NQ = ${NQ};
  constexpr int NKV = ${NKV};
  constexpr int WARPS = ${WARPS};
  constexpr bool NORM = ${HAS_NORM};
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int gh = static_cast<int>(blockIdx.x) * WARPS + warp;
  if (gh >= batch * (NQ + NKV)) return;  // whole warp leaves together
  const int b = gh / (NQ + NKV);
  const int h = gh % (NQ + NKV);
  const T* src;
  T* dst;
  const T* w;
  if (h < NQ) {
    src = q + b * sqb + h * sqh;
    dst = qo + (static_cast<int64_t>(b) * NQ + h) * HD;
    w = qw;
  } else {
    src = k + b * skb + (h - NQ) * skh;
    dst = ko + (static_cast<int64_t>(b) * NKV + (h - NQ)) * HD;
    w = kw;
  }
  float x[EPL];
#pragma unroll
  for (int j = 0; j < EPL; ++j) x[j] = static_cast<float>(src[lane + 32 * j]);
  if constexpr (NORM) {
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < EPL; ++j) ss += x[j] * x[j];
    ss = warp_sum(ss);
    const float rstd = rsqrtf(ss / static_cast<float>(HD) + eps);
#pragma unroll
    for (int j = 0; j < EPL; ++j) {
      const T nrm = static_cast<T>(x[j] * rstd);
      x[j] = static_cast<float>(static_cast<T>(static_cast<float>(w[lane + 32 * j]) * static_cast<float>(nrm)));
    }
  }
#pragma unroll
  for (int j = 0; j < EPL; ++j) {
    const int d = lane + 32 * j;
    const float p = x[(j + EPL / 2) % EPL];
    const float sgn = (j < EPL / 2) ? -1.f : 1.f;
    const T a = static_cast<T>(x[j] * static_cast<float>(cs[d]));
    const T bb = static_cast<T>(sgn * p * static_cast<float>(sn[d]));
    dst[d] = static_cast<T>(static_cast<float>(a) + static_cast<float>(bb));
  }
}
}  // namespace hercules_k

std::vector<at::Tensor> qk_rotary_${ID}(at::Tensor q, at::Tensor k, at::Tensor cs, at::Tensor sn,
                                         at::Tensor qw, at::Tensor kw, double eps) {
  using T = ${T};
  TORCH_CHECK(q.is_cuda() && q.dim() == 3 && k.dim() == 3, "qk_rotary: expects q[B,NQ,HD], k[B,NKV,HD] on CUDA");
  TORCH_CHECK(q.size(1) == ${NQ} && k.size(1) == ${NKV} && q.size(2) == ${HD} && k.size(2) == ${HD}, "qk_rotary: built for other head counts");
  TORCH_CHECK(q.scalar_type() == ${ST} && k.scalar_type() == ${ST} && cs.scalar_type() == ${ST} && sn.scalar_type() == ${ST}, "qk_rotary: dtype mismatch");
  TORCH_CHECK(q.stride(2) == 1 && k.stride(2) == 1 && cs.is_contiguous() && sn.is_contiguous() && cs.numel() == ${HD}, "qk_rotary: layout");
  if (${HAS_NORM}) {
    TORCH_CHECK(qw.is_contiguous() && kw.is_contiguous() && qw.numel() == ${HD} && kw.numel() == ${HD} && qw.scalar_type() == ${ST} && kw.scalar_type() == ${ST}, "qk_rotary: norm weights");
  }
  const int64_t B = q.size(0);
  auto qo = at::empty({B, ${NQ}, ${HD}}, q.options());
  auto ko = at::empty({B, ${NKV}, ${HD}}, k.options());
  if (B == 0) return {qo, ko};
  const c10::cuda::CUDAGuard guard(q.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t heads = B * (${NQ} + ${NKV});
  const unsigned blocks = static_cast<unsigned>((heads + ${WARPS} - 1) / ${WARPS});
  hercules_k::qk_rotary_k_${ID}<<<blocks, ${WARPS} * 32, 0, stream>>>(
      q.data_ptr<T>(), k.data_ptr<T>(), cs.data_ptr<T>(), sn.data_ptr<T>(), qw.data_ptr<T>(), kw.data_ptr<T>(),
      qo.data_ptr<T>(), ko.data_ptr<T>(), static_cast<int>(B), q.stride(0), q.stride(1), k.stride(0), k.stride(1),
      static_cast<float>(eps));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {qo, ko};
}
""")

ATTENTION = S(r"""
namespace hercules_k {
// Flash-decoding, grouped-query: block (b*NKV + kv head, split). Each warp walks the split's cache
// positions t = lo + warp, lo + warp + WARPS, ...; a lane holds EPL = HD/32 consecutive elements
// of each of the G query heads sharing the kv head, so K/V rows are read once for the group.
__global__ void __launch_bounds__(${WARPS} * 32) attn_split_k_${ID}(
    const ${T}* __restrict__ q, const ${T}* __restrict__ kc, const ${T}* __restrict__ vc,
    const int64_t* __restrict__ pos, float* __restrict__ op, float* __restrict__ pm, float* __restrict__ pl,
    ${T}* __restrict__ out, int64_t sqb, int64_t sqh, int64_t skb, int64_t skh, int64_t sks, int64_t svb,
    int64_t svh, int64_t svs, float scale) {
  using T = ${T};
  constexpr int HD = ${HD};
  constexpr int G = ${G};
  constexpr int NKV = ${NKV};
  constexpr int WARPS = ${WARPS};
  constexpr int SPLITS = ${SPLITS};
  constexpr int EPL = HD / 32;
  using V = Vec<T, EPL>;
  const int b = blockIdx.x / NKV;
  const int hk = blockIdx.x % NKV;
  const int split = blockIdx.y;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int length = static_cast<int>(pos[0]) + 1;
  const int chunk = (length + SPLITS - 1) / SPLITS;
  const int lo = split * chunk;
  const int hi = min(lo + chunk, length);

  float qr[G][EPL];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const V qv = *reinterpret_cast<const V*>(q + b * sqb + (hk * G + g) * sqh + lane * EPL);
#pragma unroll
    for (int j = 0; j < EPL; ++j) qr[g][j] = static_cast<float>(qv.v[j]) * scale;
  }
  float m[G], l[G], acc[G][EPL];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int j = 0; j < EPL; ++j) acc[g][j] = 0.f;
  }
  const T* kbase = kc + b * skb + hk * skh + lane * EPL;
  const T* vbase = vc + b * svb + hk * svh + lane * EPL;
  for (int t = lo + warp; t < hi; t += WARPS) {
    const V kv = *reinterpret_cast<const V*>(kbase + static_cast<int64_t>(t) * sks);
    const V vv = *reinterpret_cast<const V*>(vbase + static_cast<int64_t>(t) * svs);
    float kf[EPL], vf[EPL];
#pragma unroll
    for (int j = 0; j < EPL; ++j) {
      kf[j] = static_cast<float>(kv.v[j]);
      vf[j] = static_cast<float>(vv.v[j]);
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float s = 0.f;
#pragma unroll
      for (int j = 0; j < EPL; ++j) s += qr[g][j] * kf[j];
      s = warp_sum(s);
      const float mn = fmaxf(m[g], s);
      const float alpha = expf(m[g] - mn);
      const float p = expf(s - mn);
      l[g] = l[g] * alpha + p;
#pragma unroll
      for (int j = 0; j < EPL; ++j) acc[g][j] = acc[g][j] * alpha + p * vf[j];
      m[g] = mn;
    }
  }
  __shared__ float sm_m[WARPS][G];
  __shared__ float sm_l[WARPS][G];
  __shared__ float sm_acc[WARPS][G][HD];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (lane == 0) {
      sm_m[warp][g] = m[g];
      sm_l[warp][g] = l[g];
    }
#pragma unroll
    for (int j = 0; j < EPL; ++j) sm_acc[warp][g][lane * EPL + j] = acc[g][j];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * HD; idx += WARPS * 32) {
    const int g = idx / HD;
    const int d = idx % HD;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) mx = fmaxf(mx, sm_m[w][g]);
    float num = 0.f, den = 0.f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int w = 0; w < WARPS; ++w) {
        const float mw = sm_m[w][g];
        if (mw != -INFINITY) {
          const float e = expf(mw - mx);
          num += e * sm_acc[w][g][d];
          den += e * sm_l[w][g];
        }
      }
    }
    if constexpr (SPLITS == 1) {  // one split: the result itself, no combine launch (same o / l)
      out[(static_cast<int64_t>(b * NKV + hk) * G + g) * HD + d] = static_cast<T>(num / den);
    } else {
      const int64_t row = (static_cast<int64_t>(b * NKV + hk) * G + g) * SPLITS + split;
      op[row * HD + d] = num;
      if (d == 0) {
        pm[row] = mx;
        pl[row] = den;
      }
    }
  }
}

__global__ void attn_combine_k_${ID}(const float* __restrict__ op, const float* __restrict__ pm,
                                     const float* __restrict__ pl, ${T}* __restrict__ out) {
  using T = ${T};
  constexpr int HD = ${HD};
  constexpr int SPLITS = ${SPLITS};
  const int64_t row = blockIdx.x;  // b * NQ + head
  const int d = threadIdx.x;
  float mx = -INFINITY;
#pragma unroll
  for (int s = 0; s < SPLITS; ++s) mx = fmaxf(mx, pm[row * SPLITS + s]);
  float num = 0.f, den = 0.f;
#pragma unroll
  for (int s = 0; s < SPLITS; ++s) {
    const float ms = pm[row * SPLITS + s];
    if (ms != -INFINITY) {
      const float e = expf(ms - mx);
      num += e * op[(row * SPLITS + s) * HD + d];
      den += e * pl[row * SPLITS + s];
    }
  }
  out[row * HD + d] = static_cast<T>(num / den);
}
}  // namespace hercules_k

at::Tensor attention_${ID}(at::Tensor q, at::Tensor kc, at::Tensor vc, at::Tensor pos, double scale) {
  using T = ${T};
  constexpr int EPL = ${HD} / 32;
  TORCH_CHECK(q.is_cuda() && q.dim() == 3 && kc.dim() == 4 && vc.dim() == 4, "attention: expects q[B,NQ,HD], caches[B,NKV,C,HD]");
  TORCH_CHECK(q.size(1) == ${NKV} * ${G} && q.size(2) == ${HD} && kc.size(1) == ${NKV} && kc.size(3) == ${HD} &&
              vc.size(1) == ${NKV} && vc.size(3) == ${HD}, "attention: built for other head counts");
  TORCH_CHECK(q.scalar_type() == ${ST} && kc.scalar_type() == ${ST} && vc.scalar_type() == ${ST}, "attention: dtype mismatch");
  TORCH_CHECK(pos.scalar_type() == at::kLong && pos.is_cuda() && pos.numel() >= 1, "attention: pos must be int64 on CUDA");
  TORCH_CHECK(q.stride(2) == 1 && kc.stride(3) == 1 && vc.stride(3) == 1, "attention: last dim must be contiguous");
  TORCH_CHECK(q.stride(1) % EPL == 0 && q.stride(0) % EPL == 0 && kc.stride(2) % EPL == 0 && vc.stride(2) % EPL == 0 &&
              kc.stride(1) % EPL == 0 && vc.stride(1) % EPL == 0 && kc.stride(0) % EPL == 0 && vc.stride(0) % EPL == 0,
              "attention: strides not multiples of the vector width");
  TORCH_CHECK(hercules_k::aligned_to(q.data_ptr(), EPL * sizeof(T)) && hercules_k::aligned_to(kc.data_ptr(), EPL * sizeof(T)) &&
              hercules_k::aligned_to(vc.data_ptr(), EPL * sizeof(T)), "attention: misaligned pointer");
  const int64_t B = q.size(0);
  const int64_t rows = B * ${NKV} * ${G};
  auto fopts = q.options().dtype(at::kFloat);
  constexpr bool kDirect = ${SPLITS} == 1;  // one split writes the output itself: no combine launch
  auto op = at::empty({kDirect ? 0 : rows * ${SPLITS}, ${HD}}, fopts);
  auto pm = at::empty({kDirect ? 0 : rows * ${SPLITS}}, fopts);
  auto pl = at::empty({kDirect ? 0 : rows * ${SPLITS}}, fopts);
  auto out = at::empty({B, ${NKV} * ${G}, ${HD}}, q.options());
  if (B == 0) return out;
  const c10::cuda::CUDAGuard guard(q.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  dim3 grid(static_cast<unsigned>(B * ${NKV}), ${SPLITS});
  hercules_k::attn_split_k_${ID}<<<grid, ${WARPS} * 32, 0, stream>>>(
      q.data_ptr<T>(), kc.data_ptr<T>(), vc.data_ptr<T>(), pos.data_ptr<int64_t>(), op.data_ptr<float>(),
      pm.data_ptr<float>(), pl.data_ptr<float>(), out.data_ptr<T>(), q.stride(0), q.stride(1), kc.stride(0),
      kc.stride(1), kc.stride(2), vc.stride(0), vc.stride(1), vc.stride(2), static_cast<float>(scale));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (!kDirect) {
    hercules_k::attn_combine_k_${ID}<<<static_cast<unsigned>(rows), ${HD}, 0, stream>>>(
        op.data_ptr<float>(), pm.data_ptr<float>(), pl.data_ptr<float>(), out.data_ptr<T>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return out;
}
""")

# The warp-per-output-rows product both GEMV kernels share (from the accumulators to the stores);
# @XROW@ is where a warp reads its batch rows (global memory, or the normalised rows in shared memory).
WARP_GEMV = r"""
  float acc[NW][MB];
#pragma unroll
  for (int q = 0; q < NW; ++q)
#pragma unroll
    for (int b = 0; b < MB; ++b) acc[q][b] = 0.f;
#pragma unroll ${UNROLL}
  for (int k = lane * VEC; k < K; k += 32 * VEC) {
    float xv[MB][VEC];
#pragma unroll
    for (int b = 0; b < MB; ++b) {
      if (b < m) {
        const V t = *reinterpret_cast<const V*>(@XROW@);
#pragma unroll
        for (int j = 0; j < VEC; ++j) xv[b][j] = static_cast<float>(t.v[j]);
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) xv[b][j] = 0.f;
      }
    }
#pragma unroll
    for (int q = 0; q < NW; ++q) {
      const int out_row = n0 + (q % ROWS);
      if (out_row < OUT) {
        const int64_t wrow = q < ROWS ? out_row : out_row + I;
        const uint4 raw = __ldg(reinterpret_cast<const uint4*>(w + wrow * K + k));
        const V wv = *reinterpret_cast<const V*>(&raw);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float wf = static_cast<float>(wv.v[j]);
#pragma unroll
          for (int b = 0; b < MB; ++b) acc[q][b] = fmaf(wf, xv[b][j], acc[q][b]);
        }
      }
    }
  }
#pragma unroll
  for (int q = 0; q < NW; ++q)
#pragma unroll
    for (int b = 0; b < MB; ++b) acc[q][b] = warp_sum(acc[q][b]);
  if (lane != 0) return;
#pragma unroll
  for (int q = 0; q < ROWS; ++q) {
    const int n = n0 + q;
    if (n >= OUT) break;
#pragma unroll
    for (int b = 0; b < MB; ++b) {
      if (b >= m) break;
      if constexpr (SWIGLU) {
        const float g = static_cast<float>(static_cast<T>(acc[q][b]));
        const float u = static_cast<float>(static_cast<T>(acc[ROWS + q][b]));
        const T sg = static_cast<T>(g / (1.f + expf(-g)));
        y[b * sy + n] = static_cast<T>(static_cast<float>(sg) * u);
      } else {
        y[b * sy + n] = static_cast<T>(acc[q][b]);
      }
    }
  }
}
"""

GEMV = S(r"""
namespace hercules_k {
// y[m, n] = sum_k x[m, k] * w[n, k] for the few rows m of a decode step. One warp owns ROWS output
// rows: it streams those weight rows once with 16-byte loads (UNROLL loads in flight per row) and
// reads the x rows, which every warp shares, through the cache. fp32 accumulation, one rounding
// to T at the end as F.linear does. SWIGLU: the warp also owns the matching up rows (n + I) and
// writes silu(gate) * up, rounded where PyTorch rounds (gate, up, silu, product).
__global__ void __launch_bounds__(${WARPS} * 32) ${FN}_k_${ID}(
    const ${T}* __restrict__ x, const ${T}* __restrict__ w, ${T}* __restrict__ y,
    int64_t sx, int64_t sy, int m) {
  using T = ${T};
  constexpr int K = ${K};
  constexpr int VEC = ${VEC};
  constexpr int ROWS = ${ROWS};
  constexpr int MB = ${MB};
  constexpr bool SWIGLU = ${SWIGLU};
  constexpr int I = ${I};
  constexpr int OUT = ${OUT};
  constexpr int NW = SWIGLU ? 2 * ROWS : ROWS;
  using V = Vec<T, VEC>;
  const int lane = threadIdx.x & 31;
  const int n0 = (static_cast<int>(blockIdx.x) * ${WARPS} + static_cast<int>(threadIdx.x >> 5)) * ROWS;
  if (n0 >= OUT) return;
""" + WARP_GEMV.replace("@XROW@", "x + b * sx + k") + r"""}  // namespace hercules_k

at::Tensor ${FN}_${ID}(at::Tensor x, at::Tensor w) {
  using T = ${T};
  constexpr int VEC = ${VEC};
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && w.dim() == 2, "${FN}: expects x[B,K], w[N,K] on CUDA");
  TORCH_CHECK(x.scalar_type() == ${ST} && w.scalar_type() == ${ST}, "${FN}: dtype mismatch");
  TORCH_CHECK(x.size(1) == ${K} && w.size(1) == ${K} && w.size(0) == ${N}, "${FN}: built for K=${K}, N=${N}");
  TORCH_CHECK(x.size(0) <= ${MB}, "${FN}: built for at most ${MB} rows");
  TORCH_CHECK(x.stride(1) == 1 && x.stride(0) % VEC == 0 && w.is_contiguous(), "${FN}: layout");
  TORCH_CHECK(hercules_k::aligned_to(x.data_ptr(), 16) && hercules_k::aligned_to(w.data_ptr(), 16),
              "${FN}: misaligned pointer");
  const int64_t B = x.size(0);
  auto y = at::empty({B, ${OUT}}, x.options());
  if (B == 0) return y;
  const c10::cuda::CUDAGuard guard(x.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  constexpr int per_block = ${WARPS} * ${ROWS};
  const unsigned blocks = static_cast<unsigned>((${OUT} + per_block - 1) / per_block);
  hercules_k::${FN}_k_${ID}<<<blocks, ${WARPS} * 32, 0, stream>>>(
      x.data_ptr<T>(), w.data_ptr<T>(), y.data_ptr<T>(), x.stride(0), y.stride(0), static_cast<int>(B));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
""")

NORM_GEMV = S(r"""
namespace hercules_k {
// The residual add + RMSNorm folded into the projection after it. Each block rebuilds the
// normalised rows in shared memory (h = residual + x rounded to T as HF adds; T(w * T(h * rstd)))
// from the few-KB hidden rows, block 0 also writes h as the next residual; then each warp owns ROWS
// output rows as in the plain GEMV, reading the normalised rows from shared memory.
__global__ void __launch_bounds__(${WARPS} * 32) ${FN}_k_${ID}(
    const ${T}* __restrict__ x, const ${T}* __restrict__ r, const ${T}* __restrict__ nw,
    const ${T}* __restrict__ w, ${T}* __restrict__ y, ${T}* __restrict__ hout,
    int64_t sx, int64_t sr, int64_t sy, int64_t sh, int m, float eps) {
  using T = ${T};
  constexpr int K = ${K};
  constexpr int VEC = ${VEC};
  constexpr int ROWS = ${ROWS};
  constexpr int MB = ${MB};
  constexpr int THREADS = ${WARPS} * 32;
  constexpr bool SWIGLU = ${SWIGLU};
  constexpr int I = ${I};
  constexpr int OUT = ${OUT};
  constexpr int NW = SWIGLU ? 2 * ROWS : ROWS;
  using V = Vec<T, VEC>;
  __shared__ __align__(16) T xs[MB * K];
  const int tid = static_cast<int>(threadIdx.x);
  for (int b = 0; b < m; ++b) {
    float ss = 0.f;
    for (int k = tid * VEC; k < K; k += THREADS * VEC) {
      const V xv = *reinterpret_cast<const V*>(x + b * sx + k);
      const V rv = *reinterpret_cast<const V*>(r + b * sr + k);
      V hv;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        hv.v[j] = static_cast<T>(static_cast<float>(rv.v[j]) + static_cast<float>(xv.v[j]));
        const float hf = static_cast<float>(hv.v[j]);
        ss += hf * hf;
      }
      *reinterpret_cast<V*>(xs + b * K + k) = hv;
      if (blockIdx.x == 0) *reinterpret_cast<V*>(hout + b * sh + k) = hv;
    }
    ss = block_sum<THREADS>(ss);
    __syncthreads();  // block_sum's scratch is reused by the next row
    const float rstd = rsqrtf(ss / static_cast<float>(K) + eps);
    for (int k = tid * VEC; k < K; k += THREADS * VEC) {
      V hv = *reinterpret_cast<const V*>(xs + b * K + k);
      const V wv = *reinterpret_cast<const V*>(nw + k);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const T nrm = static_cast<T>(static_cast<float>(hv.v[j]) * rstd);
        hv.v[j] = static_cast<T>(static_cast<float>(wv.v[j]) * static_cast<float>(nrm));
      }
      *reinterpret_cast<V*>(xs + b * K + k) = hv;
    }
  }
  __syncthreads();
  const int lane = tid & 31;
  const int n0 = (static_cast<int>(blockIdx.x) * ${WARPS} + (tid >> 5)) * ROWS;
  if (n0 >= OUT) return;
""" + WARP_GEMV.replace("@XROW@", "xs + b * K + k") + r"""}  // namespace hercules_k

std::vector<at::Tensor> ${FN}_${ID}(at::Tensor x, at::Tensor r, at::Tensor nw, double eps, at::Tensor w) {
  using T = ${T};
  constexpr int VEC = ${VEC};
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && r.dim() == 2 && nw.dim() == 1 && w.dim() == 2,
              "${FN}: expects x[B,K], residual[B,K], norm weight[K], w[N,K] on CUDA");
  TORCH_CHECK(x.scalar_type() == ${ST} && r.scalar_type() == ${ST} && nw.scalar_type() == ${ST} &&
              w.scalar_type() == ${ST}, "${FN}: dtype mismatch");
  TORCH_CHECK(x.size(1) == ${K} && r.size(1) == ${K} && nw.size(0) == ${K} && w.size(1) == ${K} && w.size(0) == ${N},
              "${FN}: built for K=${K}, N=${N}");
  TORCH_CHECK(x.size(0) <= ${MB} && r.size(0) == x.size(0), "${FN}: built for at most ${MB} rows");
  TORCH_CHECK(x.stride(1) == 1 && r.stride(1) == 1 && x.stride(0) % VEC == 0 && r.stride(0) % VEC == 0 &&
              nw.is_contiguous() && w.is_contiguous(), "${FN}: layout");
  TORCH_CHECK(hercules_k::aligned_to(x.data_ptr(), 16) && hercules_k::aligned_to(r.data_ptr(), 16) &&
              hercules_k::aligned_to(nw.data_ptr(), 16) && hercules_k::aligned_to(w.data_ptr(), 16),
              "${FN}: misaligned pointer");
  const int64_t B = x.size(0);
  auto y = at::empty({B, ${OUT}}, x.options());
  auto h = at::empty({B, ${K}}, x.options());
  if (B == 0) return {y, h};
  const c10::cuda::CUDAGuard guard(x.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  constexpr int per_block = ${WARPS} * ${ROWS};
  const unsigned blocks = static_cast<unsigned>((${OUT} + per_block - 1) / per_block);
  hercules_k::${FN}_k_${ID}<<<blocks, ${WARPS} * 32, 0, stream>>>(
      x.data_ptr<T>(), r.data_ptr<T>(), nw.data_ptr<T>(), w.data_ptr<T>(), y.data_ptr<T>(), h.data_ptr<T>(),
      x.stride(0), r.stride(0), y.stride(0), h.stride(0), static_cast<int>(B), static_cast<float>(eps));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {y, h};
}
""")

# ---------------------------------------------------------------------------------------------
# the GEMV kernels with split-K inside a block and / or a programmatic dependent launch
#
# KSPLIT > 1: the block's warps form row groups of KSPLIT warps; each warp of a group streams one
# K slice of the group's ROWS rows, and the group's first warp sums the slices' warp sums from
# shared memory in slice order (deterministic; no atomics, no second launch): more loads in flight
# for short, wide matrices such as o_proj and down_proj at batch 1.
# PDL: launched with cudaLaunchKernelEx and the programmatic-serialisation attribute (SM 9.0+), the
# kernel may start while the previous kernel in the stream runs; it prefetches its first weight
# chunks into L2 (weights are never written while decoding), then griddepcontrol.wait -- nothing
# else touches global memory before it -- and signals its dependents after the K loop.
# The points with KSPLIT 1 and PDL 0 render the sources above unchanged (cached modules load).

LAUNCH_HELPER = r"""
#ifndef HERCULES_K_LAUNCH
#define HERCULES_K_LAUNCH
namespace hercules_k {
template <typename... P, typename... A>
void launch(bool pdl, void (*kernel)(P...), dim3 grid, dim3 block, cudaStream_t stream, A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  C10_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, static_cast<P>(args)...));
}
}  // namespace hercules_k
#endif
"""

# the warp's K slice, and its row group's first output row
SPLIT_SETUP = r"""
  constexpr int KSPLIT = ${KSPLIT};
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int ks = warp % KSPLIT;  // K % (KSPLIT * VEC) == 0: slices start on a vector
  const int k_lo = ks * (K / KSPLIT);
  const int k_hi = k_lo + K / KSPLIT;
  const int n0 = (static_cast<int>(blockIdx.x) * (${WARPS} / KSPLIT) + warp / KSPLIT) * ROWS;
  const int lane = threadIdx.x & 31;
${PDL_WAIT}"""

PDL_WAIT = r"""  if (n0 < OUT) {
#pragma unroll
    for (int q = 0; q < NW; ++q) {
      const int out_row = n0 + (q % ROWS);
      const int64_t wrow = q < ROWS ? out_row : out_row + I;
      if (out_row < OUT && k_lo + lane * VEC < k_hi)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(w + wrow * K + k_lo + lane * VEC));
    }
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
"""

PDL_TRIGGER = r"""  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
"""

# replaces the single-warp tail "if (lane != 0) return;" of WARP_GEMV
SPLIT_TAIL = r"""${PDL_TRIGGER}  if constexpr (KSPLIT > 1) {
    __shared__ float red[${WARPS}][NW][MB];
    if (lane == 0) {
#pragma unroll
      for (int q = 0; q < NW; ++q)
#pragma unroll
        for (int b = 0; b < MB; ++b) red[warp][q][b] = acc[q][b];
    }
    __syncthreads();  // every warp gets here: whole blocks of rows (OUT % rows per block == 0)
    if (lane != 0 || ks != 0) return;
#pragma unroll
    for (int q = 0; q < NW; ++q)
#pragma unroll
      for (int b = 0; b < MB; ++b) {
        float t = 0.f;
#pragma unroll
        for (int j = 0; j < KSPLIT; ++j) t += red[warp + j][q][b];
        acc[q][b] = t;
      }
  } else {
    if (lane != 0) return;
  }
"""


def _edit(src: str, edits: list[tuple[str, str]]) -> str:
    """``src`` with each ``old`` (which must occur exactly once) replaced by ``new``."""
    for old, new in edits:
        if src.count(old) != 1:
            raise AssertionError(f"source edit matches {src.count(old)} times: {old[:70]!r}")
        src = src.replace(old, new)
    return src


_WARP_EDITS = [("for (int k = lane * VEC; k < K; k += 32 * VEC) {",
                "for (int k = k_lo + lane * VEC; k < k_hi; k += 32 * VEC) {"),
               ("  if (lane != 0) return;\n", SPLIT_TAIL)]
_HOST_EDITS = [("constexpr int per_block = ${WARPS} * ${ROWS};",
                "constexpr int per_block = ${WARPS} / ${KSPLIT} * ${ROWS};"),
               ("hercules_k::${FN}_k_${ID}<<<blocks, ${WARPS} * 32, 0, stream>>>(",
                "hercules_k::launch(${PDL}, hercules_k::${FN}_k_${ID}, dim3(blocks), dim3(${WARPS} * 32), stream,")]

GEMV_GENERAL = S(LAUNCH_HELPER + _edit(GEMV.template, _WARP_EDITS + _HOST_EDITS + [
    ("""  const int lane = threadIdx.x & 31;
  const int n0 = (static_cast<int>(blockIdx.x) * ${WARPS} + static_cast<int>(threadIdx.x >> 5)) * ROWS;
""", SPLIT_SETUP)]))

NORM_GEMV_GENERAL = S(LAUNCH_HELPER + _edit(NORM_GEMV.template, _WARP_EDITS + _HOST_EDITS + [
    ("  const int tid = static_cast<int>(threadIdx.x);\n",
     "  const int tid = static_cast<int>(threadIdx.x);\n" + SPLIT_SETUP),
    ("""  const int lane = tid & 31;
  const int n0 = (static_cast<int>(blockIdx.x) * ${WARPS} + (tid >> 5)) * ROWS;
""", "")]))

# o_proj / down_proj with the residual add + RMSNorm after it in the epilogue: lane 0 of each row
# group's warp stores residual + the rounded product as the new residual (instead of the product);
# the whole warp then takes a ticket, and the warp with the last one normalises the complete rows
# (read back from L2 in a fixed order) into y. Built on the KSPLIT / PDL source; the ticket is an
# int counter the last warp resets.
ADD_NORM_EPILOGUE = r"""  }  // lane 0
  __syncwarp();
  int ticket_no = 0;
  if (lane == 0) {
    __threadfence();  // this group's residual stores before its ticket
    ticket_no = atomicAdd(ticket, 1);
  }
  ticket_no = __shfl_sync(0xffffffffu, ticket_no, 0);
  if (ticket_no != (OUT + ROWS - 1) / ROWS - 1) return;
  __threadfence();  // every other group's stores are visible past this point
  for (int b = 0; b < m; ++b) {
    float ss = 0.f;
    for (int c = lane * VEC; c < OUT; c += 32 * VEC) {
      const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(hout + b * sh + c));
      const V hv = *reinterpret_cast<const V*>(&raw);
#pragma unroll
      for (int j = 0; j < VEC; ++j) ss += static_cast<float>(hv.v[j]) * static_cast<float>(hv.v[j]);
    }
    const float rstd = rsqrtf(warp_sum(ss) / static_cast<float>(OUT) + eps);
    for (int c = lane * VEC; c < OUT; c += 32 * VEC) {
      const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(hout + b * sh + c));
      const V hv = *reinterpret_cast<const V*>(&raw);
      const V wv = *reinterpret_cast<const V*>(nw + c);
      V o;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const T nrm = static_cast<T>(static_cast<float>(hv.v[j]) * rstd);
        o.v[j] = static_cast<T>(static_cast<float>(wv.v[j]) * static_cast<float>(nrm));
      }
      *reinterpret_cast<V*>(y + b * sy + c) = o;
    }
  }
  if (lane == 0) *ticket = 0;  // ready for the next call (launches on a stream are ordered)
}
"""

GEMV_ADD_NORM = S(_edit(GEMV_GENERAL.template, [
    ("""    int64_t sx, int64_t sy, int m) {""",
     """    int64_t sx, int64_t sy, int m, const ${T}* __restrict__ r, const ${T}* __restrict__ nw,
    ${T}* __restrict__ hout, int* __restrict__ ticket, int64_t sr, int64_t sh, float eps) {"""),
    # split-K: every lane of a group's first warp stays (the norm needs the whole warp), lane 0 sums
    ("    if (lane != 0 || ks != 0) return;\n", "    if (ks != 0) return;\n    if (lane == 0) {\n"),
    ("  } else {\n    if (lane != 0) return;\n  }\n", "    }\n  }\n  if (lane == 0) {\n"),
    ("        y[b * sy + n] = static_cast<T>(acc[q][b]);\n      }\n    }\n  }\n}\n",
     "        hout[b * sh + n] = static_cast<T>(static_cast<float>(r[b * sr + n]) +\n"
     "                                          static_cast<float>(static_cast<T>(acc[q][b])));\n      }\n    }\n  }\n"
     + ADD_NORM_EPILOGUE),
    ("at::Tensor ${FN}_${ID}(at::Tensor x, at::Tensor w) {",
     "std::vector<at::Tensor> ${FN}_${ID}(at::Tensor x, at::Tensor w, at::Tensor r, at::Tensor nw, double eps,\n"
     "                                   at::Tensor ticket) {"),
    ("  const int64_t B = x.size(0);\n",
     "  TORCH_CHECK(r.scalar_type() == ${ST} && nw.scalar_type() == ${ST} && r.dim() == 2 && r.size(0) == x.size(0) &&\n"
     "              r.size(1) == ${OUT} && r.stride(1) == 1 && nw.numel() == ${OUT} && nw.is_contiguous() &&\n"
     "              hercules_k::aligned_to(nw.data_ptr(), 16), \"${FN}: residual [B, ${OUT}], norm weight [${OUT}]\");\n"
     "  TORCH_CHECK(ticket.is_cuda() && ticket.scalar_type() == at::kInt && ticket.numel() >= 1, \"${FN}: ticket\");\n"
     "  const int64_t B = x.size(0);\n"),
    ("  if (B == 0) return y;\n", "  auto h = at::empty({B, ${OUT}}, x.options());\n  if (B == 0) return {y, h};\n"),
    ("x.data_ptr<T>(), w.data_ptr<T>(), y.data_ptr<T>(), x.stride(0), y.stride(0), static_cast<int>(B));",
     "x.data_ptr<T>(), w.data_ptr<T>(), y.data_ptr<T>(), x.stride(0), y.stride(0), static_cast<int>(B),\n"
     "      r.data_ptr<T>(), nw.data_ptr<T>(), h.data_ptr<T>(), ticket.data_ptr<int>(), r.stride(0), h.stride(0),\n"
     "      static_cast<float>(eps));"),
    ("  C10_CUDA_KERNEL_LAUNCH_CHECK();\n  return y;\n}", "  C10_CUDA_KERNEL_LAUNCH_CHECK();\n  return {y, h};\n}"),
]))

DECLS = {
    "add_rmsnorm": "std::vector<at::Tensor> add_rmsnorm_${ID}(at::Tensor x, at::Tensor r, at::Tensor w, double eps);",
    "silu_mul": "at::Tensor silu_mul_${ID}(at::Tensor gu);",
    "qk_rotary": ("std::vector<at::Tensor> qk_rotary_${ID}(at::Tensor q, at::Tensor k, at::Tensor cs, at::Tensor sn, "
                  "at::Tensor qw, at::Tensor kw, double eps);"),
    "attention": "at::Tensor attention_${ID}(at::Tensor q, at::Tensor kc, at::Tensor vc, at::Tensor pos, double scale);",
    "gemv": "at::Tensor gemv_${ID}(at::Tensor x, at::Tensor w);",
    "gemv_swiglu": "at::Tensor gemv_swiglu_${ID}(at::Tensor x, at::Tensor w);",
    "norm_gemv": ("std::vector<at::Tensor> norm_gemv_${ID}(at::Tensor x, at::Tensor r, at::Tensor nw, double eps, "
                  "at::Tensor w);"),
    "gemv_add_rmsnorm": ("std::vector<at::Tensor> gemv_add_rmsnorm_${ID}(at::Tensor x, at::Tensor w, at::Tensor r, "
                         "at::Tensor nw, double eps, at::Tensor ticket);"),
    "norm_gemv_swiglu": ("std::vector<at::Tensor> norm_gemv_swiglu_${ID}(at::Tensor x, at::Tensor r, at::Tensor nw, "
                         "double eps, at::Tensor w);"),
}

# ---------------------------------------------------------------------------------------------
# templates


def _es(region: Region) -> int:
    return torch.empty((), dtype=dtype_from_name(region.dtype)).element_size()


class CudaTemplate(Template):
    lang = "cuda"
    source: S
    entry: str  # "add_rmsnorm" | ...

    def subst(self, params: dict[str, Any], region: Region) -> dict[str, Any]:
        raise NotImplementedError

    def source_for(self, params: dict[str, Any]) -> S:
        return self.source

    def render(self, params: dict[str, Any], region: Region) -> tuple[str, str, str]:
        """(kernel source, declaration, function name) of one parameter point."""
        ctype, st = cuda_build.cuda_type(dtype_from_name(region.dtype))
        sub = dict(self.subst(params, region), T=ctype, ST=st)
        key = repr(sorted(sub.items()))
        sub["ID"] = hashlib.sha1(key.encode()).hexdigest()[:12]
        return (self.source_for(params).substitute(sub), S(DECLS[self.entry]).substitute(ID=sub["ID"]),
                f"{self.entry}_{sub['ID']}")

    def wrap(self, fn, params: dict[str, Any], region: Region):
        raise NotImplementedError

    def materialise(self, params, region):
        res = self.materialise_many([params], region)[0]
        if isinstance(res, Exception):
            raise res
        return res

    def materialise_many(self, params_list, region):
        return self.materialise_items([(p, region) for p in params_list])

    def materialise_items(self, items: list[tuple[dict[str, Any], Region]]) -> list[Candidate | Exception]:
        """Build points of this template for possibly different regions in ONE module (one nvcc
        run). The same list of items renders the same source, so it loads from torch's extension
        cache next time -- the decision cache stores the list for that reason."""
        rendered = [self.render(p, r) for p, r in items]
        body = "\n".join(dict.fromkeys(x[0] for x in rendered))
        decls = "\n".join(dict.fromkeys(x[1] for x in rendered))
        names = list(dict.fromkeys(x[2] for x in rendered))
        try:
            mod, secs = cuda_build.build(self.entry, body, decls, names)
        except Exception as e:  # one failed build fails every point in it
            return [RuntimeError(f"build failed: {str(e)[-2000:]}") for _ in items]
        out: list[Candidate | Exception] = []
        for (p, r), (src, _, name) in zip(items, rendered):
            fn = getattr(mod, name)
            out.append(Candidate(self.spec(p, r), self.wrap(fn, p, r), source=src,
                                 build_seconds=secs / max(1, len(items))))
        return out


class CudaAddRMSNorm(CudaTemplate):
    name = "cuda_add_rmsnorm"
    kinds = ("residual_rmsnorm", "final_norm")
    source = ADD_RMSNORM
    entry = "add_rmsnorm"

    def space(self, region):
        return grid(THREADS=[64, 128, 256, 512, 1024], VEC=[1, 2, 4, 8])

    def subst(self, p, region):
        h = region.attr("hidden")
        items = -(-h // (p["THREADS"] * p["VEC"]))
        return dict(THREADS=p["THREADS"], VEC=p["VEC"], ITEMS=items, N=h)

    def requirements(self, p, region):
        h = region.attr("hidden")
        items = -(-h // (p["THREADS"] * p["VEC"]))
        return Requirements(
            backend="cuda", min_sm=(8, 0) if region.dtype == "bfloat16" else (7, 0),
            threads_per_block=p["THREADS"], smem_bytes=32 * 4,
            regs_per_thread=items * p["VEC"] + 3 * p["VEC"] + 24,
            divisible=(("hidden % VEC", h, p["VEC"]),),
            at_most=(("VEC * element bytes", p["VEC"] * _es(region), 16),
                     ("items per thread (hidden / (THREADS*VEC))", items, 32)),
            last_dim_contiguous=("x", "residual"), contiguous=("weight",),
            same_dtype_inputs=("x", "residual", "weight"),
        )

    def wrap(self, fn, p, region):
        def add_rmsnorm(x, residual, weight, eps):
            out, rout = fn(x, residual, weight, float(eps))
            return out, rout

        return add_rmsnorm


class CudaSiluMul(CudaTemplate):
    """SwiGLU on the library GEMM's fused gate/up output: F.linear(x, [Wg;Wu]) then this kernel."""

    name = "cuda_swiglu"
    kinds = ("gate_up_silu_mul",)
    source = SILU_MUL
    entry = "silu_mul"

    def space(self, region):
        return grid(THREADS=[128, 256, 512], VEC=[1, 2, 4, 8], FAST_EXP=[0, 1])

    def subst(self, p, region):
        return dict(THREADS=p["THREADS"], VEC=p["VEC"], I=region.attr("intermediate"),
                    EXP="__expf" if p["FAST_EXP"] else "expf")

    def requirements(self, p, region):
        return Requirements(
            backend="cuda", min_sm=(8, 0) if region.dtype == "bfloat16" else (7, 0),
            threads_per_block=p["THREADS"], regs_per_thread=6 * p["VEC"] + 20, fast_math=bool(p["FAST_EXP"]),
            divisible=(("intermediate % VEC", region.attr("intermediate"), p["VEC"]),),
            at_most=(("VEC * element bytes", p["VEC"] * _es(region), 16),),
            contiguous=("x", "weight"),
        )

    def wrap(self, fn, p, region):
        import torch.nn.functional as F

        def gate_up_silu_mul(x, weight, intermediate):
            return fn(F.linear(x, weight))

        gate_up_silu_mul.kernel = fn  # the bare kernel, for tests
        return gate_up_silu_mul


class CudaQKRotary(CudaTemplate):
    name = "cuda_qk_rotary"
    kinds = ("rotary",)
    source = QK_ROTARY
    entry = "qk_rotary"

    def space(self, region):
        norms = [0, 1] if region.attr("qk_norm_fusable") else [0]
        return grid(WARPS=[1, 2, 4, 8], HAS_NORM=norms)

    def fuses(self, p, region):
        return ("qk_norm",) if p.get("HAS_NORM") else ()

    def subst(self, p, region):
        return dict(WARPS=p["WARPS"], HAS_NORM="true" if p["HAS_NORM"] else "false", HD=region.attr("head_dim"),
                    NQ=region.attr("heads"), NKV=region.attr("kv_heads"))

    def requirements(self, p, region):
        hd = region.attr("head_dim")
        return Requirements(
            backend="cuda", min_sm=(8, 0) if region.dtype == "bfloat16" else (7, 0),
            threads_per_block=32 * p["WARPS"], regs_per_thread=3 * (hd // 32) + 32,
            divisible=(("head_dim % 64 (rotate-half partner in the same lane)", hd, 64),),
            at_most=(("head_dim", hd, 256),),
            last_dim_contiguous=("q", "k"), contiguous=("cos", "sin"),
        )

    def wrap(self, fn, p, region):
        has_norm = bool(p["HAS_NORM"])

        def qk_rotary(q, k, cos, sin, q_weight=None, k_weight=None, eps=1e-6):
            if has_norm != (q_weight is not None):
                raise ValueError("candidate built with HAS_NORM=%d called %s norm weights" % (has_norm, "with" if q_weight is not None else "without"))
            qw = q_weight if has_norm else cos
            kw = k_weight if has_norm else cos
            qo, ko = fn(q, k, cos, sin, qw, kw, float(eps))
            return qo, ko

        return qk_rotary


class CudaAttention(CudaTemplate):
    name = "cuda_flash_decode"
    kinds = ("decode_attention",)
    source = ATTENTION
    entry = "attention"

    def space(self, region):
        return grid(WARPS=[2, 4, 8], SPLITS=[1, 2, 4, 8, 16, 32])

    def subst(self, p, region):
        return dict(WARPS=p["WARPS"], SPLITS=p["SPLITS"], HD=region.attr("head_dim"), G=region.attr("group"),
                    NKV=region.attr("kv_heads"))

    def requirements(self, p, region):
        hd, g = region.attr("head_dim"), region.attr("group")
        epl = hd // 32 if hd % 32 == 0 else 0
        smem = p["WARPS"] * g * (hd + 2) * 4
        return Requirements(
            backend="cuda", min_sm=(8, 0) if region.dtype == "bfloat16" else (7, 0),
            threads_per_block=32 * p["WARPS"], smem_bytes=smem,
            regs_per_thread=2 * g * epl + 2 * epl + 3 * g + 32,
            divisible=(("head_dim % 32", hd, 32),),
            power_of_two=(("head_dim / 32 (vector width per lane)", epl),) if epl else (),
            at_most=(("head_dim / 32 * element bytes", epl * _es(region), 16), ("query heads per kv head", g, 16),
                     ("static shared memory (bytes)", smem, 48 * 1024)),
            last_dim_contiguous=("q", "k_cache", "v_cache"),
        )

    def wrap(self, fn, p, region):
        def attention(q, k_cache, v_cache, pos, scale):
            return fn(q, k_cache, v_cache, pos, float(scale))

        return attention


class CudaGemv(CudaTemplate):
    """Batch-1..8 matrix-vector products over the decoder's linear layers (cuBLAS's competitor:
    kept only where measured faster). Weights streamed once with 16-byte loads. KSPLIT > 1: each
    output row's K split over KSPLIT warps of a block, summed in shared memory in slice order; PDL:
    a programmatic dependent launch (see GEMV_GENERAL)."""

    name = "cuda_gemv"
    kinds = ("qkv_proj", "o_proj", "down_proj", "lm_head")
    source = GEMV
    general_source = GEMV_GENERAL
    entry = "gemv"
    swiglu = False

    def space(self, region):
        # KSPLIT and PDL vary fastest: an advised point's split-K / PDL twins are tried right after it
        return grid(WARPS=[4, 8], ROWS=[1, 2, 4], UNROLL=[2, 4], KSPLIT=[1, 2, 4], PDL=[1, 0])

    @staticmethod
    def _general(p) -> bool:
        # .get: plans cached before KSPLIT / PDL existed name the plain kernel
        return p.get("KSPLIT", 1) > 1 or bool(p.get("PDL", 0))

    def source_for(self, p):
        return self.general_source if self._general(p) else self.source

    def _out(self, region) -> int:
        return region.attr("intermediate") if self.swiglu else region.attr("out_features")

    def subst(self, p, region):
        inter = region.attr("intermediate") if self.swiglu else 0
        n = region.attr("out_features")
        sub = dict(FN=self.entry, WARPS=p["WARPS"], ROWS=p["ROWS"], UNROLL=p["UNROLL"], VEC=16 // _es(region),
                   K=region.attr("in_features"), N=n, OUT=inter if self.swiglu else n, I=inter,
                   MB=region.batch, SWIGLU="true" if self.swiglu else "false")
        if self._general(p):  # only then: the plain points keep their source and names byte for byte
            pdl = bool(p.get("PDL", 0))
            sub.update(KSPLIT=p.get("KSPLIT", 1), PDL="true" if pdl else "false",
                       PDL_WAIT=PDL_WAIT if pdl else "", PDL_TRIGGER=PDL_TRIGGER if pdl else "")
        return sub

    def requirements(self, p, region):
        vec = 16 // _es(region)
        rows = (2 if self.swiglu else 1) * p["ROWS"]
        k, ksplit = region.attr("in_features"), p.get("KSPLIT", 1)
        divisible = [("in_features % (16 bytes / element size)", k, vec)]
        smem = 0
        if ksplit > 1:
            smem = p["WARPS"] * rows * region.batch * 4  # the warps' sums, reduced in shared memory
            divisible += [("WARPS % KSPLIT", p["WARPS"], ksplit),
                          ("in_features % (KSPLIT * vector width)", k, ksplit * vec),
                          ("output rows % rows per block (whole blocks reach the barrier)", self._out(region),
                           max(1, p["WARPS"] // ksplit) * p["ROWS"])]
        return Requirements(
            backend="cuda", min_sm=(8, 0) if region.dtype == "bfloat16" else (7, 0),
            threads_per_block=32 * p["WARPS"], max_batch=8, smem_bytes=smem,
            # accumulators + the x values + loads in flight; ptxas -v for sm_90 (bf16, K 6144) gave
            # 32-94 registers at batch 1 and 70-196 at batch 8, 10-50% under this estimate
            regs_per_thread=rows * region.batch + region.batch * vec + 2 * rows * p["UNROLL"] + 30,
            divisible=tuple(divisible), at_most=(("static shared memory (bytes)", smem, 48 * 1024),),
            contiguous=("weight",), last_dim_contiguous=("x",),
        )

    def wrap(self, fn, p, region):
        if region.kind == "qkv_proj":
            def qkv_proj(x, weight, q_size, kv_size):
                qkv = fn(x, weight)
                return split_qkv(qkv, q_size, kv_size)

            return qkv_proj

        def linear(x, weight):
            return fn(x, weight)

        return linear


class CudaGemvSwiGLU(CudaGemv):
    """The gate/up product with SwiGLU in the epilogue: one kernel instead of GEMM + SwiGLU."""

    name = "cuda_gemv_swiglu"
    kinds = ("gate_up_silu_mul",)
    entry = "gemv_swiglu"
    swiglu = True

    def wrap(self, fn, p, region):
        def gate_up_silu_mul(x, weight, intermediate):
            return fn(x, weight)

        return gate_up_silu_mul


class CudaNormGemv(CudaGemv):
    """cuda_gemv with the residual add + RMSNorm before it folded in (QKV): the block rebuilds the
    normalised rows in shared memory, block 0 writes the new residual; two kernels fewer a layer."""

    name = "cuda_norm_gemv"
    kinds = ("qkv_proj",)
    source = NORM_GEMV
    general_source = NORM_GEMV_GENERAL
    entry = "norm_gemv"

    def fuses(self, p, region):
        return ("residual_rmsnorm",)

    def requirements(self, p, region):
        req = super().requirements(p, region)
        smem = req.smem_bytes + region.batch * region.attr("in_features") * _es(region) + 32 * 4
        return replace(req, smem_bytes=smem, at_most=(("static shared memory (bytes)", smem, 48 * 1024),))

    def wrap(self, fn, p, region):
        def norm_qkv_proj(x, residual, norm_weight, eps, weight, q_size, kv_size):
            qkv, h = fn(x, residual, norm_weight, float(eps), weight)
            return (*split_qkv(qkv, q_size, kv_size), h)

        return norm_qkv_proj


class CudaNormGemvSwiGLU(CudaNormGemv):
    """The gate/up product with the norm folded in front and SwiGLU in the epilogue."""

    name = "cuda_norm_gemv_swiglu"
    kinds = ("gate_up_silu_mul",)
    entry = "norm_gemv_swiglu"
    swiglu = True

    def wrap(self, fn, p, region):
        def norm_gate_up_silu_mul(x, residual, norm_weight, eps, weight, intermediate):
            out, h = fn(x, residual, norm_weight, float(eps), weight)
            return out, h

        return norm_gate_up_silu_mul


class CudaGemvAddNorm(CudaGemv):
    """cuda_gemv on o_proj / down_proj with the residual add + RMSNorm after it in the epilogue
    (GEMV_ADD_NORM): one kernel instead of the GEMV and the norm; the projection reading the norm
    then runs plain. Always the KSPLIT / PDL source (no earlier plans name it)."""

    name = "cuda_gemv_add_rmsnorm"
    kinds = ("o_proj", "down_proj")
    source = general_source = GEMV_ADD_NORM
    entry = "gemv_add_rmsnorm"
    always_general = True

    @staticmethod
    def _general(p) -> bool:
        return True

    def fuses(self, p, region):
        return ("residual_rmsnorm",)

    def requirements(self, p, region):
        req = super().requirements(p, region)
        vec = 16 // _es(region)  # the warp that normalises reads the rows a vector at a time
        return replace(req, divisible=(*req.divisible, ("out_features % (16 bytes / element size)",
                                                         region.attr("out_features"), vec)))

    def wrap(self, fn, p, region):
        tickets = Tickets(1)

        def gemv_add_rmsnorm(x, weight, residual, norm_weight, eps):
            y, h = fn(x, weight, residual, norm_weight, float(eps), tickets.get(x.device))
            return y, h

        return gemv_add_rmsnorm


CUDA_TEMPLATES: list[Template] = [CudaAddRMSNorm(), CudaSiluMul(), CudaQKRotary(), CudaAttention(), CudaGemv(),
                                  CudaGemvSwiGLU(), CudaNormGemv(), CudaNormGemvSwiGLU(), CudaGemvAddNorm()]


def render_all(region: Region, template: CudaTemplate, params_list=None) -> str:
    params_list = params_list if params_list is not None else template.space(region)
    return "\n".join(dict.fromkeys(template.render(p, region)[0] for p in params_list))


__all__ = ["CUDA_TEMPLATES", "CudaTemplate", "render_all"]
