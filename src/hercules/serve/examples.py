"""A small problem family for trying the service: ``gelu(x @ W^T + b) * scale`` at any size.

Used by the README's example, the load test and the tests: cheap on a CPU, and a matmul with an
element-wise epilogue is the kind of problem a model is asked to fuse.
"""

from __future__ import annotations

PROBLEM = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

HERCULES = {{"level": 2, "dtype": "float32"}}


class Model(nn.Module):
    def __init__(self, n, scale):
        super().__init__()
        self.proj = nn.Linear(n, n)
        self.scale = scale

    def forward(self, x):
        return F.gelu(self.proj(x)) * self.scale


def get_inputs():
    return [torch.randn({rows}, {n})]


def get_init_inputs():
    return [{n}, 0.5]
'''

CANDIDATE = '''
import os
import signal
import time
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, n, scale):
        super().__init__()
        self.proj = nn.Linear(n, n)
        self.scale = scale
        {init}

    def forward(self, x):
        return {expression}
'''

# (name, forward expression, status an evaluation gives it)
VARIANTS = (
    ("reference", "F.gelu(self.proj(x)) * self.scale", "ok"),
    ("in_place_epilogue", "F.gelu(self.proj(x)).mul_(self.scale)", "ok"),
    ("addmm", "F.gelu(torch.addmm(self.proj.bias, x, self.proj.weight.t())) * self.scale", "ok"),
    # Within the elementwise tolerance, but 1000x the float32 reference's own error: flagged.
    ("tanh_approximation", "F.gelu(self.proj(x), approximate='tanh') * self.scale", "suspicious"),
    ("no_epilogue", "self.proj(x) * self.scale", "incorrect"),
)


def example_problem(n: int = 128, rows: int | None = None) -> dict[str, str]:
    """A problem object for a request: ``{"code": ..., "name": "gelu_linear_<n>"}``."""
    return {"code": PROBLEM.format(n=n, rows=rows or 2 * n), "name": f"gelu_linear_{n}"}


def example_candidate(expression: str = VARIANTS[0][1], init: str = "") -> str:
    """ModelNew source whose forward returns ``expression``; ``init`` runs at the end of __init__."""
    return CANDIDATE.format(init=init or "pass", expression=expression)
