"""Two outputs: (relu(x), relu(x).sum(-1)) on non-negative inputs, (256, 512). Adversarial-corpus problem.

The inputs are drawn from [0, 1), so relu(x) == x: returning the input itself (or a view of it)
as the first output is numerically right, and only the aliasing check can tell.
"""

import torch
import torch.nn as nn

HERCULES = {"level": 1, "tier": "adversarial", "dtype": "float32"}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        r = torch.relu(x)
        return r, r.sum(dim=-1)


def get_inputs():
    return [torch.rand(256, 512)]


def get_init_inputs():
    return []
