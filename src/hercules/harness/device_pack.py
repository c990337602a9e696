"""Tensors between worker processes in device memory: CUDA virtual-memory allocations handed over
as POSIX file descriptors.

Why: a host pack (``datapath.write_pack``) costs a device-to-host copy into a memory file on one
side and a host-to-device copy on the other. On the H200 a 3.2 GB output pack (KernelBench
11_4D_tensor_matrix_multiplication) took ~7 s per hand-over that way, and an evaluation hands over
outputs for every trial, every burst and the round-trip calibration. A device pack is one
allocation made with ``cuMemCreate`` for export as a file descriptor: the sender copies its tensors
into it on the device, exports the descriptor, and drops its own mapping and handle before the
descriptor leaves; the receiver imports it, maps it *read-only*, copies the bytes into memory of its
own on the device and releases it. Nothing crosses host memory.

Why not CUDA IPC (``cudaIpcGetMemHandle``, what ``torch.multiprocessing`` uses): legacy IPC handles
do not cross the sandbox's pid and IPC namespaces. A file descriptor crosses them like any other,
over the worker's Unix socket, and the parent relays it without mapping anything.

What it does not give that a sealed memory file does: a hostile sender can keep a mapping of its
own (it controls its process) and write into the allocation after handing it in, until the
receiver has copied it out. The receiver copies at once, before judging anything, so such a late
write can only land inside that window (the parent's relay and one device copy, milliseconds);
what is judged is the receiver's own copy, which nobody else can change. Writes the receiver might
fear in the other direction (a candidate writing into a reference input pack it imported) land in
an allocation the reference no longer maps.

The driver is reached through ``ctypes`` (``libcuda.so.1``); the struct layouts are checked against
``cuda.h`` by a test that compiles a probe against the toolkit's header.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from hercules.harness.datapath import PackError, PackLayout, TensorSlot, check_targets, dtype_of, plan_slots

MEDIUM = "cuda"

# cuda.h enumerators (CUDA 12 and 13 agree)
CU_MEM_ALLOCATION_TYPE_PINNED = 0x1
CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1
CU_MEM_LOCATION_TYPE_DEVICE = 0x1
CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1
CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3
CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0


class DevicePackError(PackError):
    """The driver refused a step of a device pack (or there is no driver to ask)."""


class CUmemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class CUmemAllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class CUmemAllocationProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", CUmemLocation),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", CUmemAllocFlags)]


class CUmemAccessDesc(ctypes.Structure):
    _fields_ = [("location", CUmemLocation), ("flags", ctypes.c_int)]


_u64 = ctypes.c_uint64
_size = ctypes.c_size_t
# name -> argument types; every one returns CUresult (int)
_SIGNATURES: dict[str, list[Any]] = {
    "cuMemGetAllocationGranularity": [ctypes.POINTER(_size), ctypes.POINTER(CUmemAllocationProp), ctypes.c_int],
    "cuMemCreate": [ctypes.POINTER(_u64), _size, ctypes.POINTER(CUmemAllocationProp), _u64],
    "cuMemExportToShareableHandle": [ctypes.c_void_p, _u64, ctypes.c_int, _u64],
    "cuMemImportFromShareableHandle": [ctypes.POINTER(_u64), ctypes.c_void_p, ctypes.c_int],
    "cuMemAddressReserve": [ctypes.POINTER(_u64), _size, _size, _u64, _u64],
    "cuMemAddressFree": [_u64, _size],
    "cuMemMap": [_u64, _size, _size, _u64, _u64],
    "cuMemUnmap": [_u64, _size],
    "cuMemSetAccess": [_u64, _size, ctypes.POINTER(CUmemAccessDesc), _size],
    "cuMemRelease": [_u64],
    "cuMemcpyDtoD_v2": [_u64, _u64, _size],
    "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
}


class Driver:
    """The few CUDA driver calls a device pack needs, on the context torch made current."""

    def __init__(self, library: str = "libcuda.so.1"):
        try:
            lib = ctypes.CDLL(library)
        except OSError as exc:
            raise DevicePackError(f"no CUDA driver library: {exc}") from None
        self.calls = {}
        for name, argtypes in _SIGNATURES.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:
                raise DevicePackError(f"the CUDA driver has no {name}") from None
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
            self.calls[name] = fn
        self._granularity: dict[int, int] = {}

    def call(self, name: str, *args: Any) -> None:
        result = self.calls[name](*args)
        if result != 0:
            text = ctypes.c_char_p()
            self.calls["cuGetErrorName"](result, ctypes.byref(text))
            raise DevicePackError(f"{name} failed: {(text.value or b'?').decode()} ({result})")

    @staticmethod
    def _prop(device_index: int) -> CUmemAllocationProp:
        prop = CUmemAllocationProp()
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        prop.location = CUmemLocation(CU_MEM_LOCATION_TYPE_DEVICE, device_index)
        return prop

    def granularity(self, device_index: int) -> int:
        if device_index not in self._granularity:
            value = _size()
            self.call("cuMemGetAllocationGranularity", ctypes.byref(value), ctypes.byref(self._prop(device_index)),
                      CU_MEM_ALLOC_GRANULARITY_MINIMUM)
            self._granularity[device_index] = int(value.value)
        return self._granularity[device_index]

    def create(self, size: int, device_index: int) -> int:
        handle = _u64()
        self.call("cuMemCreate", ctypes.byref(handle), size, ctypes.byref(self._prop(device_index)), 0)
        return handle.value

    def export_fd(self, handle: int) -> int:
        fd = ctypes.c_int(-1)
        self.call("cuMemExportToShareableHandle", ctypes.byref(fd), handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)
        return fd.value

    def import_fd(self, fd: int) -> int:
        handle = _u64()
        # The POSIX descriptor is passed by value in the pointer argument, as cuda.h specifies.
        self.call("cuMemImportFromShareableHandle", ctypes.byref(handle), ctypes.c_void_p(fd),
                  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return handle.value

    def map(self, handle: int, size: int, device_index: int, writable: bool) -> int:
        """A fresh address range with ``handle`` mapped over it; unmapped by ``unmap``."""
        ptr = _u64()
        self.call("cuMemAddressReserve", ctypes.byref(ptr), size, 0, 0, 0)
        try:
            self.call("cuMemMap", ptr.value, size, 0, handle, 0)
            try:
                access = CUmemAccessDesc(CUmemLocation(CU_MEM_LOCATION_TYPE_DEVICE, device_index),
                                         CU_MEM_ACCESS_FLAGS_PROT_READWRITE if writable else CU_MEM_ACCESS_FLAGS_PROT_READ)
                self.call("cuMemSetAccess", ptr.value, size, ctypes.byref(access), 1)
            except DevicePackError:
                self.call("cuMemUnmap", ptr.value, size)
                raise
        except DevicePackError:
            self.call("cuMemAddressFree", ptr.value, size)
            raise
        return ptr.value

    def unmap(self, ptr: int, size: int) -> None:
        self.call("cuMemUnmap", ptr, size)
        self.call("cuMemAddressFree", ptr, size)

    def release(self, handle: int) -> None:
        self.call("cuMemRelease", handle)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        self.call("cuMemcpyDtoD_v2", dst, src, nbytes)


_driver: Driver | None = None


def driver() -> Driver:
    global _driver
    if _driver is None:
        _driver = Driver()
    return _driver


def _index(device: torch.device) -> int:
    if device.type != "cuda":
        raise DevicePackError(f"device packs live in CUDA memory, not on {device}")
    return device.index if device.index is not None else torch.cuda.current_device()


@dataclass(frozen=True)
class _Spare:
    handle: int
    ptr: int
    size: int
    index: int


# The allocation ``reserve`` made for the next pack this process writes, mapped and ready.
_spare: _Spare | None = None


def _granules(nbytes: int, drv: Driver, index: int) -> int:
    grain = drv.granularity(index)
    return max(grain, (nbytes + grain - 1) // grain * grain)  # cuMemCreate/cuMemMap take whole granules


def reserve(nbytes: int, device: torch.device | str) -> int:
    """Create and map now, before the request whose reply will carry it, the allocation of the next
    device pack of at most ``nbytes`` this process writes; returns its size.

    Why: a pack's own allocation is driver work inside the timed request, and on the H200 it cost
    more than the copy it holds (1 GB of outputs: cuMemCreate, map and export ~1.5 ms, the copy
    ~0.5 ms) and read differently in the candidate's process and the reference's. Its analogue for
    host packs is ``datapath.destination_pack``, allocated by the parent before the clock starts.
    A spare reserved earlier and not used is released first."""
    global _spare
    device = torch.device(device)
    index = _index(device)
    drv = driver()
    drop_spare()
    handle, ptr, size = _mapped(nbytes, index, drv)
    _spare = _Spare(handle, ptr, size, index)
    return size


def drop_spare() -> None:
    """Release the reserved allocation, if any (device memory nothing else may hold on to)."""
    global _spare
    spare, _spare = _spare, None
    if spare is not None:
        drv = driver()
        try:
            drv.unmap(spare.ptr, spare.size)
        finally:
            drv.release(spare.handle)


def _allocation(used: int, index: int, drv: Driver) -> tuple[int, int, int]:
    """(handle, writable mapping, size) for a pack of ``used`` bytes: the reserved spare where it
    is on this device and large enough (taken: used once), else a new one."""
    global _spare
    spare = _spare
    if spare is not None and spare.index == index and spare.size >= used:
        _spare = None
        return spare.handle, spare.ptr, spare.size
    return _mapped(used, index, drv)


def _mapped(nbytes: int, index: int, drv: Driver) -> tuple[int, int, int]:
    """A new allocation of at least ``nbytes`` on device ``index``: (handle, writable mapping, size)."""
    size = _granules(nbytes, drv, index)
    handle = drv.create(size, index)
    try:
        return handle, drv.map(handle, size, index, writable=True), size
    except DevicePackError:
        drv.release(handle)
        raise


def write_device_pack(values: Sequence[Any], device: torch.device | str,
                      keep_layout: bool = False) -> tuple[int, PackLayout]:
    """An exported allocation on ``device`` holding ``values`` (tensors as raw contiguous bytes, or
    with ``keep_layout`` a dense tensor's bytes in its own memory order: ``datapath.dense_strides``);
    returns (fd, layout). This process keeps no mapping or handle of it once the call returns. The
    allocation ``reserve`` made is used where it fits."""
    device = torch.device(device)
    index = _index(device)
    drv = driver()
    slots, plain, used = plan_slots(values, keep_layout)
    torch.cuda.synchronize(device)  # the values must be complete before their bytes are copied
    handle, ptr, size = _allocation(used, index, drv)
    try:
        try:
            for value, slot in zip(values, slots):
                if slot is None or slot.nbytes == 0:
                    continue
                source = value.detach().to(device)
                if slot.strides is None or tuple(source.stride()) != slot.strides:
                    source = source.contiguous() if slot.strides is None else \
                        torch.empty_strided(slot.shape, slot.strides, dtype=source.dtype, device=device).copy_(source)
                drv.copy(ptr + slot.offset, source.data_ptr(), slot.nbytes)
                del source
            torch.cuda.synchronize(device)  # device-to-device copies do not wait for the host
        finally:
            drv.unmap(ptr, size)
        fd = drv.export_fd(handle)
    finally:
        drv.release(handle)  # the exported descriptor keeps the allocation alive
    return fd, PackLayout(slots=tuple(slots), values=tuple(plain), size=size, medium=MEDIUM)


class DevicePack:
    """A received device pack, mapped read-only; ``values(device)`` copies its tensors into this
    process's own memory (a copy nobody else can write), ``close`` drops the mapping."""

    def __init__(self, fd: int, layout: PackLayout, device: torch.device | str | None = None):
        if layout.medium != MEDIUM:
            raise PackError(f"not a device pack: {layout.medium}")
        self.device = torch.device(device) if device is not None else torch.device("cuda")
        self.index = _index(self.device)
        self.layout = layout
        self.drv = driver()
        if layout.size % self.drv.granularity(self.index):
            raise PackError(f"device pack of {layout.size} bytes is not a whole number of allocation granules")
        self.handle = self.drv.import_fd(fd)
        try:
            # Mapping more than the sender allocated fails here: the layout cannot overstate the pack.
            self.ptr = self.drv.map(self.handle, layout.size, self.index, writable=False)
        except DevicePackError:
            self.drv.release(self.handle)
            raise

    def values(self, device: torch.device | str | None = None, clone: bool = True, start: int = 0) -> list[Any]:
        """The pack's values from the ``start``-th on, tensors copied to ``device`` (this pack's
        device by default; another device, the CPU included, gets a copy of the device copy)."""
        target = torch.device(device) if device is not None else self.device
        out: list[Any] = []
        for slot, value in list(zip(self.layout.slots, self.layout.values))[start:]:
            if slot is None:
                out.append(value)
                continue
            out.append(self._tensor(slot))
        torch.cuda.synchronize(self.device)  # copied out before the mapping can go
        if target != self.device:
            out = [v.to(target) if isinstance(v, torch.Tensor) else v for v in out]
        return out

    def copy_into(self, targets: Sequence[Any]) -> None:
        """Copy each tensor of the pack straight into the contiguous device tensor at its place in
        ``targets`` (same shape and dtype, on this pack's device); plain values are skipped."""
        check_targets(self.layout, targets)
        for slot, dst in zip(self.layout.slots, targets):
            if slot is not None and slot.nbytes and dst is not None:
                if dst.device.type != "cuda" or (dst.device.index if dst.device.index is not None else 0) != self.index:
                    raise PackError(f"a place on {dst.device} for a pack on cuda:{self.index}")
                if slot.strides is None:
                    self.drv.copy(dst.data_ptr(), self.ptr + slot.offset, slot.nbytes)
                else:
                    dst.copy_(self._tensor(slot))
        torch.cuda.synchronize(self.device)

    def _tensor(self, slot: TensorSlot) -> torch.Tensor:
        """A slot's tensor copied out into this process's own memory, in the sender's layout."""
        dtype = dtype_of(slot.dtype)
        tensor = torch.empty(slot.shape, dtype=dtype, device=self.device) if slot.strides is None else \
            torch.empty_strided(slot.shape, slot.strides, dtype=dtype, device=self.device)
        if slot.nbytes:
            self.drv.copy(tensor.data_ptr(), self.ptr + slot.offset, slot.nbytes)
        return tensor

    def close(self) -> None:
        if self.ptr is None:
            return
        ptr, self.ptr = self.ptr, None
        try:
            self.drv.unmap(ptr, self.layout.size)
        finally:
            self.drv.release(self.handle)

    def __enter__(self) -> "DevicePack":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_device_pack(fd: int, layout: PackLayout, device: torch.device | str) -> list[Any]:
    with DevicePack(fd, layout, device) as pack:
        return pack.values(device)


def probe_values(seed: int, device: torch.device | str, nbytes: int = 1 << 20) -> list[torch.Tensor]:
    """The values of a data-path probe: a seeded byte pattern and a small float tensor, the same
    for the same seed in any process (made on the CPU, then moved)."""
    g = torch.Generator().manual_seed(seed)
    raw = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=g)
    floats = torch.randn(3, 5, generator=g, dtype=torch.float32)
    return [raw.to(device), floats.to(device)]


__all__ = ["DevicePack", "DevicePackError", "Driver", "MEDIUM", "TensorSlot", "probe_values", "read_device_pack",
           "write_device_pack"]
