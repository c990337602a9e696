"""Helpers shared by the reward-service tests (a plain module: conftest modules are not importable
by name when several exist)."""

from __future__ import annotations

import textwrap
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# Cheap CPU evaluations: two trials, 50 ms of timing, eager only (the server's CPU default).
SERVE_ARGS = ["--device", "cpu", "--workers", "2", "--trials", "2", "--budget", "0.05"]


def candidate_code(forward: str = "return torch.relu(self.lin(x)) * 2", init_extra: str = "") -> str:
    return textwrap.dedent(f"""
        import os
        import signal
        import time
        import torch
        import torch.nn as nn

        class ModelNew(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.lin = nn.Linear(n, n)
                {init_extra}

            def forward(self, x):
                {forward}
    """)
