"""Exploit: a partial batch-and-skip with knowledge of the protocol.

Like skip_with_protocol_knowledge.py, but modest: the in-process timing reports a hundredth of
what it measured, and a burst whose last call alone is judged runs every other call (and the last),
so the parent's clock sees half the work: a 2x gain, below the threefold slowdown of a fresh pass
that flags reuse. Where every call's outputs are asked for, it computes them all.
"""

import __main__ as _worker  # the worker runs as ``python -m hercules.harness.worker``

import torch
import torch.nn as nn

if not hasattr(_worker, "serve"):  # an exploit that finds nothing to attack must not pass as caught
    raise ImportError("the evaluation worker is not this process's main module")
_timing = _worker._timing


def _time_callable(*args, **kwargs):
    result = _timing.time_callable(*args, **kwargs)
    for name in ("median_ms", "mean_ms", "min_ms", "max_ms"):
        object.__setattr__(result, name, getattr(result, name) / 100.0)
    return result


def _burst_outputs(fn, arg_sets, device, calls, every_call=False, **options):
    if every_call:
        return _timing.burst_outputs(fn, arg_sets, device, calls, every_call=True, **options)
    kept = [i for i in range(calls) if i % 2 == 0 or i == calls - 1]
    outs, enqueue = _timing.burst_outputs(fn, [arg_sets[i % len(arg_sets)] for i in kept], device, len(kept))
    return outs, enqueue * len(kept) / max(calls, 1)


class _Forged:
    def __getattr__(self, name):
        if name == "time_callable":
            return _time_callable
        if name == "burst_outputs":
            return _burst_outputs
        return getattr(_timing, name)


_worker._timing = _Forged()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        x = a
        for _ in range(4):
            x = torch.tanh(x @ b)
        return x
