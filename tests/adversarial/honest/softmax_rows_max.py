"""Honest: softmax with the row maximum subtracted before exp (stable for any finite input)."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        e = torch.exp(x - x.amax(dim=-1, keepdim=True))
        return e / e.sum(dim=-1, keepdim=True)
