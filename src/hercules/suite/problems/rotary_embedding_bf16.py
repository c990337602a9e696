"""Rotary position embedding (Llama's apply_rotary_pos_emb for one tensor), bf16:
out = x * cos + rotate_half(x) * sin with x of shape (2, 32, 1024, 128) and cos/sin of (1024, 128).

Eager makes a slice-negate-cat copy plus three elementwise passes; a fused kernel reads x once.
"""

import torch
import torch.nn as nn

HERCULES = {"level": 2, "tier": "fused", "dtype": "bfloat16", "expert": "rotary_half"}

BATCH, HEADS, SEQ, HEAD_DIM = 2, 32, 1024, 128


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, cos, sin):
        return x * cos + rotate_half(x) * sin


def get_inputs():
    x = torch.randn(BATCH, HEADS, SEQ, HEAD_DIM)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float64) / HEAD_DIM))
    angles = torch.outer(torch.arange(SEQ, dtype=torch.float64), inv_freq)
    emb = torch.cat((angles, angles), dim=-1)
    return [x.to(torch.bfloat16), emb.cos().to(torch.bfloat16), emb.sin().to(torch.bfloat16)]


def get_init_inputs():
    return []
