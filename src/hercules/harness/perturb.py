"""Parameters and buffers drawn away from their default initialisation, identically on both sides.

LayerNorm's weight starts at 1 and its bias at 0, so a kernel that ignores them is right on a
freshly built model (one published "11-15x" LayerNorm was such a copy kernel). Both workers build
their model with the same seed inside ``perturbed_construction`` with the same perturbation seed:
the reference's and the candidate's parameters move the same way wherever they held the same
values.

They move where they are made, while the model is built, not afterwards: each initialisation of a
parameter or buffer (``uniform_``, ``normal_``, ``fill_``, ``zero_``: what ``torch.nn.init`` and
the layers' ``reset_parameters`` use) is followed by its move, and a parameter or buffer registered
with one value throughout (``torch.ones``, ``torch.zeros``) moves when it is registered. So a
candidate that derives weights from them in its constructor (a batch norm folded into the
convolution before it, a weight kept transposed or packed) derives them from the moved values, as
the reference's forward uses them; moved after construction, such honest code was judged wrong
against its own reference.

The move of a value depends on that value and the seed, not on the tensor's name, shape or place
among the module's parameters: a candidate that renames a parameter or declares its parameters in
another order still holds exactly the reference's values. A tensor with one value throughout
(LayerNorm's ones and zeros) would move to another constant that way, which a kernel could still
ignore per channel, so such tensors move by position instead (their flat index, unchanged by a
reshape).

Every value is multiplied by a factor in [1 - SPREAD, 1 + SPREAD] (signs kept: a running
variance stays positive); a tensor of zeros gets values in [-SPREAD, SPREAD] instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.overrides import TorchFunctionMode

SPREAD = 0.5
_MASK32 = 0xFFFFFFFF
_MIX = 0x45D9F3B  # a 32-bit integer hash's multiplier (products stay below 2^59 in int64)


def _hash32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash, elementwise, of int64 values in [0, 2^32)."""
    x = (((x >> 16) ^ x) * _MIX) & _MASK32
    x = (((x >> 16) ^ x) * _MIX) & _MASK32
    return (x >> 16) ^ x


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The values' bit patterns as int64 in [0, 2^32) (64-bit values folded)."""
    width = t.element_size()
    if width == 8:
        raw = t.contiguous().view(torch.int64)
        return ((raw >> 32) ^ raw) & _MASK32
    as_int = {4: torch.int32, 2: torch.int16, 1: torch.int8}[width]
    return t.contiguous().view(as_int).to(torch.int64) & _MASK32


def _uniform(keys: torch.Tensor, seed: int) -> torch.Tensor:
    """A number in [-1, 1) per key, fixed by the key and the seed."""
    mixed = _hash32(keys ^ (seed & _MASK32))
    return mixed.double() / 2.0**31 - 1.0


CHUNK = 1 << 22  # values moved at a time: the hash's int64 and float64 temporaries stay ~100 MB


def perturbed(t: torch.Tensor, seed: int, work: torch.device | None = None) -> torch.Tensor:
    """``t`` moved away from its values (a new tensor of its shape and dtype), computed on ``work``
    (default: ``t``'s device) a chunk at a time; every step is exact integer or float64 arithmetic,
    one operation per kernel, so the result is the same on any device. On the H200 host, KernelBench
    level 3 #1 (three 16384 x 16384 linear layers, built on the CPU by its own code) took 113 s to
    build with this computed on the worker's two CPU threads."""
    if t.numel() == 0:
        return t.clone()
    work = t.device if work is None else work
    flat = t.detach().reshape(-1)
    constant = bool((flat == flat[0]).all())
    first_bits = _bits(flat[:1].to(work))
    zero = constant and float(flat[0]) == 0.0
    out = torch.empty_like(flat)
    for start in range(0, flat.numel(), CHUNK):
        piece = flat[start:start + CHUNK].to(work)
        if constant:
            # Keyed by flat index and the constant's bits: ones and zeros of one layer move apart.
            index = torch.arange(start, start + piece.numel(), device=work, dtype=torch.int64)
            keys = _hash32((index & _MASK32) ^ first_bits)
        else:
            keys = _bits(piece)
        u = _uniform(keys, seed)
        moved = SPREAD * u if zero else piece.double() * (1.0 + SPREAD * u)
        out[start:start + piece.numel()].copy_(moved.to(t.dtype))
    return out.reshape(t.shape)


# The in-place initialisations ``torch.nn.init`` and the layers' ``reset_parameters`` are made of.
_INITIALISATIONS = frozenset({torch.Tensor.uniform_, torch.Tensor.normal_, torch.Tensor.fill_, torch.Tensor.zero_})


class _Moves(TorchFunctionMode):
    """While active: every initialisation of a parameter or a registered buffer is followed by its
    move. Tensors that are neither (a candidate's scratch space zeroed in its constructor) are left
    as made."""

    def __init__(self, seed: int, work: torch.device | None = None):
        super().__init__()
        self.seed = seed
        self.work = work  # where large moves are computed (the worker's GPU)
        self.buffers: set[int] = set()  # ids of tensors registered as buffers while building
        self.moved = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in _INITIALISATIONS and args and isinstance(args[0], torch.Tensor):
            target = args[0]
            if isinstance(target, torch.nn.Parameter) or id(target) in self.buffers:
                self.move(target)
        return out

    def move(self, tensor: torch.Tensor) -> None:
        if not tensor.is_floating_point() or not tensor.numel() or tensor.is_meta:
            return
        work = self.work if self.work is not None and tensor.numel() >= CHUNK else None
        with torch.no_grad():
            tensor.copy_(perturbed(tensor, self.seed, work))
        self.moved += 1

    def registered(self, tensor: torch.Tensor | None, buffer: bool) -> None:
        """A parameter or buffer registered: moved if it holds one value throughout (made by
        ``torch.ones``/``torch.zeros``, never initialised in place); a buffer is remembered, so
        that its later initialisations move it too."""
        if tensor is None:
            return
        if buffer:
            self.buffers.add(id(tensor))
        if tensor.is_floating_point() and tensor.numel() and not tensor.is_meta:
            flat = tensor.detach().reshape(-1)
            if bool((flat == flat[0]).all()):
                self.move(tensor)


@contextlib.contextmanager
def perturbed_construction(seed: int | None, work: torch.device | None = None) -> Iterator[_Moves | None]:
    """Inside: parameters and buffers move where they are made (see the module's description);
    ``seed`` None: nothing moves. Large tensors' moves are computed on ``work`` when given (the
    same values as anywhere). Yields the record of moves (``moved``: how many)."""
    if seed is None:
        yield None
        return
    from torch.nn.modules import module as module_hooks

    moves = _Moves(seed, work)
    handles = [
        module_hooks.register_module_parameter_registration_hook(
            lambda _module, _name, param: moves.registered(param, buffer=False)),
        module_hooks.register_module_buffer_registration_hook(
            lambda _module, _name, buffer: moves.registered(buffer, buffer=True)),
    ]
    try:
        with moves:
            yield moves
    finally:
        for handle in handles:
            handle.remove()
