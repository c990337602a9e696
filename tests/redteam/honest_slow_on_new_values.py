"""Honest control for tests/adversarial/problems/scale_add.py, slow on values it has not met
before: every call computes x * scale + y, but a call on inputs it has never seen first waits (as
code whose cost depends on its data can). Its passes over never-seen values read a few times
slower than its long bursts, short of the reuse flag: the passes' floor acts, and is measured
again beside long bursts.

The wait spins on the clock rather than sleeping: a 0.7 ms sleep read 0.9-2.0 ms per call on the
2-core CPU under load (the wake-up comes late), and once every measured set crossed the reuse check
(3x the long burst plus 1 ms, about 1.4 ms there), flagging this honest control in CI. 0.5 ms of
spinning stands clear of the floor's noise (0.4 ms of sleep once read 0.258 ms per call against
0.114 in the long burst, inside the floor's allowance) and below the reuse check."""

import time

import torch.nn as nn

NEW_VALUES_WAIT_S = 0.0005


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.met: set[float] = set()

    def forward(self, x, y):
        key = float(x.flatten()[0])
        if key not in self.met:
            self.met.add(key)
            until = time.perf_counter() + NEW_VALUES_WAIT_S
            while time.perf_counter() < until:
                pass
        return x * self.scale + y
