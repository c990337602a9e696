"""The baselines every candidate is compared with, built inside the reference worker.

eager: the problem's Model as written. compile: ``torch.compile`` with default settings.
compile_reduce_overhead: ``torch.compile(mode="reduce-overhead")`` (CUDA graphs under Inductor).
cudagraph: one CUDA graph per input set capturing the eager forward, replayed (GPU only).
expert: the fastest correct maintained kernel for the operation the problem names
(``HERCULES = {"expert": ...}``; see hercules.experts), chosen inside the reference worker.
Each is timed by the same ``time_callable`` as candidates, over the same rotated input sets.

A name in ``BASELINES`` is all the verdict, its speedups (``records.Speedups``), the rewards and the
reports need: they read the names from here. So torch is imported only where a baseline is built,
and records and reports read the names without it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

BASELINES = ("eager", "compile", "compile_reduce_overhead", "cudagraph", "expert")
GPU_ONLY = frozenset({"compile_reduce_overhead", "cudagraph"})
COMPILED = frozenset({"compile", "compile_reduce_overhead"})  # built by torch.compile


def known_baselines(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` as a tuple, or ValueError naming any that is not a baseline (an unknown name would
    otherwise be dropped quietly and its ratio never measured)."""
    unknown = sorted(set(names) - set(BASELINES))
    if unknown:
        raise ValueError(f"unknown baselines {', '.join(unknown)} (known: {', '.join(BASELINES)})")
    return tuple(names)


def available_baselines(device: torch.device | str) -> tuple[str, ...]:
    import torch

    device = torch.device(device)
    return tuple(b for b in BASELINES if device.type == "cuda" or b not in GPU_ONLY)


def _cudagraph(model: torch.nn.Module, sets: Sequence[tuple], device: torch.device) -> Callable[..., Any]:
    """Capture one graph per input set (its own static buffers); replay the one whose args match."""
    import torch

    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for args in sets:  # warm-up on a side stream, as graph capture requires
            model(*args)
    torch.cuda.current_stream(device).wait_stream(stream)
    graphs: dict[tuple[int, ...], tuple[torch.cuda.CUDAGraph, Any]] = {}
    for args in sets:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = model(*args)
        graphs[_address_key(args)] = (graph, outputs)

    def replay(*args):
        # Each input set has its own graph, found by the addresses of its tensors; its outputs
        # live in the graph's own buffers, rewritten by every replay.
        graph, outputs = graphs[_address_key(args)]
        graph.replay()
        return outputs

    return replay


def _address_key(args: Sequence[Any]) -> tuple[int, ...]:
    import torch

    return tuple(a.data_ptr() for a in args if isinstance(a, torch.Tensor))


def make_baseline(name: str, model: torch.nn.Module, sets: Sequence[tuple], device: torch.device) -> Callable[..., Any]:
    if name == "eager":
        return model
    import torch

    if name == "compile":
        return torch.compile(model)
    if name == "compile_reduce_overhead":
        if device.type != "cuda":
            raise RuntimeError("reduce-overhead needs CUDA graphs")
        return torch.compile(model, mode="reduce-overhead")
    if name == "expert":
        raise ValueError("the expert baseline is chosen by the reference worker (hercules.experts.choose)")
    if name == "cudagraph":
        if device.type != "cuda":
            raise RuntimeError("CUDA graphs need a GPU")
        return _cudagraph(model, sets, device)
    raise ValueError(f"unknown baseline {name!r}")
