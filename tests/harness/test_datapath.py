"""Sealed packs: what the receiver maps can no longer change, and a forged pack is refused."""

from __future__ import annotations

import fcntl
import mmap
import os
from multiprocessing import Pipe

import pytest
import torch

from hercules.harness.datapath import (
    MappedPack,
    PackBusy,
    PackError,
    PackLayout,
    PackWriter,
    destination_pack,
    fill_pack,
    planned_layout,
    read_pack,
    seal_pack,
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


def test_a_transposed_output_travels_in_its_own_memory_order_and_keeps_its_layout():
    base = torch.randn(3, 4, 5)
    permuted = base.permute(2, 0, 1)  # dense, not contiguous: a conv's output returned as a view
    sliced = torch.randn(6, 8)[:, :4]  # gaps between rows: packed row-major as before
    fd, layout = write_pack([permuted, sliced, base], keep_layout=True)
    slots = PackLayout.from_message(layout.to_message()).slots
    assert slots[0].strides == permuted.stride() and slots[1].strides is None and slots[2].strides is None
    with MappedPack(fd, PackLayout.from_message(layout.to_message())) as pack:
        # The pack holds the permuted tensor's storage as it lies in memory: no transposing copy.
        raw = pack._bytes()[slots[0].offset:slots[0].offset + slots[0].nbytes].view(torch.float32)
        assert torch.equal(raw, base.reshape(-1))
        back = pack.values()
        targets = [torch.empty(5, 3, 4), torch.empty(6, 4), torch.empty(3, 4, 5)]
        pack.copy_into(targets)
    os.close(fd)
    assert back[0].stride() == permuted.stride() and torch.equal(back[0], permuted)
    assert torch.equal(back[1], sliced) and torch.equal(back[2], base)
    assert all(torch.equal(t, v) for t, v in zip(targets, [permuted, sliced, base]))
    # Without keep_layout (inputs) every tensor is row-major, as a receiver of inputs expects.
    fd, layout = write_pack([permuted])
    assert layout.slots[0].strides is None and torch.equal(read_pack(fd, layout)[0], permuted)
    os.close(fd)


def test_strides_from_another_process_that_reach_outside_their_slot_are_refused():
    # 2 x 3 floats (24 bytes) whose strides would address element 1 + 2 * 10 = 21
    for strides in ([10, 1], [1, -2], [1]):
        with pytest.raises(PackError, match="strides"):
            PackLayout.from_message({"slots": [[[2, 3], "float32", 0, 24, strides]], "values": [None], "size": 64})
    assert PackLayout.from_message({"slots": [[[2, 3], "float32", 0, 24, [1, 2]]], "values": [None],
                                    "size": 64}).slots[0].strides == (1, 2)


def test_descriptors_announced_but_never_sent_time_out():
    ours, theirs = Pipe(duplex=True)
    with pytest.raises(PackError, match="no descriptors"):
        receive_fds(theirs.fileno(), 1, timeout=0.2)


def _specs(values):
    return [{"shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", "")} for v in values]


def test_a_destination_filled_by_its_writer_and_sealed_by_its_receiver_reads_back_in_order():
    call = [torch.randn(3, 5), torch.arange(7, dtype=torch.int64), torch.randn(2, 2).bfloat16()]
    layout = planned_layout(_specs(call), repeats=3)
    # The planned layout is the one write_pack gives the same tensors.
    _fd, written = write_pack(call * 3)
    os.close(_fd)
    assert layout.slots == written.slots and layout.size == written.size
    fd = destination_pack(layout)
    try:
        writer = PackWriter(fd, layout)
        calls = [[t + i if t.is_floating_point() else t * i for t in call] for i in range(3)]
        for i, outs in enumerate(calls):
            writer.write(i * len(call), outs)
        # A writable mapping still there: busy (EBUSY), which the parent's burst requests make
        # again (measure.Transfers.candidate_into) and refuse at the last attempt.
        with pytest.raises(PackBusy, match="could not be sealed"):
            with mmap.mmap(fd, layout.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE):
                seal_pack(fd)
        seal_pack(fd)
        back = read_pack(fd, layout)
        for got, want in zip(back, [t for outs in calls for t in outs]):
            assert torch.equal(got, want)
        with pytest.raises(OSError):
            os.pwrite(fd, b"late", 0)
    finally:
        os.close(fd)


def test_outputs_that_do_not_fit_a_destination_are_refused_and_nothing_is_written():
    layout = planned_layout([{"shape": [4], "dtype": "float32"}], repeats=2)
    fd = destination_pack(layout)
    try:
        writer = PackWriter(fd, layout)
        for wrong in ([torch.zeros(5)], [torch.zeros(4, dtype=torch.float64)], [3.0], [torch.zeros(4)] * 3):
            with pytest.raises(PackError):
                writer.write(0, wrong)
        assert not fill_pack(fd, layout, [torch.zeros(4), torch.zeros(4, dtype=torch.float16)])
        assert os.pread(fd, layout.size, 0) == bytes(layout.size)
        assert fill_pack(fd, layout, [torch.ones(4), torch.full((4,), 2.0)])
    finally:
        os.close(fd)


def test_a_writers_own_pack_is_sealed_once_a_passing_reference_to_it_is_gone():
    """Sealing fails with EBUSY while something holds the file writable; the writer's own pack is
    sealed again until it is not (a transient hold), and refused only past its attempts."""
    import errno
    import threading

    from hercules.harness import datapath

    fd = os.memfd_create("held", os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, 4096)
        held = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        threading.Timer(0.05, held.close).start()  # released after a few attempts
        datapath._seal_own(fd)
        assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) & datapath.SEALS == datapath.SEALS
    finally:
        os.close(fd)

    fd = os.memfd_create("kept", os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, 4096)
        kept = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        with pytest.raises(OSError) as raised:
            datapath._seal_own(fd)
        assert raised.value.errno == errno.EBUSY
        kept.close()
    finally:
        os.close(fd)
