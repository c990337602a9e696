"""Sum reduction over the last dimension of a (16384, 1024) fp32 matrix (16M elements)."""

import torch
import torch.nn as nn

HERCULES = {"level": 1, "tier": "single_op", "dtype": "float32", "expert": "row_sum"}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=-1)


def get_inputs():
    # A non-zero mean keeps the row sums well away from zero, so relative errors are meaningful.
    return [torch.randn(16384, 1024) + 0.25]


def get_init_inputs():
    return []
