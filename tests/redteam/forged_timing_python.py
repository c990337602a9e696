"""Exploit: rewrite the worker's own timing and its tripwires from Python.

Every timing figure the candidate's process reports is divided by 100, and the integrity snapshot
is told nothing changed. The computation is honest: only the reported time is forged.
"""

import sys

import torch
import torch.nn as nn

# The worker runs as ``python -m hercules.harness.worker``: its module is __main__.
_worker = next((m for m in (sys.modules.get("hercules.harness.worker"), sys.modules.get("__main__"))
                if m is not None and hasattr(m, "serve")), None)
if _worker is None:  # an exploit that finds nothing to attack must not pass as a caught one
    raise ImportError("the evaluation worker's module is not in sys.modules")
_integrity = sys.modules.get("hercules.harness.integrity")
if _worker is not None:
    _timing = _worker._timing
    _real_time = _timing.time_callable

    def _forged_time(*args, **kwargs):
        result = _real_time(*args, **kwargs)
        for name in ("median_ms", "mean_ms", "min_ms", "max_ms"):
            object.__setattr__(result, name, getattr(result, name) / 100.0)
        return result

    class _Forged:
        def __getattr__(self, name):
            return _forged_time if name == "time_callable" else getattr(_timing, name)

    _worker._timing = _Forged()
if _integrity is not None:
    _integrity.Snapshot.changed_attributes = lambda self: []
    _integrity.Snapshot.changed_settings = lambda self: []


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        x = a
        for _ in range(4):
            x = torch.tanh(x @ b)
        return x
