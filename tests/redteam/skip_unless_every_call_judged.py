"""Exploit: batch-and-skip wherever not every call is known to be judged.

The worker's timing is replaced: in-process times are a hundredth of what was measured; a fresh
pass (whose every call is judged) runs honestly; every other burst runs every other call and hands
in the previous call's outputs for the skipped ones, so a burst that returns every call's outputs
still has the right number of them, and its last call is always computed.
"""

import sys

import __main__ as _worker  # the worker runs as ``python -m hercules.harness.worker``

import torch.nn as nn

if not hasattr(_worker, "serve"):  # an exploit that finds nothing to attack must not pass as caught
    raise ImportError("the evaluation worker is not this process's main module")
_timing = _worker._timing


def _time_callable(*args, **kwargs):
    result = _timing.time_callable(*args, **kwargs)
    for name in ("median_ms", "mean_ms", "min_ms", "max_ms"):
        object.__setattr__(result, name, getattr(result, name) / 100.0)
    return result


def _in_fresh_pass():
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "op_fresh_burst":
            return True
        frame = frame.f_back
    return False


def _burst_outputs(fn, arg_sets, device, calls, every_call=False, sink=None, **options):
    if _in_fresh_pass():
        return _timing.burst_outputs(fn, arg_sets, device, calls, every_call=every_call, sink=sink, **options)
    ran = [i for i in range(calls) if i % 2 == 0 or i == calls - 1]
    per_call, enqueue = _timing.burst_outputs(fn, [arg_sets[i % len(arg_sets)] for i in ran], device, len(ran),
                                              every_call=True, **options)
    by_call, latest = [], None
    for i in range(calls):
        if i in ran:
            latest = per_call[ran.index(i)]
        by_call.append(latest)
    enqueue = enqueue * len(ran) / max(calls, 1)
    if every_call and sink is not None:  # outputs written out call by call: the stale ones too
        for i, outs in enumerate(by_call):
            sink(i, outs)
        return [], enqueue
    return (by_call if every_call else by_call[-1]), enqueue


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
        import torch

        x = a
        for _ in range(4):
            x = torch.tanh(x @ b)
        return x
