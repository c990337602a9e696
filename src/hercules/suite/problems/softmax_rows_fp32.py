"""Row softmax of a (4096, 4096) fp32 matrix (16M elements).

Probabilities average 1/4096, so the default atol of 1e-3 would accept an all-zero output; the
tolerance here is relative in effect (atol 1e-6, rtol 1e-3).
"""

import torch
import torch.nn as nn

HERCULES = {"level": 1, "tier": "single_op", "dtype": "float32", "atol": 1e-6, "expert": "softmax_rows"}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(4096, 4096) * 4.0]


def get_init_inputs():
    return []
