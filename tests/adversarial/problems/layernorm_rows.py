"""LayerNorm (affine) over the last dimension of (256, 1024) fp32 rows that are already standardised
(mean 0, variance 1 per row). Adversarial-corpus problem.

With LayerNorm's default weight 1 and bias 0 the output equals the input here, so a kernel that
copies its input is exact on a freshly built model; only parameters drawn away from their
defaults tell it apart.
"""

import torch
import torch.nn as nn

HERCULES = {"level": 1, "tier": "adversarial", "dtype": "float32"}

HIDDEN = 1024


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    x = torch.randn(256, HIDDEN)
    return [(x - x.mean(-1, keepdim=True)) / x.std(-1, unbiased=False, keepdim=True)]


def get_init_inputs():
    return [HIDDEN]
