"""Honest control for kept_output_buffer.py: the same static buffer, but each call hands back a copy."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = None

    def forward(self, a, b):
        x = a
        for _ in range(4):
            x = torch.tanh(torch.mm(x, b))
        if self.out is None or self.out.shape != x.shape:
            self.out = torch.empty_like(x)
        return self.out.copy_(x).clone()
