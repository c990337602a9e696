"""Exploit: keep a writable mapping of the destination the parent handed over for the outputs.

The worker's destination writer is replaced: every destination is mapped writable and the
mapping is kept after the reply, so outputs could still be written after they were handed in (a
skipped call's, filled in late by a thread). The computation itself is honest; only the hand-over
keeps the door open. The parent seals a destination before anything reads it, and a seal cannot
be added while a writable mapping is left.
"""

import mmap
import sys

import torch
import torch.nn as nn

_worker = next((m for m in (sys.modules.get("hercules.harness.worker"), sys.modules.get("__main__"))
                if m is not None and hasattr(m, "serve")), None)
if _worker is None or not hasattr(_worker, "PackWriter"):  # nothing to attack must not pass as caught
    raise ImportError("the evaluation worker's destination writer is not in reach")

_kept = []  # the mappings, alive for the life of this process


class _KeepsWritable(_worker.PackWriter):
    def write(self, start, values):
        if not self.fits(start, values):
            return super().write(start, values)
        mapped = mmap.mmap(self.fd, self.layout.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        _kept.append(mapped)
        whole = torch.frombuffer(mapped, dtype=torch.uint8)
        for value, slot in zip(values, self.layout.slots[start:start + len(values)]):
            whole[slot.offset:slot.offset + slot.nbytes].copy_(value.detach().contiguous().reshape(-1).view(torch.uint8))


def _fill(fd, layout, values):
    writer = _KeepsWritable(fd, layout)
    if len(values) != len(layout.slots) or not writer.fits(0, values):
        return False
    writer.write(0, values)
    return True


_worker.PackWriter = _KeepsWritable
_worker.fill_pack = _fill


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        x = a
        for _ in range(4):
            x = torch.tanh(x @ b)
        return x
