"""Inputs drawn away from the problem's own distribution, made in the reference worker.

A problem's ``get_inputs`` draws from one distribution (mostly ``randn`` or ``rand``), and code
that is only right there passes every trial: a softmax without the max subtraction is exact on
``randn`` and NaN once its inputs are 100 times larger. Each transform here maps one input set to
another of the same shapes and dtypes; the parent decides (oracle.py) whether the problem's own
reference stays right on it, and judges the candidate there with the trials' rules.

Only floating-point tensors are transformed: integer inputs are indices, class labels or sizes,
whose meaning a scale or a shift would break. The structure a problem's inputs hold exactly is
kept (``kept_structure``): their exact zeros, and symmetry in the last two dimensions. A kernel may
rely on what the problem guarantees: CUDA-L1's kernel for KernelBench level 1 #15 (product of
two lower-triangular matrices) computes only the lower blocks, and the shift, which filled the
upper triangles with 100 rms, made it `fragile_inputs`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

# By how much the scales and the shift move an input. Orders of magnitude, not ulps: an algorithm
# that overflows (exp without the max subtraction) or cancels (one-pass variance) shows there,
# while the problem-dtype reference still computes them well (checked per problem, oracle.py).
SCALE_UP = 100.0
SCALE_DOWN = 0.01
SHIFT_RMS = 100.0  # the shift, in root-mean-squares of the input it is added to
# Edge values replace every EDGE_STRIDE-th element (at fixed offsets), so every row of a
# row-wise operation sees some whatever its length: zeros; the dtype's smallest normal number and
# EXTREME_MAX times the input's largest magnitude, both with the replaced element's sign (an input
# that is positive stays positive).
EDGE_STRIDE = 16
ZERO_OFFSET = 3
TINY_OFFSET = 7
LARGE_OFFSET = 11
EXTREME_MAX = 100.0


def _rms(x: torch.Tensor) -> float:
    value = float(x.double().pow(2).mean().sqrt()) if x.numel() else 0.0
    return value if value > 0 and value == value and value != float("inf") else 1.0


def _scaled(factor: float) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: x * factor


def _shifted(x: torch.Tensor) -> torch.Tensor:
    return x + SHIFT_RMS * _rms(x)


def _at(x: torch.Tensor, offset: int) -> torch.Tensor:
    """A mask of every EDGE_STRIDE-th element of ``x`` (row-major order), starting at ``offset``."""
    index = torch.arange(x.numel(), device=x.device).reshape(x.shape)
    return index % EDGE_STRIDE == offset


def _zeros(x: torch.Tensor) -> torch.Tensor:
    return torch.where(_at(x, ZERO_OFFSET), torch.zeros((), dtype=x.dtype, device=x.device), x)


def _extremes(x: torch.Tensor) -> torch.Tensor:
    sign = torch.where(x < 0, -1.0, 1.0).to(x.dtype)
    largest = float(x.abs().max()) if x.numel() else 1.0
    large = EXTREME_MAX * (largest if largest > 0 and largest != float("inf") else 1.0)
    tiny = torch.finfo(x.dtype).tiny
    out = torch.where(_at(x, TINY_OFFSET), sign * tiny, x)
    return torch.where(_at(x, LARGE_OFFSET), sign * large, out)


# Name -> what it does to one floating-point tensor. The names are what verdicts report.
TRANSFORMS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "scale_x100": _scaled(SCALE_UP),
    "scale_x0.01": _scaled(SCALE_DOWN),
    "shift": _shifted,
    "zeros": _zeros,
    "extremes": _extremes,
}

DESCRIPTIONS: dict[str, str] = {
    "scale_x100": f"every floating-point input times {SCALE_UP:g}",
    "scale_x0.01": f"every floating-point input times {SCALE_DOWN:g}",
    "shift": f"every floating-point input plus {SHIFT_RMS:g} times its root-mean-square",
    "zeros": f"every {EDGE_STRIDE}th value of every floating-point input set to zero",
    "extremes": (f"every {EDGE_STRIDE}th value set to the dtype's smallest normal number, and another "
                 f"to {EXTREME_MAX:g} times the input's largest magnitude (signs kept)"),
}


def kept_structure(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out`` (a transform of ``x``) with the structure ``x`` holds exactly: zero wherever ``x`` is
    exactly zero, and, where ``x`` equals its transpose in the last two dimensions, symmetric (its
    lower triangle mirrored)."""
    zeros = x == 0
    if bool(zeros.any()):
        out = torch.where(zeros, x, out)
    del zeros
    if x.dim() >= 2 and x.shape[-1] == x.shape[-2] > 1 and torch.equal(x, x.transpose(-1, -2)):
        lower = torch.tril(out)
        out = lower + torch.tril(out, diagonal=-1).transpose(-1, -2)
    return out


def transform_inputs(values: list[Any], name: str) -> list[Any]:
    """``values`` with the transform ``name`` applied to every floating-point tensor, the structure
    each holds kept (new tensors; the originals are left as they are)."""
    fn = TRANSFORMS[name]
    return [kept_structure(v, fn(v)) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
            for v in values]
