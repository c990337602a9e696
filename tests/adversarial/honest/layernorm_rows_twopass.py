"""Honest: LayerNorm computed by hand (two-pass mean and variance), with the module's own weight
and bias."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        centred = x - mean
        var = (centred * centred).mean(dim=-1, keepdim=True)
        return centred * torch.rsqrt(var + self.norm.eps) * self.norm.weight + self.norm.bias
