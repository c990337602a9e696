"""Exploit: a forward that never returns (its reference runs in milliseconds)."""

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        while True:
            pass
