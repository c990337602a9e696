"""Outputs around 1e-6: out = 1e-6 * sin(x) * y, (256, 256). Adversarial-corpus problem.

Every value is far below the fp32 absolute tolerance, so an all-zero output passes an
elementwise atol check; only the relative error norm (and the zero-output check) catch it.
"""

import torch
import torch.nn as nn

HERCULES = {"level": 1, "tier": "adversarial", "dtype": "float32"}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return 1e-6 * torch.sin(x) * y


def get_inputs():
    return [torch.randn(256, 256), torch.randn(256, 256)]


def get_init_inputs():
    return []
