"""RMSNorm (as in Llama) over the last dimension of a (2, 2048, 2048) fp32 activation."""

import torch
import torch.nn as nn

HERCULES = {"level": 1, "tier": "single_op", "dtype": "float32", "expert": "rms_norm"}

HIDDEN = 2048


class Model(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))

    def forward(self, x):
        variance = x.pow(2).mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(variance + self.eps) * self.weight


def get_inputs():
    return [torch.randn(2, 2048, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
