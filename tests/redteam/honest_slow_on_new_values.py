"""Honest control for tests/adversarial/problems/scale_add.py, slow on values it has not met
before: every call computes x * scale + y, but a call on inputs it has never seen then works on
for NEW_VALUES_EXTRA times as long as the computation took (as code whose cost depends on its data
can). Its calls and passes over never-seen values read 1 + NEW_VALUES_EXTRA = 2 times its calls on
values seen and its long bursts: past the floor (JUDGED_RATIO_LIMIT, 1.2x), short of the reuse
check (3x, plus 1 ms on the CPU), so the floor acts and is measured again beside long bursts, and
no flag is raised. At 3.5x (an extra of 2.5) it sat past the reuse check itself once load made the
computation long enough for the 1 ms to stop mattering (16.1 ms per call on new values against
3.2 ms on seen ones, loaded 2-core machine): a candidate that slow on new values is what the
check is for.

The extra work is proportional, not fixed: load on the 2-core CPU scales the computation and the
extra work alike, where a fixed wait did not. A 0.7 ms sleep read 1.98 ms per call once (late
wake-ups), over the reuse check; a fixed 0.5 ms spin left the floor unmoved in one CI run."""

import time

import torch.nn as nn

NEW_VALUES_EXTRA = 1.0


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.met: set[float] = set()

    def forward(self, x, y):
        started = time.perf_counter()
        out = x * self.scale + y
        key = float(x.flatten()[0])
        if key not in self.met:
            self.met.add(key)
            until = time.perf_counter() + NEW_VALUES_EXTRA * (time.perf_counter() - started)
            while time.perf_counter() < until:
                pass
        return out
