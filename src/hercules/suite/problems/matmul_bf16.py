"""Dense bf16 matrix product C = A @ B, (2048, 1024) x (1024, 2048), fp32 accumulation expected."""

import torch
import torch.nn as nn

HERCULES = {"level": 1, "tier": "single_op", "dtype": "bfloat16", "expert": "matmul"}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(2048, 1024).to(torch.bfloat16), torch.randn(1024, 2048).to(torch.bfloat16)]


def get_init_inputs():
    return []
