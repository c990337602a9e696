"""PyTorch candidate: ``F.rms_norm``, a single fused kernel on CUDA (read x once, write once)
instead of pow -> mean -> add -> rsqrt -> mul -> mul."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
