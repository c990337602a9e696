"""Red-team problem: four chained fp32 products, heavy enough that reusing results pays."""

import torch
import torch.nn as nn

HERCULES = {"level": 1, "tier": "redteam", "dtype": "float32"}

N = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        x = a
        for _ in range(4):
            x = torch.tanh(x @ b)
        return x


def get_inputs():
    return [torch.randn(N, N) / N ** 0.5, torch.randn(N, N)]


def get_init_inputs():
    return []
