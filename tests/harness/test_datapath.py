"""Sealed packs: what the receiver maps can no longer change, and a forged pack is refused."""

from __future__ import annotations

import mmap
import os
from multiprocessing import Pipe

import pytest
import torch

from hercules.harness.datapath import (
    MappedPack,
    PackError,
    PackLayout,
    read_pack,
    receive_fds,
    send_fds,
    write_pack,
)


def test_values_round_trip_through_a_unix_socket_in_order():
    values = [torch.randn(64, 32), 7, torch.arange(5), torch.empty(0, 3), torch.randn(4).bfloat16(), "x"]
    ours, theirs = Pipe(duplex=True)
    fd, layout = write_pack(values)
    ours.send_bytes(b"header")
    send_fds(ours.fileno(), [fd])
    os.close(fd)
    assert theirs.recv_bytes() == b"header"
    [got] = receive_fds(theirs.fileno(), 1)
    back = read_pack(got, PackLayout.from_message(layout.to_message()))
    os.close(got)
    for a, b in zip(values, back):
        assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
    # The channel stays usable (blocking) after descriptors went over it.
    theirs.send_bytes(b"after")
    assert ours.recv_bytes() == b"after"


def test_a_sealed_pack_cannot_be_written_or_mapped_writable():
    fd, layout = write_pack([torch.ones(16)])
    with pytest.raises(OSError):
        os.write(fd, b"late")
    with pytest.raises(OSError):
        mmap.mmap(fd, layout.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(fd)


def test_unsealed_or_undersized_packs_and_lying_layouts_are_refused():
    fd = os.memfd_create("forged", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, 64)
    _, layout = write_pack([torch.ones(16)])
    with pytest.raises(PackError, match="not sealed"):
        MappedPack(fd, layout)
    os.close(fd)
    with pytest.raises(PackError, match="does not fit"):
        PackLayout.from_message({"slots": [[[4], "float32", 0, 8]], "values": [None], "size": 64})
    with pytest.raises(PackError, match="unknown dtype"):
        PackLayout.from_message({"slots": [[[4], "os.system", 0, 16]], "values": [None], "size": 64})


def test_descriptors_announced_but_never_sent_time_out():
    ours, theirs = Pipe(duplex=True)
    with pytest.raises(PackError, match="no descriptors"):
        receive_fds(theirs.fileno(), 1, timeout=0.2)
