"""The bytes of one message between the parent and a worker.

A message is a dict. One made only of JSON's own values (dicts with string keys, lists, strings,
ints, floats, bools, None) travels as JSON; any other (a tuple of a problem's init inputs, a CPU
tensor) as ``torch.save`` bytes, read back with ``torch.load(weights_only=True)``. Neither lets a
hostile worker make the parent run code: JSON holds no objects, and the restricted unpickler
accepts no classes but tensors and plain containers.

Why two: every timed request's reply is decoded on the parent's clock, and a reply naming 227
outputs took 4.4 ms through ``torch.load`` against 0.2 ms as JSON (2-core VM, torch 2.13), inside
a burst of 227 calls. Tuples, tensors and the like are only in set-up messages, read once.
"""

from __future__ import annotations

import io
import json
from typing import Any

import torch

JSON_TAG = b"J"
TORCH_TAG = b"T"
_SCALARS = frozenset({str, int, float, bool, type(None)})
# Deeper than any message the protocol makes (a layout is 4 levels): such a message goes the
# torch way rather than through a deep recursive walk.
DEPTH_MAX = 32


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is made only of JSON's own values (exact types), with nothing JSON would
    change: tuples would come back as lists, non-string keys as strings."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if depth >= DEPTH_MAX:
        return False
    if kind is list:
        return all(type(v) in _SCALARS or _plain(v, depth + 1) for v in value)
    if kind is dict:
        return all(type(k) is str and (type(v) in _SCALARS or _plain(v, depth + 1)) for k, v in value.items())
    return False


def encode(message: dict[str, Any]) -> bytes:
    if _plain(message):
        return JSON_TAG + json.dumps(message, separators=(",", ":")).encode()
    buffer = io.BytesIO()
    torch.save(message, buffer)
    return TORCH_TAG + buffer.getvalue()


def decode(payload: bytes) -> dict[str, Any]:
    """The message in ``payload``; ValueError for bytes no encoder here made (forged, truncated)."""
    tag, body = payload[:1], payload[1:]
    try:
        if tag == JSON_TAG:
            message = json.loads(body)  # only plain values; a nesting past the stack is a RecursionError
        elif tag == TORCH_TAG:
            message = torch.load(io.BytesIO(body), weights_only=True, map_location="cpu")
        else:
            raise ValueError(f"a message of unknown encoding {tag!r}")
    except RecursionError:
        raise ValueError("a message nested too deep to read") from None
    except ValueError:
        raise
    except Exception as exc:  # the unpickler's refusals (UnpicklingError, RuntimeError, EOFError)
        raise ValueError(f"an unreadable message: {type(exc).__name__}: {exc}") from None
    if not isinstance(message, dict):
        raise ValueError(f"a message that is a {type(message).__name__}, not a dict")
    return message
