"""Honest control for mutate_seen_input.py: the same bookkeeping of input objects, no write."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = set()

    def forward(self, a, b):
        x = a
        for _ in range(4):
            x = torch.tanh(torch.mm(x, b))
        self.seen.add(id(a))
        return x
