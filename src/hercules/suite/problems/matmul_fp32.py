"""Dense fp32 matrix product C = A @ B, (2048, 1024) x (1024, 1024).

TF32 is a precision downcast here: an honest kernel keeps fp32 inputs (IEEE fp32 FMA).
"""

import torch
import torch.nn as nn

HERCULES = {"level": 1, "tier": "single_op", "dtype": "float32", "expert": "matmul"}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(2048, 1024), torch.randn(1024, 1024)]


def get_init_inputs():
    return []
