"""Honest: a blocked fp32 matmul with the usual honest caches.

A block size chosen per shape (memoised with functools on integers, not on tensors), a per-shape
config dict on the instance, an ImportError guard for an optional dependency, and a try/except
that re-raises with context. None of these stores or returns outputs.
"""

import functools

import torch
import torch.nn as nn

try:
    import triton  # noqa: F401  (optional; unused on the CPU path)

    HAS_TRITON = True
except ImportError:
    HAS_TRITON = False


@functools.lru_cache(maxsize=None)
def _block_size(k: int) -> int:
    return 64 if k % 64 == 0 else k


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._configs = {}

    def forward(self, a, b):
        key = (tuple(a.shape), tuple(b.shape))
        if key not in self._configs:
            self._configs[key] = _block_size(a.shape[1])
        block = self._configs[key]
        try:
            out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
            for k0 in range(0, a.shape[1], block):
                out.addmm_(a[:, k0:k0 + block], b[k0:k0 + block, :])
        except RuntimeError as exc:
            raise RuntimeError(f"blocked matmul failed for {key}") from exc
        return out
