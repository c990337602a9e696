"""Device packs: the ctypes view of the CUDA driver matches cuda.h, the host path stands in where
there is no device, and (on a GPU) a pack crosses to another process and back intact."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import shutil
import subprocess
from multiprocessing import Pipe
from pathlib import Path

import pytest
import torch

from hercules.harness import device_pack
from hercules.harness.datapath import PackError, PackLayout, open_pack, read_pack, receive_fds, send_fds, write_pack

CUDA_HOME = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))

LAYOUT_PROBE = r"""
#include <stdio.h>
#include <stddef.h>
#include <cuda.h>
int main(void) {
    printf("prop %zu %zu %zu %zu %zu\n", sizeof(CUmemAllocationProp), offsetof(CUmemAllocationProp, location),
           offsetof(CUmemAllocationProp, win32HandleMetaData), offsetof(CUmemAllocationProp, allocFlags),
           sizeof(((CUmemAllocationProp *)0)->allocFlags));
    printf("access %zu %zu\n", sizeof(CUmemAccessDesc), offsetof(CUmemAccessDesc, flags));
    printf("location %zu\n", sizeof(CUmemLocation));
    printf("enums %d %d %d %d %d %d\n", CU_MEM_ALLOCATION_TYPE_PINNED, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
           CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_ACCESS_FLAGS_PROT_READ, CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
           CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    return 0;
}
"""


@pytest.mark.skipif(not (CUDA_HOME / "include" / "cuda.h").exists() or shutil.which("cc") is None,
                    reason="needs the CUDA toolkit's cuda.h and a C compiler")
def test_driver_structs_and_enums_match_cuda_h(tmp_path):
    source = tmp_path / "probe.c"
    source.write_text(LAYOUT_PROBE)
    binary = tmp_path / "probe"
    subprocess.run(["cc", "-I", str(CUDA_HOME / "include"), str(source), "-o", str(binary)], check=True)
    lines = dict(line.split(" ", 1) for line in subprocess.run([str(binary)], capture_output=True, text=True,
                                                                check=True).stdout.splitlines())
    prop = device_pack.CUmemAllocationProp
    assert [int(v) for v in lines["prop"].split()] == [
        ctypes.sizeof(prop), prop.location.offset, prop.win32HandleMetaData.offset, prop.allocFlags.offset,
        ctypes.sizeof(device_pack.CUmemAllocFlags)]
    access = device_pack.CUmemAccessDesc
    assert [int(v) for v in lines["access"].split()] == [ctypes.sizeof(access), access.flags.offset]
    assert int(lines["location"]) == ctypes.sizeof(device_pack.CUmemLocation)
    assert [int(v) for v in lines["enums"].split()] == [
        device_pack.CU_MEM_ALLOCATION_TYPE_PINNED, device_pack.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        device_pack.CU_MEM_LOCATION_TYPE_DEVICE, device_pack.CU_MEM_ACCESS_FLAGS_PROT_READ,
        device_pack.CU_MEM_ACCESS_FLAGS_PROT_READWRITE, device_pack.CU_MEM_ALLOC_GRANULARITY_MINIMUM]


def test_a_device_pack_asked_for_on_the_cpu_is_a_sealed_host_pack():
    values = [torch.randn(8, 3), 5, torch.arange(4)]
    fd, layout = write_pack(values, "outputs", medium="cuda", device="cpu")
    try:
        assert layout.medium == "memfd"
        back = read_pack(fd, PackLayout.from_message(layout.to_message()))
    finally:
        os.close(fd)
    assert torch.equal(back[0], values[0]) and back[1] == 5 and torch.equal(back[2], values[2])


def test_layouts_name_their_medium_and_an_unknown_one_is_refused():
    fd, layout = write_pack([torch.ones(2)])
    os.close(fd)
    message = layout.to_message()
    assert message["medium"] == "memfd"
    assert PackLayout.from_message({k: v for k, v in message.items() if k != "medium"}).medium == "memfd"
    with pytest.raises(PackError, match="unknown pack medium"):
        PackLayout.from_message({**message, "medium": "nfs"})


def test_a_device_pack_cannot_be_opened_off_the_device():
    layout = PackLayout(slots=(None,), values=(1,), size=1 << 21, medium="cuda")
    with pytest.raises(PackError):
        with open_pack(0, layout, "cpu"):
            pass


def test_a_pack_fills_given_buffers_in_place_and_refuses_ones_that_do_not_fit():
    values = [torch.randn(6, 4), "plain", torch.arange(5, dtype=torch.int32)]
    fd, layout = write_pack(values)
    try:
        targets = [torch.zeros(6, 4), None, torch.zeros(5, dtype=torch.int32)]
        pointers = [targets[0].data_ptr(), targets[2].data_ptr()]
        with open_pack(fd, layout) as pack:
            pack.copy_into(targets)
            with pytest.raises(PackError):
                pack.copy_into([torch.zeros(4, 6), None, targets[2]])
            with pytest.raises(PackError):
                pack.copy_into(targets[:2])
    finally:
        os.close(fd)
    assert torch.equal(targets[0], values[0]) and torch.equal(targets[2], values[2])
    assert [targets[0].data_ptr(), targets[2].data_ptr()] == pointers


# ---- on a GPU -------------------------------------------------------------------------------

def _echo(conn, device: str) -> None:
    """Another process: receive a device pack, hand its values back as a device pack of its own."""
    import torch as _torch

    from hercules.harness.datapath import PackLayout as _Layout
    from hercules.harness.datapath import read_pack as _read
    from hercules.harness.datapath import receive_fds as _receive
    from hercules.harness.datapath import send_fds as _send
    from hercules.harness.device_pack import write_device_pack

    _torch.cuda.init()
    layout = _Layout.from_message(conn.recv())
    [fd] = _receive(conn.fileno(), 1)
    values = _read(fd, layout, device)
    os.close(fd)
    back_fd, back = write_device_pack(values, device)
    conn.send(back.to_message())
    _send(conn.fileno(), [back_fd])
    os.close(back_fd)
    conn.recv()  # stay alive until the parent has read the pack


@pytest.mark.gpu
def test_a_device_pack_crosses_to_another_process_and_back_intact():
    device = "cuda"
    values = [torch.randn(1000, 257, device=device), 3, torch.arange(11, device=device).to(torch.int16),
              torch.randn(5, device=device).bfloat16(), torch.empty(0, 4, device=device)]
    ours, theirs = Pipe(duplex=True)
    child = multiprocessing.get_context("spawn").Process(target=_echo, args=(theirs, device))
    child.start()
    try:
        fd, layout = device_pack.write_device_pack(values, device)
        assert layout.medium == "cuda" and layout.size % device_pack.driver().granularity(0) == 0
        ours.send(layout.to_message())
        send_fds(ours.fileno(), [fd])
        os.close(fd)
        back_layout = PackLayout.from_message(ours.recv())
        [back_fd] = receive_fds(ours.fileno(), 1, timeout=120)
        with open_pack(back_fd, back_layout, device) as pack:
            back = pack.values(device)
        os.close(back_fd)
        ours.send("done")
    finally:
        child.join(60)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0
    for a, b in zip(values, back):
        if isinstance(a, torch.Tensor):
            assert b.device.type == "cuda" and b.dtype == a.dtype and torch.equal(a, b)
        else:
            assert a == b


@pytest.mark.gpu
def test_a_device_pack_fills_device_buffers_in_place():
    values = [torch.randn(300, 7, device="cuda"), torch.arange(9, device="cuda")]
    fd, layout = device_pack.write_device_pack(values, "cuda")
    try:
        targets = [torch.zeros_like(v) for v in values]
        with open_pack(fd, layout, "cuda") as pack:
            pack.copy_into(targets)
            with pytest.raises(PackError):
                pack.copy_into([torch.zeros(300, 7), targets[1]])  # a place on the CPU
    finally:
        os.close(fd)
    assert all(torch.equal(a, b) for a, b in zip(values, targets))


@pytest.mark.gpu
def test_a_reserved_allocation_is_filled_by_the_next_pack_once_and_a_too_small_one_is_not():
    """The allocation made off the clock (``reserve``) holds the next pack that fits, once; a pack
    larger than it gets one of its own, and the unused spare goes with ``drop_spare``."""
    values = [torch.randn(1000, 300, device="cuda")]
    size = device_pack.reserve(values[0].nbytes, "cuda")
    assert size >= values[0].nbytes and device_pack._spare is not None
    fd, layout = device_pack.write_device_pack(values, "cuda")
    try:
        assert device_pack._spare is None and layout.size == size  # the spare was used, and only once
        assert torch.equal(read_pack(fd, layout, "cuda")[0], values[0])
    finally:
        os.close(fd)
    device_pack.reserve(64, "cuda")
    big = [torch.randn(4096, 1024, device="cuda")]
    fd, layout = device_pack.write_device_pack(big, "cuda")
    try:
        assert device_pack._spare is not None and layout.size >= big[0].nbytes
        assert torch.equal(read_pack(fd, layout, "cuda")[0], big[0])
    finally:
        os.close(fd)
    device_pack.drop_spare()
    assert device_pack._spare is None


@pytest.mark.gpu
def test_a_layout_claiming_more_than_the_allocation_is_refused():
    fd, layout = device_pack.write_device_pack([torch.ones(16, device="cuda")], "cuda")
    try:
        lying = PackLayout(layout.slots, layout.values, layout.size * 4, layout.medium)
        with pytest.raises(PackError):
            with open_pack(fd, lying, "cuda") as pack:
                pack.values("cuda")
    finally:
        os.close(fd)


@pytest.mark.gpu
def test_a_transposed_output_crosses_in_its_own_layout_without_a_transposing_copy():
    base = torch.randn(16, 64, 30, device="cuda")
    permuted = base.transpose(1, 2)  # a conv output handed back as a view (CUDA-L1 level 1 #59)
    fd, layout = device_pack.write_device_pack([permuted, base], "cuda", keep_layout=True)
    layout = PackLayout.from_message(layout.to_message())
    assert layout.slots[0].strides == permuted.stride() and layout.slots[1].strides is None
    with open_pack(fd, layout, "cuda") as pack:
        got = pack.values("cuda")
        into = [torch.empty(16, 30, 64, device="cuda"), torch.empty_like(base)]
        pack.copy_into(into)
    os.close(fd)
    assert got[0].stride() == permuted.stride() and torch.equal(got[0], permuted) and torch.equal(got[1], base)
    assert torch.equal(into[0], permuted) and torch.equal(into[1], base)
