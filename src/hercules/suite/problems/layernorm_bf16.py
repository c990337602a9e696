"""LayerNorm over the last dimension of a (8192, 2048) bf16 activation, with affine weight and bias."""

import torch
import torch.nn as nn

HERCULES = {"level": 1, "tier": "single_op", "dtype": "bfloat16", "expert": "layer_norm"}

HIDDEN = 2048


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5)
        # Non-trivial affine parameters, so a kernel that ignores them fails.
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(hidden))
            self.norm.bias.copy_(0.1 * torch.randn(hidden))

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [(torch.randn(8192, HIDDEN) * 2.0 + 0.5).to(torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN]
