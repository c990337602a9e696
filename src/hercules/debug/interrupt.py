"""Stopping a debug run promptly on SIGINT/SIGTERM, keeping what finished.

A run is cut by ``timeout --signal=INT`` on a machine whose call has a hard limit, so the stop
must take seconds, not the length of the builds in flight: the handler sets ``STOP`` and kills
the process group of every build and test running (each runs in its own session, out of reach
of a signal sent to the run's group); the killed stage raises ``Interrupted`` instead of returning
a result, so nothing half-run is cached or stored as an outcome; the pools stop handing out
work and return the results finished so far.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

STOP = threading.Event()
_groups: set[int] = set()
_groups_lock = threading.RLock()  # the handler runs in the main thread, which may hold it


class Interrupted(Exception):
    """The run was asked to stop: the work in hand is abandoned, not recorded."""


def check() -> None:
    if STOP.is_set():
        raise Interrupted("the run was asked to stop")


def register(pgid: int) -> None:
    with _groups_lock:
        _groups.add(pgid)
    if STOP.is_set():  # started just as the stop came: the handler may have missed it
        kill_groups()


def unregister(pgid: int) -> None:
    with _groups_lock:
        _groups.discard(pgid)


def kill_groups() -> None:
    with _groups_lock:
        groups = list(_groups)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def request_stop(signum: int | None = None, frame=None) -> None:  # noqa: ARG001 -- a signal handler
    STOP.set()
    kill_groups()


@contextlib.contextmanager
def stop_on_signals(signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[threading.Event]:
    """While inside: the signals stop the run (``STOP`` set, running builds and tests killed).
    Only the main thread can take signals; elsewhere nothing is installed."""
    STOP.clear()
    if threading.current_thread() is not threading.main_thread():
        yield STOP
        return
    previous = {s: signal.signal(s, request_stop) for s in signals}
    try:
        yield STOP
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def map_until_stopped(fn: Callable[[T], R], items: Sequence[T], jobs: int,
                      grace_s: float = 5.0) -> Iterator[tuple[int, R]]:
    """``(index, fn(item))`` as each call finishes, ``jobs`` at a time. Once ``STOP`` is set nothing
    new starts, the calls running get ``grace_s`` to finish (their builds and tests are killed, so
    most end at once), and a call that did not finish, or failed after the stop, is left out. The
    pool is then left without waiting on its threads: a stopped run exits without them."""
    pool = ThreadPoolExecutor(max(1, jobs))
    futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
    pending: set[Future] = set(futures)
    try:
        while pending:
            done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            if STOP.is_set():
                for future in pending:
                    future.cancel()
                late, _ = wait(pending, timeout=grace_s)
                done |= {f for f in late if not f.cancelled()}
                pending = set()
            for future in done:
                try:
                    value = future.result()
                except Exception:
                    if STOP.is_set():  # Interrupted, or a failure caused by the stop
                        continue
                    raise
                yield futures[future], value
    finally:
        pool.shutdown(wait=not STOP.is_set(), cancel_futures=True)
