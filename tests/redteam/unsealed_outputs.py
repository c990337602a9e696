"""Exploit: hand outputs in through a pack that can still change after it was handed in.

The worker's pack writer is replaced: outputs go into a memory file that is never sealed (so
they could be rewritten after the comparison started), or, as a device pack, under a layout that
claims more bytes than the allocation holds. The computation itself is honest; only the pack lies.
"""

import fcntl
import mmap
import os
import sys

import torch
import torch.nn as nn

# The worker runs as ``python -m hercules.harness.worker``: its module is __main__.
_worker = next((m for m in (sys.modules.get("hercules.harness.worker"), sys.modules.get("__main__"))
                if m is not None and hasattr(m, "serve")), None)
if _worker is None:  # an exploit that finds nothing to attack must not pass as a caught one
    raise ImportError("the evaluation worker's module is not in sys.modules")
if _worker is not None:
    _datapath = sys.modules["hercules.harness.datapath"]
    _real_write = _worker.write_pack

    def _unsealed(values, name="pack", medium="memfd", device=None, **options):
        fd, layout = _real_write(values, name, medium, device, **options)
        if layout.medium == "cuda":  # claim one more granule than was allocated
            os.close(fd)
            fd, layout = _real_write(values, name, medium, device, **options)
            return fd, _datapath.PackLayout(layout.slots, layout.values, layout.size * 2, layout.medium)
        data = os.pread(fd, layout.size, 0)
        os.close(fd)
        forged = os.memfd_create("outputs", os.MFD_ALLOW_SEALING)
        os.ftruncate(forged, layout.size)
        with mmap.mmap(forged, layout.size) as mapped:
            mapped[:] = data
        fcntl.fcntl(forged, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)  # sealed, but not against writes
        return forged, layout

    _worker.write_pack = _unsealed


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        x = a
        for _ in range(4):
            x = torch.tanh(x @ b)
        return x
