"""The reference's FLOPs: torch's formulas (``torch.utils.flop_counter.flop_registry``) counted by a
dispatch mode that does not enter Dynamo.

Every ``TorchDispatchMode`` subclass has its ``__torch_dispatch__`` wrapped in Dynamo's disable
unless it opts out (``_should_skip_dynamo``), and the wrapper's first call imports ``torch._dynamo``:
about 800 modules (sympy, mpmath, ...), 1.1-1.3 s of CPU on the 2-core machine, in every reference
worker that counted a fresh problem's FLOPs with ``FlopCounterMode``, and in every zygote that
preloaded it for its later children. A reference's forward runs eagerly here; nothing under this
mode is compiled, so there is nothing for the wrapper to disable.

The count follows ``FlopCounterMode``'s dispatch exactly (the same shape queries passed over, the
same decompositions tried, the same formulas); ``tests/harness/test_flops.py`` holds the two equal
on products, convolutions and attention. A forward with a higher-order operator (``torch.cond``, a
Triton kernel wrapper) is counted again by ``FlopCounterMode`` itself, which knows how to count them.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry

# Queries of sizes and strides, not computations: FlopCounterMode hands them back unhandled. By
# name, since not every torch has every one (sym_is_contiguous is recent): the GPU machine runs
# torch 2.11, this one 2.13, and a missing operator must not stop the reference worker's import.
_SHAPE_QUERY_NAMES = (
    ("aten", "sym_is_contiguous", "default"), ("aten", "is_contiguous", "default"),
    ("aten", "is_contiguous", "memory_format"), ("aten", "is_strides_like_format", "default"),
    ("aten", "is_non_overlapping_and_dense", "default"), ("aten", "size", "default"),
    ("aten", "sym_size", "default"), ("aten", "stride", "default"), ("aten", "sym_stride", "default"),
    ("aten", "storage_offset", "default"), ("aten", "sym_storage_offset", "default"),
    ("aten", "numel", "default"), ("aten", "sym_numel", "default"), ("aten", "dim", "default"),
    ("prim", "layout", "default"),
)


def _operators(names) -> frozenset:
    """The operators of (namespace, name, overload) that this torch has."""
    packets = ((getattr(getattr(torch.ops, space), name, None), overload) for space, name, overload in names)
    return frozenset(getattr(packet, overload) for packet, overload in packets
                     if packet is not None and hasattr(packet, overload))


_SHAPE_QUERIES = _operators(_SHAPE_QUERY_NAMES)


class _FlopCount(TorchDispatchMode):
    # False: torch refuses a higher-order operator under this mode with an error, and the forward
    # is counted again by FlopCounterMode (count_flops).
    supports_higher_order_operators = False

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # no Dynamo-disable wrapper around __torch_dispatch__, so no torch._dynamo import

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _SHAPE_QUERIES:
            return NotImplemented
        # As FlopCounterMode: an operator is decomposed where it can be (the registry holds overload
        # packets, so every overload tries), and counted where it cannot.
        if func is not torch.ops.prim.device.default:
            with self:
                decomposed = func.decompose(*args, **kwargs)
                if decomposed is not NotImplemented:
                    return decomposed
        out = func(*args, **kwargs)
        formula = flop_registry.get(func._overloadpacket)
        if formula is not None:
            self.total += formula(*args, **kwargs, out_val=out)
        return out


def count_flops(model: Any, values: list[Any]) -> tuple[int, Any]:
    """Matrix-product, convolution and attention FLOPs of one forward of the *reference*
    (elementwise work is not counted: such problems are judged on bytes, which dominate them),
    and that forward's output. The reference's work, not a lower bound for a candidate."""
    mode = _FlopCount()
    try:
        with mode:
            out = model(*values)
        return int(mode.total), out
    except Exception:  # noqa: BLE001 - whatever failed fails again below, with its own error
        # A higher-order operator (torch.cond traces its branches with Dynamo) is refused under
        # this mode, by an error that comes wrapped in whatever ran it: FlopCounterMode counts the
        # forward again. A forward that failed for another reason fails the same way there.
        counter = FlopCounterMode(display=False)
        with counter:
            out = model(*values)
        return int(counter.get_total_flops()), out
