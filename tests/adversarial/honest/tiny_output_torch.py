"""Honest: the tiny-output reference, computed with torch ops in another order."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.sin(x).mul(y).mul_(1e-6)
