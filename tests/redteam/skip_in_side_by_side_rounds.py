"""Exploit: behave while checked, skip in the rounds timed beside the baseline.

The worker's burst is replaced: the first plain bursts (the long bursts the checks compare
everything with) run every call; every plain burst after them (the rounds in which eager is timed
beside the candidate come last) runs only its last call, the only one judged there. Bursts whose
every call's outputs are asked for compute them all.
"""

import __main__ as _worker  # the worker runs as ``python -m hercules.harness.worker``

import torch
import torch.nn as nn

if not hasattr(_worker, "serve"):  # an exploit that finds nothing to attack must not pass as caught
    raise ImportError("the evaluation worker is not this process's main module")
_timing = _worker._timing
_plain_bursts = [0]
HONEST_PLAIN_BURSTS = 2  # the measurement's long bursts


def _burst_outputs(fn, arg_sets, device, calls, every_call=False, **options):
    if every_call:
        return _timing.burst_outputs(fn, arg_sets, device, calls, every_call=True, **options)
    _plain_bursts[0] += 1
    if _plain_bursts[0] <= HONEST_PLAIN_BURSTS:
        return _timing.burst_outputs(fn, arg_sets, device, calls, **options)
    outs, enqueue = _timing.burst_outputs(fn, [arg_sets[(calls - 1) % len(arg_sets)]], device, 1)
    return outs, enqueue / max(calls, 1)


class _Forged:
    def __getattr__(self, name):
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
