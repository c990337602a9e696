"""Typed requests and replies between the parent and its workers.

Messages travel as dicts of plain values (``torch.save`` bytes read back with
``weights_only=True``, see ipc.py); large tensors travel beside them as sealed memory files
(datapath.py). Every reply from the candidate's worker is untrusted: ``parse`` turns it into a
frozen record or raises ``ProtocolError``, so a forged or malformed reply becomes a verdict, never
a crash of the parent or a number taken on faith. Replies of the trusted reference worker go
through the same records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, ClassVar, TypeVar

R = TypeVar("R", bound="Reply")


class ProtocolError(ValueError):
    """A reply that does not have the shape its request calls for."""


def _number(value: Any, name: str, *, optional: bool = False, minimum: float | None = 0.0) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProtocolError(f"{name} is {type(value).__name__}, not a number")
    value = float(value)
    if not math.isfinite(value) or (minimum is not None and value < minimum):
        raise ProtocolError(f"{name} = {value!r} is out of range")
    return value


PACK_SLOTS_MAX = 1 << 16


def _strings(value: Any, name: str, limit: int = 64) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ProtocolError(f"{name} is not a list of strings")
    return tuple(v[:500] for v in value[:limit])


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ProtocolError(f"{name} is {type(value).__name__}, not a bool")
    return value


@dataclass(frozen=True)
class Reply:
    """Base of every reply record; ``parse`` validates a raw message into one."""

    op: ClassVar[str] = ""

    @classmethod
    def parse(cls: type[R], raw: dict[str, Any]) -> R:
        try:
            return cls._parse(raw)
        except ProtocolError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProtocolError(f"malformed '{cls.op}' reply: {type(exc).__name__}: {exc}") from None

    @classmethod
    def _parse(cls: type[R], raw: dict[str, Any]) -> R:
        return cls(**{f.name: raw[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class Empty(Reply):
    op: ClassVar[str] = "empty"

    @classmethod
    def _parse(cls, raw):
        return cls()


@dataclass(frozen=True)
class BuildReply(Reply):
    op: ClassVar[str] = "build"
    seconds: float

    @classmethod
    def _parse(cls, raw):
        return cls(seconds=_number(raw["seconds"], "seconds"))


@dataclass(frozen=True)
class PackReply(Reply):
    """A reply whose tensors travel as one sealed memory file beside it (``fds`` says how many), or,
    with ``into``, were written into the destination the request brought (no descriptor)."""

    op: ClassVar[str] = "pack"
    layout: dict[str, Any]
    types: tuple[str, ...]
    fds: int
    into: bool = False

    @classmethod
    def _parse(cls, raw):
        fds = int(raw["fds"])
        into = _flag(raw.get("into", False), "into")
        if fds != (0 if into else 1):
            raise ProtocolError(f"a pack reply carries {'no descriptor' if into else 'one descriptor'}, not {fds}")
        if not isinstance(raw["layout"], dict):
            raise ProtocolError("layout is not a dict")
        # One type name per output of every call a burst returns (a fresh pass on the GPU: up to
        # 256 calls): cut to 64 like other lists, they no longer matched the layout and the
        # reference refused every honest pack of more than 64 outputs.
        return cls(layout=raw["layout"], types=_strings(raw["types"], "types", limit=PACK_SLOTS_MAX), fds=fds,
                   into=into)


@dataclass(frozen=True)
class RunReply(PackReply):
    """One call's outputs plus what the candidate's process saw (tripwires, not proof)."""

    op: ClassVar[str] = "run"
    aliases: bool = False
    mutated: bool = False
    swallowed: tuple[str, ...] = ()
    executed_lines: tuple[int, ...] = ()
    overwrote: bool = False  # its outputs landed in the previous call's, still held, changing them

    @classmethod
    def _parse(cls, raw):
        base = PackReply._parse(raw)
        lines = raw.get("executed_lines") or ()
        if not isinstance(lines, (list, tuple)) or not all(isinstance(n, int) for n in lines):
            raise ProtocolError("executed_lines is not a list of ints")
        return cls(layout=base.layout, types=base.types, fds=base.fds, into=base.into,
                   aliases=_flag(raw["aliases"], "aliases"),
                   mutated=_flag(raw["mutated"], "mutated"), swallowed=_strings(raw["swallowed"], "swallowed"),
                   executed_lines=tuple(lines[:100000]), overwrote=_flag(raw.get("overwrote", False), "overwrote"))


@dataclass(frozen=True)
class BuffersReply(PackReply):
    """The candidate's timing buffers, and whether a call since the trials returned an output
    sharing memory with its inputs (a tripwire, like the trials' own)."""

    op: ClassVar[str] = "buffers"
    aliases: bool = False

    @classmethod
    def _parse(cls, raw):
        base = PackReply._parse(raw)
        return cls(layout=base.layout, types=base.types, fds=base.fds, into=base.into,
                   aliases=_flag(raw["aliases"], "aliases"))


@dataclass(frozen=True)
class SingleReply(PackReply):
    """One call on a timing buffer, its outputs and the in-process single-call time (tripwire)."""

    op: ClassVar[str] = "single"
    event_ms: float | None = None

    @classmethod
    def _parse(cls, raw):
        base = PackReply._parse(raw)
        return cls(layout=base.layout, types=base.types, fds=base.fds, into=base.into,
                   event_ms=_number(raw.get("event_ms"), "event_ms", optional=True))


@dataclass(frozen=True)
class BurstReply(PackReply):
    """Back-to-back calls; the last call's outputs, so the reply cannot come before the work."""

    op: ClassVar[str] = "burst"
    enqueue_ms: float = 0.0
    executed_lines: tuple[int, ...] = ()
    pack_ms: float | None = None  # the worker's own report of packing the outputs: diagnosis only
    device_ms: float | None = None  # ... and of its calls' time on the device, per call: diagnosis only

    @classmethod
    def _parse(cls, raw):
        base = PackReply._parse(raw)
        lines = raw.get("executed_lines") or ()
        if not isinstance(lines, (list, tuple)) or not all(isinstance(n, int) for n in lines):
            raise ProtocolError("executed_lines is not a list of ints")
        return cls(layout=base.layout, types=base.types, fds=base.fds, into=base.into,
                   enqueue_ms=_number(raw["enqueue_ms"], "enqueue_ms"), executed_lines=tuple(lines[:100000]),
                   pack_ms=_number(raw.get("pack_ms"), "pack_ms", optional=True),
                   device_ms=_number(raw.get("device_ms"), "device_ms", optional=True))


TIMING_FIELDS = ("median_ms", "mean_ms", "min_ms", "max_ms", "iqr_ms", "std_ms")


@dataclass(frozen=True)
class TimeReply(Reply):
    """Statistics of the in-process timing (CUDA events or perf_counter): a lower figure the
    candidate could forge; the parent bounds it by its own clock before using it."""

    op: ClassVar[str] = "time"
    timing: dict[str, Any]
    overwrote: bool = False  # a call after the timing wrote over the outputs of the one before, still held

    @classmethod
    def _parse(cls, raw):
        timing = dict(raw["timing"])
        for name in TIMING_FIELDS:
            timing[name] = _number(timing[name], name)
        timing["reps"] = int(_number(timing["reps"], "reps", minimum=1))
        timing["input_sets"] = int(_number(timing["input_sets"], "input_sets", minimum=0))
        timing["method"] = str(timing["method"])[:40]
        timing["l2_flushed"] = bool(timing["l2_flushed"])
        timing["wall_ms"] = _number(timing.get("wall_ms"), "wall_ms", optional=True)
        timing["samples_ms"] = ()
        return cls(timing=timing, overwrote=_flag(raw.get("overwrote", False), "overwrote"))


@dataclass(frozen=True)
class StreamsReply(Reply):
    op: ClassVar[str] = "streams"
    other: tuple[str, ...]
    names: tuple[str, ...]
    kernels: int

    @classmethod
    def _parse(cls, raw):
        return cls(other=tuple(str(s) for s in raw["other"])[:64], names=_strings(raw.get("names") or [], "names"),
                   kernels=int(_number(raw["kernels"], "kernels")))


@dataclass(frozen=True)
class IntegrityReply(Reply):
    op: ClassVar[str] = "integrity"
    patched: tuple[str, ...]
    settings: tuple[str, ...]
    neutral_settings: tuple[str, ...]
    threads: tuple[str, ...]
    persisting_l2_bytes: int

    @classmethod
    def _parse(cls, raw):
        return cls(patched=_strings(raw["patched"], "patched"), settings=_strings(raw["settings"], "settings"),
                   neutral_settings=_strings(raw.get("neutral_settings") or [], "neutral_settings"),
                   threads=_strings(raw["threads"], "threads"),
                   persisting_l2_bytes=int(_number(raw.get("persisting_l2_bytes") or 0, "persisting_l2_bytes")))


# ---- the trusted reference worker's replies ---------------------------------------------------


@dataclass(frozen=True)
class CompareReply(Reply):
    """The figures of one comparison, made in the reference worker on the device."""

    op: ClassVar[str] = "compare"
    correct: bool
    max_abs_err: float
    rel_err: float
    flags: tuple[str, ...]
    problems: tuple[str, ...]
    ref_err: float | None  # the problem-dtype reference's own error against float64 (max over outputs)
    ok_kernelbench: bool  # within upstream KernelBench's atol = rtol = 1e-2
    ref_call_ms: float  # the reference's own forward, device-synchronised, on the host clock
    # Of a burst's calls judged in full (drawn by the parent): their relative error against float64
    # and the problem-dtype reference's own, for the precision floor.
    strict_rel_err: float = 0.0
    strict_ref_err: float | None = None

    @classmethod
    def _parse(cls, raw):
        return cls(correct=bool(raw["correct"]), max_abs_err=float(raw["max_abs_err"]), rel_err=float(raw["rel_err"]),
                   flags=tuple(raw["flags"]), problems=tuple(raw["problems"]), ref_err=raw["ref_err"],
                   ok_kernelbench=bool(raw["ok_kernelbench"]), ref_call_ms=float(raw["ref_call_ms"]),
                   strict_rel_err=float(raw.get("strict_rel_err") or 0.0),
                   strict_ref_err=None if raw.get("strict_ref_err") is None else float(raw["strict_ref_err"]))
