"""Exploit: batch-and-skip with knowledge of the protocol.

The worker's timing module is replaced: the in-process timing reports a hundredth of what it
measured, and a burst of back-to-back calls runs only its last call where only the last call's
outputs are judged, so the parent's own clock sees one call's work spread over many. Where every
call's outputs are asked for, it computes them all. What is handed in is computed honestly.
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
    # Where every call's outputs are judged, compute them all; elsewhere only the last call, whose
    # outputs are the only ones judged.
    if every_call:
        return _timing.burst_outputs(fn, arg_sets, device, calls, every_call=True, **options)
    outs, enqueue = _timing.burst_outputs(fn, [arg_sets[(calls - 1) % len(arg_sets)]], device, 1)
    return outs, enqueue / max(calls, 1)


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
