"""Stopping a run promptly on SIGINT/SIGTERM, keeping what finished.

One mechanism for every long command (``bench``, ``optimize``, ``serve``, ``debug run``). A run is
cut by a terminal's Ctrl-C (SIGINT to the whole foreground process group) or by ``timeout
--signal=INT`` on a machine whose call has a hard limit, so the stop must take seconds, not the
length of the builds and evaluations in flight. The handler sets ``STOP``, remembers the signal
(the exit status is 128 + its number: 130 for SIGINT, 143 for SIGTERM) and kills:

* the process group of every build and test registered (``register``; the debugging benchmark's
  stages, each in its own session, out of reach of a signal sent to the run's group), and
* every process below this one (evaluation workers and their sandboxes, compilers), again every
  ``REAP_INTERVAL_S`` while the stop lasts: an evaluation that was waiting for the device lock or
  an executor's retry must not start fresh workers that run on.

The killed stage raises or returns a failure; the caller drops it (``abandoned``) instead of
recording it, so nothing half-run is cached or stored as the candidate's outcome; the pools stop
handing out work and return the results finished so far.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from hercules.harness.records import Verdict

T = TypeVar("T")
R = TypeVar("R")

STOP = threading.Event()
REAP_INTERVAL_S = 0.2
# A signal sent to the process group reaches a worker and this process at once; the worker's
# death may be seen by an evaluation thread a moment before the handler runs in the main thread.
SIGNAL_RACE_S = 2.0

_groups: set[int] = set()
_groups_lock = threading.RLock()  # the handler runs in the main thread, which may hold it
_state = {"signal": None}  # the first signal that stopped the run
_reaper: list[threading.Thread] = []


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


def descendants(root: int | None = None) -> list[int]:
    """Process ids below ``root`` (this process by default), read from /proc (Linux)."""
    root = root or os.getpid()
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def kill_descendants() -> None:
    """SIGKILL every process below this one; a child that leads its own process group (workers
    start in their own session) takes its whole group with it. This process's own group is never
    signalled as a group."""
    own_group = os.getpgrp()
    for pid in descendants():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(pid)
            if group == pid and group != own_group:
                os.killpg(group, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)


def _reap_while_stopped() -> None:
    while STOP.is_set():
        kill_groups()
        kill_descendants()
        time.sleep(REAP_INTERVAL_S)


def request_stop(signum: int | None = None, frame=None) -> None:  # noqa: ARG001 -- a signal handler
    if signum is not None and _state["signal"] is None:
        _state["signal"] = signum
    STOP.set()
    kill_groups()
    kill_descendants()
    if not any(t.is_alive() for t in _reaper):
        thread = threading.Thread(target=_reap_while_stopped, name="hercules-stop-reaper", daemon=True)
        _reaper[:] = [thread]
        thread.start()


def stopped_by() -> int | None:
    """The signal that stopped the run, if one did."""
    return _state["signal"] if STOP.is_set() else None


def exit_status() -> int:
    """The shell's status for a run ended by its signal: 130 for SIGINT, 143 for SIGTERM."""
    return 128 + int(_state["signal"] or signal.SIGINT)


def signal_name() -> str:
    number = _state["signal"] or signal.SIGINT
    return signal.Signals(number).name


def exit_stopped() -> None:
    """Leave at once after a stop (``exit_status()``): a thread still waiting on work that cannot be
    interrupted must not hold the exit; what it would finish is not needed, and every file the
    run keeps was written whole (atomically)."""
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_status())


def abandoned(verdict: Verdict | None = None) -> bool:
    """True when a result must be dropped rather than recorded: the run is stopping, or the
    verdict is a worker ended by SIGINT/SIGTERM and the run's own stop follows within
    ``SIGNAL_RACE_S`` (a terminal's Ctrl-C reaches the workers and this process together). A
    candidate that signals itself, with no stop of the run, keeps its verdict."""
    if STOP.is_set():
        return True
    if verdict is None or not verdict.error:
        return False
    if "killed by SIGINT" not in verdict.error and "killed by SIGTERM" not in verdict.error:
        return False
    return STOP.wait(SIGNAL_RACE_S)


@contextlib.contextmanager
def stop_on_signals(signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[threading.Event]:
    """While inside: the signals stop the run (``STOP`` set, running work killed). Only the main
    thread can take signals; elsewhere nothing is installed."""
    STOP.clear()
    _state["signal"] = None
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
    new starts, the calls running get ``grace_s`` to finish (their builds, tests and workers are
    killed, so most end at once), and a call that did not finish, or failed after the stop, is
    left out. The pool is then left without waiting on its threads: a stopped run exits without
    them."""
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


def run_until_stopped(coro: Coroutine[object, object, R], poll_s: float = 0.1) -> R | None:
    """Run ``coro`` on a fresh event loop until it finishes or ``STOP`` is set; on a stop it is
    cancelled (every await in it ends at once, so nothing in flight is recorded) and None comes
    back without waiting for the loop's threads (model calls, evaluations being killed): the
    caller reports what finished and leaves with ``exit_stopped``."""

    async def guarded() -> R | None:
        task = asyncio.ensure_future(coro)
        while not task.done():
            if STOP.is_set():
                task.cancel()
                await asyncio.wait([task], timeout=5.0)
                return None
            await asyncio.wait([task], timeout=poll_s)
        return task.result()

    loop = asyncio.new_event_loop()
    try:
        result = loop.run_until_complete(guarded())
        if not STOP.is_set():
            loop.run_until_complete(loop.shutdown_default_executor())
        return result
    finally:
        loop.close()  # its default executor shut down without waiting
