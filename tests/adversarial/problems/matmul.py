"""Dense fp32 matrix product C = A @ B, (256, 256) x (256, 256). Adversarial-corpus problem.

fp16, bf16, TF32 and autocast are all downcasts here.
"""

import torch
import torch.nn as nn

HERCULES = {"level": 1, "tier": "adversarial", "dtype": "float32"}

N = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
