"""SwiGLU gate of a Llama-style MLP: silu(x @ Wg^T) * (x @ Wu^T), (1024, 1024) -> (1024, 2048), bf16.

Eager runs two GEMMs, a SiLU and a multiply (two extra passes over two intermediates); a fused
kernel computes both products per tile and applies the gate in the epilogue.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

HERCULES = {"level": 2, "tier": "fused", "dtype": "bfloat16", "expert": "swiglu_mlp"}

TOKENS, HIDDEN, FFN = 1024, 1024, 2048


class Model(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, ffn, bias=False)
        self.up_proj = nn.Linear(hidden, ffn, bias=False)

    def forward(self, x):
        return F.silu(self.gate_proj(x)) * self.up_proj(x)


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN).to(torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN, FFN]
