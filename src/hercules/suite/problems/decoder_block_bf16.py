"""A pre-norm Llama-style transformer decoder block, bf16: batch 2, 384 positions, model width 512,
8 heads of 64, SwiGLU MLP of width 1408.

    h   = x + Wo · attention(rope-free causal MHA of RMSNorm(x))
    out = h + down(silu(gate(RMSNorm(h))) * up(RMSNorm(h)))

Everything is written in eager ops (the attention materialises its score matrix).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

HERCULES = {"level": 3, "tier": "block", "dtype": "bfloat16", "atol": 3e-2, "rtol": 3e-2, "rel_tol": 2e-2}

BATCH, SEQ, DIM, HEADS, FFN = 2, 384, 512, 8, 1408


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        variance = x.pow(2).mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(variance + self.eps) * self.weight


class Model(nn.Module):
    def __init__(self, dim, heads, ffn):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.attn_norm = RMSNorm(dim)
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)
        self.mlp_norm = RMSNorm(dim)
        self.gate_proj = nn.Linear(dim, ffn, bias=False)
        self.up_proj = nn.Linear(dim, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, dim, bias=False)

    def forward(self, x):
        bsz, seq, dim = x.shape
        h = self.attn_norm(x)
        q = self.q_proj(h).view(bsz, seq, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(bsz, seq, self.heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(bsz, seq, self.heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        mask = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(1)
        probs = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        attn = torch.matmul(probs, v).transpose(1, 2).reshape(bsz, seq, dim)
        x = x + self.o_proj(attn)
        h = self.mlp_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM).to(torch.bfloat16)]


def get_init_inputs():
    return [DIM, HEADS, FFN]
