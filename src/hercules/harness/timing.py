"""Timing of a callable the way GPU engineers do it.

On CUDA: warm-up, L2 flushed before every repetition, CUDA events around each repetition, the
repetition count fitted to a time budget, input sets rotated so repeated runs do not measure a
warm cache, the median and the spread reported, and a wall-clock cross-check taken after a
device-wide synchronise (work hidden on side streams shows up there and not in the events).
On CPU the same flow with ``time.perf_counter``.

The clock functions are bound at import time, before any candidate code is imported into the
process, so a candidate that later replaces ``time.perf_counter`` or ``torch.cuda.Event`` methods
cannot change what this module reads (the integrity check flags the attempt separately).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from hercules.harness.records import TimingResult

_perf_counter = time.perf_counter
_Event = torch.cuda.Event
_elapsed_time = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record
_synchronize = torch.cuda.synchronize

# Twice the H200's 60 MB L2 (and any smaller part's): zeroing it evicts the previous repetition's data.
L2_FLUSH_BYTES = 256 * 1024 * 1024


def _reset_persisting_l2() -> None:
    """Demote lines kept in a persisting-L2 carve-out to normal, so the flush evicts them too."""
    global _RESET_L2
    if _RESET_L2 is None:
        _RESET_L2 = _find_reset_l2()
    if _RESET_L2:
        _RESET_L2()


def _find_reset_l2():
    try:
        import ctypes

        with open("/proc/self/maps") as maps:
            paths = [line.split()[-1] for line in maps if "libcudart.so" in line]
        if not paths:
            return False
        return ctypes.CDLL(paths[0]).cudaCtxResetPersistingL2Cache
    except (OSError, AttributeError):
        return False


_RESET_L2 = None


class _Flusher:
    def __init__(self, device: torch.device, enabled: bool):
        self.buffer = None
        if enabled and device.type == "cuda":
            self.buffer = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        if self.buffer is not None:
            _reset_persisting_l2()
            self.buffer.zero_()


def set_bytes(values: Sequence[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def device_memory_bytes(device: torch.device) -> int:
    """The device's memory: a GPU's total, or the host's physical memory for the CPU."""
    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def sets_to_keep(per_set_bytes: int, device: torch.device) -> int:
    """How many distinct input sets timing needs: on a GPU enough to exceed twice the L2 flush
    size (so a repetition never finds its inputs in cache), at most 16; on the CPU every one."""
    if torch.device(device).type != "cuda":
        return 1 << 30
    return max(1, min(16, -(-2 * L2_FLUSH_BYTES // max(per_set_bytes, 1))))


def rotation_sets(sets: Sequence[tuple], device: torch.device) -> list[tuple]:
    """Input sets to rotate through while timing: on a GPU, clones of the given ones until together
    they exceed twice the L2 flush size (at most 16), so no repetition finds its inputs in cache."""
    sets = list(sets)
    if torch.device(device).type != "cuda" or not sets:
        return sets
    originals = len(sets)
    while len(sets) < sets_to_keep(set_bytes(sets[0]), device):
        source = sets[len(sets) % originals]
        sets.append(tuple(v.clone() if isinstance(v, torch.Tensor) else v for v in source))
    return sets


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        _synchronize(device)


def _estimate_ms(fn: Callable[..., Any], arg_sets: Sequence[tuple], device: torch.device, flush) -> float:
    """Rough per-call time used only to size warm-up and repetitions."""
    calls = 0
    _sync(device)
    start = _perf_counter()
    while True:
        flush()
        fn(*arg_sets[calls % len(arg_sets)])
        calls += 1
        _sync(device)
        elapsed = _perf_counter() - start
        if calls >= 3 or elapsed > 0.5:
            return elapsed * 1e3 / calls


def _summarise(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    n = len(ordered)
    q1 = ordered[int(0.25 * (n - 1))]
    q3 = ordered[int(0.75 * (n - 1))]
    return {
        "median_ms": statistics.median(ordered),
        "mean_ms": statistics.fmean(ordered),
        "min_ms": ordered[0],
        "max_ms": ordered[-1],
        "iqr_ms": q3 - q1,
        "std_ms": statistics.pstdev(ordered) if n > 1 else 0.0,
    }


def burst_ms(fn: Callable[..., Any], arg_sets: Sequence[tuple], device: torch.device, calls: int) -> tuple[float, float]:
    """Back-to-back calls bracketed by device-wide synchronisation, read off the host clock.

    Returns (wall, enqueue) per call: wall runs until the device is idle, enqueue until the host
    has issued the last call. A host that waits long for the device after issuing everything
    while the events saw little work means the work ran where the events did not look.
    """
    _sync(device)
    start = _perf_counter()
    for i in range(calls):
        fn(*arg_sets[i % len(arg_sets)])
    issued = _perf_counter()
    _sync(device)
    end = _perf_counter()
    return (end - start) * 1e3 / calls, (issued - start) * 1e3 / calls


def burst_outputs(fn: Callable[..., Any], arg_sets: Sequence[tuple], device: torch.device,
                  calls: int, every_call: bool = False, own_copies: bool = False,
                  sink: Callable[[int, Any], None] | None = None) -> tuple[list[Any], float]:
    """``calls`` back-to-back calls rotating over ``arg_sets``, then a device-wide synchronise;
    returns the last call's outputs (with ``every_call``, a list of every call's outputs) and the
    host's enqueue time per call (ms).

    The parent brackets the request carrying this on its own clock and receives the outputs in the
    reply: an answer cannot arrive before the work it carries is done. With every call's outputs
    judged, no call of the burst can be skipped either. ``own_copies``: every call's outputs are
    copied as they come (enqueued before the next call), for a function that hands back the same
    output buffers each call (a CUDA-graph replay's static outputs): kept as they are, every
    call's outputs would show the last call's values. ``sink`` (with ``every_call``): each call's
    outputs are handed to ``sink(index, outputs)`` right after the call instead of kept (nothing
    is returned for them), so each call's output memory is freed for the next, as in a burst that
    keeps none."""
    _sync(device)
    start = _perf_counter()
    out = None
    kept: list[Any] = []
    for i in range(calls):
        out = fn(*arg_sets[i % len(arg_sets)])
        if every_call and sink is not None:
            sink(i, out)
        elif every_call:
            kept.append(copied_outputs(out) if own_copies else out)
    issued = _perf_counter()
    _sync(device)
    enqueue = (issued - start) * 1e3 / max(calls, 1)
    return ([call_outputs(o) for o in kept] if every_call else call_outputs(out)), enqueue


def call_outputs(out: Any) -> list[Any]:
    """One call's outputs as a list (a tuple or list of outputs, or one output)."""
    return list(out) if isinstance(out, (tuple, list)) else [out]


def copied_outputs(out: Any) -> Any:
    """A call's outputs with every tensor cloned (tuples and lists kept as they are)."""
    if isinstance(out, torch.Tensor):
        return out.clone()
    if isinstance(out, (tuple, list)):
        return type(out)(copied_outputs(o) for o in out)
    return out


class DeviceClock:
    """CUDA events on the current stream around a block, read once it has ended: how long the
    block's work ran on the device, per ``calls`` (``ms``; None off CUDA). A worker's own report,
    for diagnosis only: in the candidate's process it is the candidate's word."""

    def __init__(self, device: torch.device, calls: int = 1):
        self.cuda = device.type == "cuda"
        self.calls = max(1, calls)
        self.start = self.end = None

    def __enter__(self) -> "DeviceClock":
        if self.cuda:
            self.start = _Event(enable_timing=True)
            _record(self.start)
        return self

    def __exit__(self, *exc) -> None:
        if self.cuda:
            self.end = _Event(enable_timing=True)
            _record(self.end)

    def ms(self) -> float | None:
        if self.start is None or self.end is None:
            return None
        self.end.synchronize()
        return _elapsed_time(self.start, self.end) / self.calls


def single_call_ms(fn: Callable[[], Any], device: torch.device, flush) -> tuple[Any, float | None]:
    """One call after an L2 flush and a synchronise, timed by CUDA events (so the figure includes the
    host's launch overhead: compare it only with another single call). Returns (result, ms); ms is
    None off CUDA."""
    if device.type != "cuda":
        return fn(), None
    flush()
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    _sync(device)
    _record(start)
    result = fn()
    _record(end)
    _sync(device)
    return result, _elapsed_time(start, end)


def time_callable(
    fn: Callable[..., Any],
    arg_sets: Sequence[tuple],
    *,
    device: torch.device | str,
    budget_s: float = 0.3,
    warmup_s: float = 0.05,
    min_reps: int = 5,
    max_reps: int = 2000,
    flush_l2: bool = True,
    wall_check: bool = True,
    keep_samples: bool = False,
) -> TimingResult:
    """Time ``fn(*args)`` rotating over ``arg_sets``; returns per-call statistics in milliseconds."""
    device = torch.device(device)
    if not arg_sets:
        arg_sets = [()]
    flush = _Flusher(device, flush_l2)
    estimate = max(_estimate_ms(fn, arg_sets, device, flush), 1e-4)
    for i in range(max(1, int(warmup_s * 1e3 / estimate))):
        fn(*arg_sets[i % len(arg_sets)])
    reps = int(min(max_reps, max(min_reps, budget_s * 1e3 / estimate)))

    samples: list[float] = []
    if device.type == "cuda":
        starts = [_Event(enable_timing=True) for _ in range(reps)]
        ends = [_Event(enable_timing=True) for _ in range(reps)]
        _sync(device)
        for i in range(reps):
            flush()
            _record(starts[i])
            fn(*arg_sets[i % len(arg_sets)])
            _record(ends[i])
        _sync(device)
        samples = [_elapsed_time(s, e) for s, e in zip(starts, ends)]
        method = "cuda_events"
    else:
        for i in range(reps):
            args = arg_sets[i % len(arg_sets)]
            start = _perf_counter()
            fn(*args)
            samples.append((_perf_counter() - start) * 1e3)
        method = "perf_counter"

    wall = None
    if wall_check:
        # Enough back-to-back calls to cover ~50 ms so host-clock granularity and the final
        # synchronise are negligible against the per-call figure.
        calls = int(min(max_reps, max(3, 50.0 / estimate)))
        wall = burst_ms(fn, arg_sets, device, calls)[0]
    stats = _summarise(samples)
    return TimingResult(
        method=method,
        reps=reps,
        input_sets=len(arg_sets),
        l2_flushed=flush.buffer is not None,
        wall_ms=wall,
        samples_ms=tuple(samples) if keep_samples else (),
        **stats,
    )
