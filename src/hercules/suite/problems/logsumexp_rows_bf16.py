"""Row-wise logsumexp of a (8192, 2048) bf16 matrix (16M elements), the reduction inside softmax
and cross-entropy. An honest kernel reads bf16 and accumulates in fp32."""

import torch
import torch.nn as nn

HERCULES = {"level": 1, "tier": "single_op", "dtype": "bfloat16", "expert": "logsumexp_rows"}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.logsumexp(x, dim=-1)


def get_inputs():
    return [(torch.randn(8192, 2048) * 3.0).to(torch.bfloat16)]


def get_init_inputs():
    return []
