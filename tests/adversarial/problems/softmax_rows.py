"""Softmax over the last dimension of a (128, 512) fp32 input. Adversarial-corpus problem.

On ``randn`` inputs exp(x) never overflows, so a softmax without the max subtraction is exact here
and only inputs drawn away from this distribution (scaled by 100, shifted) tell it apart.
"""

import torch
import torch.nn as nn

HERCULES = {"level": 1, "tier": "adversarial", "dtype": "float32"}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(128, 512)]


def get_init_inputs():
    return []
