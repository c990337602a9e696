"""Exploit: rewrite the worker's replies on their way to the parent.

The worker's message encoder is replaced: every reply that carries timing figures or an enqueue
figure leaves with them divided by 1000, and integrity replies leave empty.
"""

import sys

import torch
import torch.nn as nn

# The worker runs as ``python -m hercules.harness.worker``: its module is __main__.
_worker = next((m for m in (sys.modules.get("hercules.harness.worker"), sys.modules.get("__main__"))
                if m is not None and hasattr(m, "serve")), None)
if _worker is None:  # an exploit that finds nothing to attack must not pass as a caught one
    raise ImportError("the evaluation worker's module is not in sys.modules")
if _worker is not None:
    _real_encode = _worker.encode

    def _forge(message):
        if isinstance(message.get("timing"), dict):
            for name in ("median_ms", "mean_ms", "min_ms", "max_ms"):
                message["timing"][name] = message["timing"][name] / 1000.0
        if "enqueue_ms" in message:
            message["enqueue_ms"] = 0.0
        for name in ("patched", "settings", "threads"):
            if name in message:
                message[name] = []
        return _real_encode(message)

    _worker.encode = _forge


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        x = a
        for _ in range(4):
            x = torch.tanh(x @ b)
        return x
