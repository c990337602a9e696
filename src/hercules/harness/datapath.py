"""Tensors between worker processes as sealed memory files, never through a pipe.

A pack is one ``memfd`` holding the raw bytes of a list of tensors, sealed against every further
write, shrink or grow before its file descriptor is handed over. What the receiver maps is then
immutable: a candidate cannot change its outputs after it has handed them in (no late writes from
a side stream or a thread), and the reference's inputs cannot be changed under the reference by the
candidate that reads them. Only the small ``PackLayout`` (shapes, dtypes, offsets) travels in a
message; the bytes travel as a descriptor over the worker's Unix socket (``SCM_RIGHTS``).

Costs: one device-to-host copy on the sending side and one host-to-device copy on the receiving
side, against ``torch.save`` through a pipe (several copies and a Python-level serialisation of
hundreds of MB per trial on KernelBench's large problems).
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import select
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

MEDIA = ("memfd", "cuda")
SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
ALIGN = 64
MAX_PACK_FDS = 4


class PackError(ValueError):
    """A pack that is not what it claims to be (unsealed, too small, malformed layout)."""


class PackBusy(PackError):
    """A pack that could not be sealed yet (EBUSY): a writable mapping of it is left, or its pages
    are still pinned (the kernel waits ~150 ms for transient references, then gives up)."""


@dataclass(frozen=True)
class TensorSlot:
    shape: tuple[int, ...]
    dtype: str  # "float32", "bfloat16", ...
    offset: int
    nbytes: int
    # The sender's element strides where its tensor is dense but not contiguous (a transposed or
    # permuted result): its bytes travel in their own memory order and the receiver rebuilds the
    # same layout. None: row-major.
    strides: tuple[int, ...] | None = None


def dense_strides(tensor: torch.Tensor) -> tuple[int, ...] | None:
    """The strides of a tensor that fills exactly ``numel`` consecutive elements in some dimension
    order without being contiguous (``x.transpose(1, 4)``); None for a contiguous tensor or one
    with gaps or overlaps (a slice, an expanded view), which are packed row-major.

    Why: making such an output contiguous inside a timed burst is work the harness adds to the
    candidate. A CUDA-L1 conv3d returning a transposed view packed 20.6 ms a call on the H200
    against 3.0 ms for the same bytes contiguous, and its every-call passes read 6.6x its long
    burst: flagged result_cache."""
    if tensor.is_contiguous() or tensor.numel() == 0:
        return None
    expected = 1
    for stride, size in sorted((s, d) for d, s in zip(tensor.shape, tensor.stride()) if d > 1):
        if stride != expected:
            return None
        expected *= size
    return tuple(int(s) for s in tensor.stride())


def memory_order(tensor: torch.Tensor) -> torch.Tensor:
    """A dense tensor's elements as one flat view, in the order they lie in memory."""
    return tensor.as_strided((tensor.numel(),), (1,))


def laid_out(flat: torch.Tensor, slot: TensorSlot) -> torch.Tensor:
    """A slot's tensor over ``flat`` (its elements in pack order): row-major, or its strides."""
    if slot.strides is None:
        return flat.reshape(slot.shape)
    return flat.as_strided(slot.shape, slot.strides)


@dataclass(frozen=True)
class PackLayout:
    """Where each value of a list lives in the pack: a tensor slot, or a plain value inline."""

    slots: tuple[TensorSlot | None, ...]
    values: tuple[Any, ...]  # the plain (non-tensor) values, None where a tensor slot is
    size: int
    medium: str = "memfd"  # "memfd": a sealed host memory file; "cuda": device memory (device_pack.py)

    def to_message(self) -> dict[str, Any]:
        return {"slots": [None if s is None else [list(s.shape), s.dtype, s.offset, s.nbytes]
                          + ([list(s.strides)] if s.strides is not None else []) for s in self.slots],
                "values": list(self.values), "size": self.size, "medium": self.medium}

    @classmethod
    def from_message(cls, raw: Any) -> "PackLayout":
        try:
            slots = tuple(None if s is None else TensorSlot(tuple(int(d) for d in s[0]), str(s[1]), int(s[2]), int(s[3]),
                                                            tuple(int(x) for x in s[4]) if len(s) > 4 else None)
                          for s in raw["slots"])
            layout = cls(slots=slots, values=tuple(raw["values"]), size=int(raw["size"]),
                         medium=str(raw.get("medium", "memfd")))
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise PackError(f"malformed pack layout: {exc}") from None
        if layout.medium not in MEDIA:
            raise PackError(f"unknown pack medium {layout.medium!r}")
        for slot in layout.slots:
            if slot is None:
                continue
            dtype = dtype_of(slot.dtype)
            expected = _numel(slot.shape) * dtype.itemsize
            if slot.nbytes != expected or slot.offset < 0 or slot.offset + slot.nbytes > layout.size:
                raise PackError(f"slot {slot} does not fit its shape/dtype or the pack of {layout.size} bytes")
            if slot.strides is not None and not _strides_within(slot.shape, slot.strides):
                raise PackError(f"slot {slot}: strides that reach past its {_numel(slot.shape)} elements")
        if len(layout.values) != len(layout.slots):
            raise PackError("layout values and slots differ in length")
        return layout


