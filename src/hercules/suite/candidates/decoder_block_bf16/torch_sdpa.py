"""PyTorch candidate for the decoder block: the same modules (so the same weights), with
``F.rms_norm`` (one fused kernel each), flash attention through
``F.scaled_dot_product_attention(is_causal=True)`` (no score matrix in memory), and the Q/K/V
projections done as one GEMM against the three weight matrices concatenated per call (one read
of the normalised activations instead of three)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class ModelNew(nn.Module):
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
        w_qkv = torch.cat((self.q_proj.weight, self.k_proj.weight, self.v_proj.weight), dim=0)
        qkv = F.linear(h, w_qkv).view(bsz, seq, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
        x = x + self.o_proj(attn.transpose(1, 2).reshape(bsz, seq, dim))
        h = self.mlp_norm(x)
        w_gu = torch.cat((self.gate_proj.weight, self.up_proj.weight), dim=0)
        gate, up = F.linear(h, w_gu).chunk(2, dim=-1)
        return x + self.down_proj(F.silu(gate) * up)
