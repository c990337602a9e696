"""Which of a problem's inputs its outputs depend on, found by running its reference.

KernelBench level 2 #83 takes min(x, 0) and then clamps to [0, 1]: its output is zero whatever
its input, so a kernel that writes zeros is correct, and a speed-of-light floor that counts reading
the input is no floor (a released kernel came out at 8.38 of it). Such a problem is degenerate:
the verdict says which inputs are ignored, and the floor leaves them out (roofline.floor_bytes).

The test: the reference's outputs on one input set, against its outputs with an input replaced by
another draw of it, compared exactly. An input is ignored when two other draws of it both leave
every output bit for bit the same. Only inputs whose draws differ can be tested (a deterministic
input, an integer size, is neither claimed ignored nor used). A wrong "ignored" could only come
from outputs that happen to match across draws, and it would lower the floor, never raise it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Dependence:
    """What the reference's outputs were found to depend on (indices into the input set)."""

    inputs: int  # how many values the input set holds
    testable: tuple[int, ...]  # tensor inputs whose draws differ
    ignored: tuple[int, ...]  # testable inputs no output depends on
    # No output depends on any testable input, and every tensor input was testable: the outputs are
    # the same for every input set.
    constant: bool
    ignored_bytes: int  # bytes of one input set that no output depends on


def same_outputs(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Every output exactly the same (NaN where NaN), shapes and dtypes included."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if not isinstance(x, torch.Tensor):
            if x != y:
                return False
            continue
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if not (torch.equal(x, y) or (x.is_floating_point() and torch.equal(torch.nan_to_num(x), torch.nan_to_num(y)))):
            return False
    return True


def _draws_differ(a: Any, b: Any) -> bool:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return False
    return a.shape == b.shape and a.dtype == b.dtype and not torch.equal(a, b)


def find_dependence(run: Callable[[list[Any]], list[Any]], base: list[Any], others: Sequence[list[Any]],
                    base_outputs: Sequence[Any], other_outputs: Sequence[Sequence[Any]] | None = None) -> Dependence:
    """``run(values)`` -> outputs of the reference. ``base``: one input set; ``others``: two or more
    independent draws of the same set. ``other_outputs``, where known, the outputs on each of
    ``others`` (spares a run each)."""
    testable = tuple(i for i, v in enumerate(base) if all(_draws_differ(v, o[i]) for o in others))
    tensors = [i for i, v in enumerate(base) if isinstance(v, torch.Tensor)]
    if not testable:
        return Dependence(len(base), (), (), False, 0)

    def unchanged(replaced: Sequence[int]) -> bool:
        for k, other in enumerate(others):
            if other_outputs is not None and k < len(other_outputs) and len(replaced) == len(tensors) \
                    and set(replaced) == set(tensors):
                outs = other_outputs[k]  # every tensor input replaced: that other set itself
            else:
                values = [other[i] if i in replaced else v for i, v in enumerate(base)]
                outs = run(values)
            if not same_outputs(base_outputs, outs):
                return False
        return True

    if unchanged(testable):
        ignored = testable
    elif len(testable) == 1:
        ignored = ()
    else:
        ignored = tuple(i for i in testable if unchanged((i,)))
    constant = bool(ignored) and set(ignored) == set(tensors)
    nbytes = sum(base[i].numel() * base[i].element_size() for i in ignored)
    return Dependence(len(base), testable, ignored, constant, nbytes)
