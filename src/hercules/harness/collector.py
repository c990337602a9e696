"""The parent's cyclic garbage collector kept out of the requests it times.

Why: the parent imports torch and the harness (182,000 objects on the CPU machine) and a full
collection there took 30-119 ms; one evaluation of the red-team matmul problem on the CPU ran three
of them and gen-1 collections of up to 9 ms, each started by whatever allocation came next, in or
out of a timed request. Inside one, it adds its whole length to the request: over a pass of 227
calls, 100 ms is 0.44 ms per call, against an honest 0.13 ms call. The workers freeze their heaps
(worker.SETTLE_OPS); the parent's heap keeps changing between requests, so collection is paused
for each timed request instead and resumes after it (reference counting still frees what is not
in a cycle). Evaluations in threads of one process share the pause: collection resumes when the
last timed request ends, and only if it was on before the first began.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

_lock = threading.Lock()
_holders = 0
_was_enabled = False


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection in this process while the body runs."""
    global _holders, _was_enabled
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                gc.enable()


@dataclass
class Stopwatch:
    ms: float = 0.0  # set when the timed body ends


@contextlib.contextmanager
def timed() -> Iterator[Stopwatch]:
    """The body's wall time in ms on the parent's clock, with collection paused for its length:
    every request the parent times goes through here."""
    watch = Stopwatch()
    with paused():
        started = time.perf_counter()
        try:
            yield watch
        finally:
            watch.ms = (time.perf_counter() - started) * 1e3
