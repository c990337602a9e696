"""Parameters and buffers drawn away from their default initialisation, identically on both sides.

LayerNorm's weight starts at 1 and its bias at 0, so a kernel that ignores them is right on a
freshly built model (one published "11-15x" LayerNorm was such a copy kernel). Both workers build
their model with the same seed, then call ``perturb_model`` with the same perturbation seed: the
reference's and the candidate's parameters move the same way wherever they held the same values.

The perturbation of a value depends on that value and the seed, not on the tensor's name, shape
or place among the module's parameters: a candidate that renames a parameter, keeps a transposed
or reshaped copy of it made at construction, or declares its parameters in another order still
holds exactly the reference's values. A tensor with one value throughout (LayerNorm's ones and
zeros) would move to another constant that way, which a kernel could still ignore per channel, so
such tensors move by position instead (their flat index, unchanged by a reshape).

Every value is multiplied by a factor in [1 - SPREAD, 1 + SPREAD] (signs kept: a running
variance stays positive); a tensor of zeros gets values in [-SPREAD, SPREAD] instead.
"""

from __future__ import annotations

import torch

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


def perturbed(t: torch.Tensor, seed: int) -> torch.Tensor:
    """``t`` moved away from its values (a new tensor of its shape and dtype)."""
    if t.numel() == 0:
        return t.clone()
    flat = t.detach().reshape(-1)
    constant = bool((flat == flat[0]).all())
    if constant:
        # Keyed by flat index and the constant's bits: ones and zeros of one layer move apart.
        index = torch.arange(flat.numel(), device=t.device, dtype=torch.int64)
        keys = _hash32((index & _MASK32) ^ _bits(flat[:1]))
    else:
        keys = _bits(flat)
    u = _uniform(keys, seed)
    if constant and float(flat[0]) == 0.0:
        moved = SPREAD * u
    else:
        moved = flat.double() * (1.0 + SPREAD * u)
    return moved.to(t.dtype).reshape(t.shape)


def perturb_model(model: torch.nn.Module, seed: int) -> int:
    """Every floating-point parameter and buffer of ``model`` moved in place (``perturbed``); the
    number of tensors moved. Integer buffers (BatchNorm's batch count) are left alone, and so is a
    tensor whose memory an earlier one already moved (a buffer kept as a view of a parameter would
    otherwise move twice where the reference's parameter moved once)."""
    moved, storages = 0, set()
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            if not tensor.is_floating_point() or not tensor.numel():
                continue
            storage = (tensor.device, tensor.untyped_storage().data_ptr())
            if storage in storages:
                continue
            storages.add(storage)
            tensor.copy_(perturbed(tensor, seed))
            moved += 1
    return moved
