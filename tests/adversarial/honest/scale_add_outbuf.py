"""Honest: a fresh output buffer per call, written with out= and in-place ops on that buffer only.

Close to several static rules without meeting any: in-place ops (on the output, not an input),
`x = x.contiguous()` rebinding, and module-level get_inputs / get_init_inputs copied from the problem.
"""

import torch
import torch.nn as nn

batch = 512
dim = 1024


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    @torch.no_grad()
    def forward(self, x, y):
        x = x.contiguous()
        y = y.contiguous()
        out = torch.empty_like(x)
        torch.mul(x, self.scale, out=out)
        out.add_(y)
        return out


def get_inputs():
    return [torch.randn(batch, dim), torch.randn(batch, dim)]


def get_init_inputs():
    return [1.5]