def dtype_of(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise PackError(f"unknown dtype {name!r}")
    return dtype


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        if d < 0:
            raise PackError(f"negative dimension in {shape}")
        n *= d
    return n


def _strides_within(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether every element of ``shape`` laid out by ``strides`` lies among its own numel
    elements: a layout from another process can then never address memory outside its slot."""
    if len(strides) != len(shape) or any(s < 0 for s in strides):
        return False
    numel = _numel(shape)
    return numel == 0 or sum((d - 1) * s for d, s in zip(shape, strides)) < numel


def _aligned(nbytes: int) -> int:
    """The room a slot of ``nbytes`` takes: the next slot starts ALIGN-aligned."""
    return (nbytes + ALIGN - 1) // ALIGN * ALIGN


def plan_slots(values: Sequence[Any], keep_layout: bool = False) -> tuple[list[TensorSlot | None], list[Any], int]:
    """Where each tensor of ``values`` goes in a pack (ALIGN-aligned offsets), the plain values, and
    the bytes used. ``keep_layout``: a dense tensor that is not contiguous keeps its strides."""
    slots: list[TensorSlot | None] = []
    plain: list[Any] = []
    offset = 0
    for value in values:
        if isinstance(value, torch.Tensor):
            nbytes = value.numel() * value.element_size()
            slots.append(TensorSlot(tuple(value.shape), str(value.dtype).replace("torch.", ""), offset, nbytes,
                                    dense_strides(value) if keep_layout else None))
            plain.append(None)
            offset += _aligned(nbytes)
        else:
            slots.append(None)
            plain.append(value)
    return slots, plain, offset


def planned_layout(specs: Sequence[dict[str, Any]], repeats: int = 1) -> PackLayout:
    """The layout a pack of ``repeats`` calls' outputs takes, each call's outputs as ``specs`` say
    (``shape``, ``dtype``): the same slots ``write_pack`` gives tensors of those shapes."""
    slots: list[TensorSlot] = []
    offset = 0
    for _ in range(repeats):
        for spec in specs:
            shape = tuple(int(d) for d in spec["shape"])
            dtype = str(spec["dtype"]).replace("torch.", "")
            nbytes = _numel(shape) * dtype_of(dtype).itemsize
            slots.append(TensorSlot(shape, dtype, offset, nbytes))
            offset += _aligned(nbytes)
    return PackLayout(slots=tuple(slots), values=(None,) * len(slots), size=max(offset, 1))


def destination_pack(layout: PackLayout, name: str = "destination") -> int:
    """An unsealed memory file of ``layout.size`` bytes whose pages are already allocated, for a
    worker to write its outputs into (``fill_pack``) and its receiver to seal (``seal_pack``).

    Why: a fresh file's pages are allocated as the writer first touches them, inside the timed
    request. On the 2-core VM that was most of a burst's time and all of its noise: 62 MB of
    outputs packed in 27-190 ms (the same calls computed in 2 ms); written into pages allocated
    beforehand, 11-15 ms."""
    fd = os.memfd_create(f"hercules-{name}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, layout.size)
        os.posix_fallocate(fd, 0, layout.size)
    except BaseException:
        os.close(fd)
        raise
    return fd


class PackWriter:
    """Writes values into a ``destination_pack`` laid out as ``layout``, slot after slot, with
    write(2) into its allocated pages (no mapping to fault in). Tensors may live on any device."""

    def __init__(self, fd: int, layout: PackLayout):
        if os.fstat(fd).st_size != layout.size:
            raise PackError(f"destination holds {os.fstat(fd).st_size} bytes, its layout {layout.size}")
        self.fd = fd
        self.layout = layout

    def fits(self, start: int, values: Sequence[Any]) -> bool:
        """Whether ``values`` are plain tensors of the shapes and dtypes of the slots from ``start``."""
        slots = self.layout.slots[start:start + len(values)]
        return len(slots) == len(values) and all(
            slot is not None and type(value) is torch.Tensor and tuple(value.shape) == slot.shape
            and value.dtype == dtype_of(slot.dtype) for value, slot in zip(values, slots))

    def write(self, start: int, values: Sequence[Any]) -> None:
        """``values`` into the slots from ``start`` on; PackError when they do not fit them."""
        if not self.fits(start, values):
            raise PackError(f"outputs for slots {start}..{start + len(values) - 1} do not match the expected "
                            f"shapes and dtypes: {[tuple(getattr(v, 'shape', ())) for v in values][:4]}")
        for value, slot in zip(values, self.layout.slots[start:start + len(values)]):
            if not slot.nbytes:
                continue
            source = value.detach().contiguous().reshape(-1).view(torch.uint8)
            view = memoryview(source.cpu().numpy())
            written = 0
            while written < slot.nbytes:
                written += os.pwrite(self.fd, view[written:], slot.offset + written)


def fill_pack(fd: int, layout: PackLayout, values: Sequence[Any]) -> bool:
    """Write ``values`` into a ``destination_pack`` laid out as ``layout``; False (nothing written)
    when they do not fit it exactly (a value that is not a plain tensor, a shape or dtype of its
    own): the caller then writes a pack of its own."""
    try:
        writer = PackWriter(fd, layout)
    except PackError:
        return False
    if len(values) != len(layout.slots) or not writer.fits(0, values):
        return False
    writer.write(0, values)
    return True


def seal_pack(fd: int) -> None:
    """Seal a ``destination_pack`` its writer has handed back: no write, shrink or grow after this.
    Refused (PackError) while any writable mapping of it is left, or when its writer sealed it in a
    way that keeps these seals out."""
    try:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
    except OSError as exc:
        kind = PackBusy if exc.errno == errno.EBUSY else PackError
        raise kind(f"the pack could not be sealed (a writable mapping left, or sealed by its writer): "
                   f"{exc}") from None
    if fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS != SEALS:
        raise PackError("the pack could not be sealed")


# Sealing a memory file against writes waits (~150 ms in the kernel) for its pages' transient
# references to drop, then fails with EBUSY. The writer's own fresh file, whose one mapping is
# closed, has no writable mapping left: EBUSY there is such a reference held longer (a `hercules
# bench` on the loaded 2-core CPU machine once lost an honest candidate's revalidation to it), and
# sealing is tried again. A pack sealed by the parent after another process wrote it is not: there
# EBUSY may be a writable mapping kept, and waiting would let its writer finish off the clock.
OWN_SEAL_ATTEMPTS = 20
OWN_SEAL_PAUSE_S = 0.01


def _seal_own(fd: int) -> None:
    for attempt in range(OWN_SEAL_ATTEMPTS):
        try:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or attempt == OWN_SEAL_ATTEMPTS - 1:
                raise
            time.sleep(OWN_SEAL_PAUSE_S)


def write_pack(values: Sequence[Any], name: str = "pack", medium: str = "memfd",
               device: torch.device | str | None = None, keep_layout: bool = False) -> tuple[int, PackLayout]:
    """A pack holding ``values``; returns (fd, layout).

    ``medium="cuda"`` asks for a device pack on ``device`` (``device_pack.py``); where the driver
    refuses one, the values go into a sealed memory file instead, which every receiver reads too.
    Tensors may live on any device; for a memory file they are copied to host memory once,
    straight into the file. ``keep_layout``: dense tensors that are not contiguous travel in their
    own memory order, with their strides (``dense_strides``), not made contiguous first.
    """
    if medium == "cuda" and device is not None and torch.device(device).type == "cuda":
        from hercules.harness.device_pack import DevicePackError, write_device_pack

        try:
            return write_device_pack(values, device, keep_layout)
        except DevicePackError:
            pass  # the host path below; the data-path probe has already said which one works
    slots, plain, used = plan_slots(values, keep_layout)
    size = max(used, 1)
    fd = os.memfd_create(f"hercules-{name}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        with mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as mapped:
            whole = torch.frombuffer(mapped, dtype=torch.uint8)
            for value, slot in zip(values, slots):
                if slot is None or slot.nbytes == 0:
                    continue
                flat = memory_order(value.detach()) if slot.strides is not None else value.detach().contiguous().reshape(-1)
                whole[slot.offset:slot.offset + slot.nbytes].copy_(flat.view(torch.uint8))
            del whole  # the mapping must have no exported buffer left before it closes
        _seal_own(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd, PackLayout(slots=tuple(slots), values=tuple(plain), size=size)


class MappedPack:
    """A received pack mapped read-only; ``values(device)`` materialises its values there.

    The descriptor stays the caller's to close (the mapping holds the file by itself)."""

    def __init__(self, fd: int, layout: PackLayout):
        try:
            seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        except OSError as exc:
            raise PackError(f"not a sealable memory file: {exc}") from None
        if seals & SEALS != SEALS:
            raise PackError("pack is not sealed against writes: its contents could still change")
        size = os.fstat(fd).st_size
        if size < layout.size:
            raise PackError(f"pack holds {size} bytes, its layout claims {layout.size}")
        self.layout = layout
        self.mapped = mmap.mmap(fd, layout.size, mmap.MAP_SHARED, mmap.PROT_READ)

    def _bytes(self) -> torch.Tensor | None:
        """The mapping as one uint8 tensor (None for an empty pack)."""
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # frombuffer warns that the mapping is read-only: it is meant to be
            return torch.frombuffer(self.mapped, dtype=torch.uint8) if self.layout.size else None

    def values(self, device: torch.device | str = "cpu", clone: bool = True, start: int = 0) -> list[Any]:
        """The pack's values from the ``start``-th on; tensors copied to ``device`` (on the CPU cloned
        unless ``clone`` is False, in which case they are read-only views valid while the pack is open)."""
        device = torch.device(device)
        out: list[Any] = []
        whole = self._bytes()
        for slot, value in list(zip(self.layout.slots, self.layout.values))[start:]:
            if slot is None:
                out.append(value)
                continue
            dtype = dtype_of(slot.dtype)
            raw = whole[slot.offset:slot.offset + slot.nbytes]
            tensor = laid_out(raw.view(dtype), slot) if slot.nbytes else torch.empty(slot.shape, dtype=dtype)
            if device.type != "cpu":
                tensor = tensor.to(device)
            elif clone:
                tensor = tensor.clone()
            out.append(tensor)
        return out

    def copy_into(self, targets: Sequence[Any]) -> None:
        """Copy each tensor of the pack into the tensor at its place in ``targets`` (same shape and
        dtype), on whatever device that lives; plain values are skipped."""
        check_targets(self.layout, targets)
        whole = self._bytes()
        for slot, dst in zip(self.layout.slots, targets):
            if slot is not None and slot.nbytes and dst is not None:
                dst.copy_(laid_out(whole[slot.offset:slot.offset + slot.nbytes].view(dtype_of(slot.dtype)), slot))

    def close(self) -> None:
        try:
            self.mapped.close()
        except BufferError:
            pass  # a view is still alive somewhere; the mapping goes when it does

    def __enter__(self) -> "MappedPack":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def check_targets(layout: PackLayout, targets: Sequence[Any]) -> None:
    """Every tensor slot of ``layout`` has a tensor of its shape and dtype at its place in ``targets``
    (or None there: that value is not copied)."""
    if len(targets) != len(layout.slots):
        raise PackError(f"{len(layout.slots)} values for {len(targets)} places")
    for slot, dst in zip(layout.slots, targets):
        if slot is None or dst is None:
            continue
        if not isinstance(dst, torch.Tensor) or tuple(dst.shape) != slot.shape or dst.dtype != dtype_of(slot.dtype) \
                or not dst.is_contiguous():
            raise PackError(f"slot {slot} does not match its place ({getattr(dst, 'shape', type(dst).__name__)})")


def open_pack(fd: int, layout: PackLayout, device: torch.device | str = "cpu"):
    """A received pack of either medium, opened for ``values(device)``: a sealed memory file mapped
    read-only, or a device pack mapped read-only on ``device``. Use as a context manager."""
    if layout.medium == "cuda":
        from hercules.harness.device_pack import DevicePack

        return DevicePack(fd, layout, device)
    return MappedPack(fd, layout)


def read_pack(fd: int, layout: PackLayout | dict[str, Any], device: torch.device | str = "cpu") -> list[Any]:
    """Open (memory files: check the seals), copy the values to ``device``, close (``fd`` stays open)."""
    if not isinstance(layout, PackLayout):
        layout = PackLayout.from_message(layout)
    with open_pack(fd, layout, device) as pack:
        return pack.values(device)


def send_fds(sock_fd: int, fds: Sequence[int]) -> None:
    """Hand descriptors over the Unix socket ``sock_fd`` (one marker byte carries them)."""
    with socket.socket(fileno=os.dup(sock_fd)) as sock:
        socket.send_fds(sock, [b"F"], list(fds))


def receive_fds(sock_fd: int, count: int, timeout: float = 30.0) -> list[int]:
    """The ``count`` descriptors sent by ``send_fds``; PackError when the peer sent other bytes or
    nothing within ``timeout`` seconds (a reply that announces descriptors it never sends)."""
    if not 0 < count <= MAX_PACK_FDS:
        raise PackError(f"asked for {count} descriptors")
    # Wait with select, not a socket timeout: a timeout makes the descriptor non-blocking, and that
    # flag is shared with the worker's channel, whose reads would then fail.
    ready, _, _ = select.select([sock_fd], [], [], timeout)
    if not ready:
        raise PackError(f"no descriptors arrived within {timeout:.0f} s")
    with socket.socket(fileno=os.dup(sock_fd)) as sock:
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, 1, MAX_PACK_FDS)
        except OSError as exc:
            raise PackError(f"no descriptors arrived: {exc}") from None
    if data != b"F" or len(fds) != count:
        for fd in fds:
            os.close(fd)
        raise PackError(f"expected {count} descriptors behind a marker, got {len(fds)} and {data!r}")
    return fds
