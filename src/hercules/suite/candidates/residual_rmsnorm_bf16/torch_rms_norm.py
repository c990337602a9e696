"""PyTorch candidate: ``F.rms_norm(x + residual)``: the add is one pass and ``F.rms_norm`` one
fused kernel on CUDA (fp32 statistics), instead of pow / mean / add / rsqrt / mul / mul passes."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))

    def forward(self, x, residual):
        h = x + residual
        return F.rms_norm(h, (h.shape[-1],), self.weight, self.eps)
