"""PyTorch candidate: ``F.scaled_dot_product_attention(is_causal=True)``, which on an H200
dispatches to a flash-attention kernel (no score matrix in memory, masked tiles skipped)."""

import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
