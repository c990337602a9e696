"""Linear layer with bias followed by exact (erf) GELU: (2048, 1024) -> (2048, 1536), bf16.

Eager runs the GEMM (with bias in the epilogue) and then a separate GELU pass over the output;
a fused kernel applies bias and GELU in the GEMM epilogue.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

HERCULES = {"level": 2, "tier": "fused", "dtype": "bfloat16", "expert": "linear_gelu"}

TOKENS, IN_FEATURES, OUT_FEATURES = 2048, 1024, 1536


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=True)

    def forward(self, x):
        return F.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(TOKENS, IN_FEATURES).to(torch.bfloat16)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
