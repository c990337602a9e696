"""Elementwise fp32: out = x * scale + y, (512, 1024). Adversarial-corpus problem."""

import torch
import torch.nn as nn

HERCULES = {"level": 1, "tier": "adversarial", "dtype": "float32"}

batch = 512
dim = 1024


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        return x * self.scale + y


def get_inputs():
    return [torch.randn(batch, dim), torch.randn(batch, dim)]


def get_init_inputs():
    return [1.5]
