"""Honest control for tests/adversarial/problems/scale_add.py, slow on values it has not met
before: every call computes x * scale + y, but a call on inputs it has never seen first waits (as
code whose cost depends on its data can). Its passes over never-seen values read a few times
slower than its long bursts, short of the reuse flag: the passes' floor acts, and is measured
again beside long bursts.

The wait: 0.4 ms left the floor within the calibration's noise on the 2-core CPU (one passes'
figure read 0.258 ms per call against 0.114 in the long burst, under the floor's 1.2x less its
error allowance); 0.7 ms stands clear of it, and still below the single-call reuse check (three
times a seen call plus its 1 ms slack)."""

import time

import torch.nn as nn

NEW_VALUES_WAIT_S = 0.0007


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
