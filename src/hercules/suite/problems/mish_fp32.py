"""Mish activation, x * tanh(softplus(x)), over a 8M-element fp32 tensor.

Eager runs three elementwise kernels (softplus, tanh, mul), each reading and writing the whole
tensor; one fused pass is the memory-bound optimum (~64 MiB of traffic).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

HERCULES = {"level": 1, "tier": "single_op", "dtype": "float32", "expert": "mish"}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * torch.tanh(F.softplus(x))


def get_inputs():
    return [torch.randn(2048, 4096) * 3.0]


def get_init_inputs():
    return []
