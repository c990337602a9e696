"""Honest control for tests/adversarial/problems/scale_add.py, slow on values it has not met
before: every call computes x * scale + y, but a call on inputs it has never seen first waits (as
code whose cost depends on its data can). Its passes over never-seen values read a few times
slower than its long bursts, short of the reuse flag: the passes' floor acts, and is measured
again beside long bursts."""

import time

import torch.nn as nn

NEW_VALUES_WAIT_S = 0.0004


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.met: set[float] = set()

    def forward(self, x, y):
        key = float(x.flatten()[0])
        if key not in self.met:
            self.met.add(key)
            time.sleep(NEW_VALUES_WAIT_S)
        return x * self.scale + y
