"""The measured processes ahead of the host's other work while they hold the device alone.

Evaluations in flight beside each other share the host: on the H200 (16 cores) six KernelBench
evaluations at once, four of them compiling baselines with torch.compile's worker pools, left a
measured process waiting for a core, and kernels launched one after another by a descheduled
thread leave the device idle inside the timed interval (KernelBench 31_Conv2d_Min_Add_Multiply's
events read 17-34 ms per call, 22.3 median, for a 9.7 ms call). The device lock keeps other
evaluations' kernels out of a measurement; this keeps their host work from delaying it.

While a measurement holds the device, every thread of the measured worker processes (and of the
parent's measuring thread) runs at ``BOOST_NICE``; afterwards each goes back to its niceness from
before (threads started meanwhile to the process's). Raising priority needs CAP_SYS_NICE (root, as
on the GPU machine and in CI); without it nothing changes and ``boosted`` says so.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

BOOST_NICE = -10
# The kernel's weight for a nice -10 task (sched_prio_to_weight): a cpu cgroup of measured
# workers is weighted as one boosted task while the measurement lasts.
BOOST_SHARES = 9548


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (through /proc/<pid>/task/<tid>/children)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        try:
            tids = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{current}/task/{tid}/children") as f:
                    queue.extend(int(child) for child in f.read().split())
            except (OSError, ValueError):
                pass
    return found


def threads(pids: Iterable[int]) -> list[int]:
    tids = []
    for pid in pids:
        try:
            tids.extend(int(t) for t in os.listdir(f"/proc/{pid}/task"))
        except OSError:
            pass
    return tids


def _nice(tid: int) -> int | None:
    try:
        return os.getpriority(os.PRIO_PROCESS, tid)
    except OSError:
        return None


@contextlib.contextmanager
def boosted(pids: Iterable[int], include_current_thread: bool = True, groups: Sequence[Any] = (),
            rest_shares: int = 1024) -> Iterator[bool]:
    """Every thread of ``pids`` and their descendants (and this thread) at BOOST_NICE inside the
    block, and each cpu cgroup of ``groups`` (``sandbox.CpuGroup``) weighted BOOST_SHARES, back to
    ``rest_shares`` after; yields whether the boost took (False without the privilege). A worker in
    a cgroup competes as its group: niceness only orders the threads inside it."""
    roots = [p for p in pids if p]
    tids = threads(pid for root in roots for pid in descendants(root))
    if include_current_thread:
        tids.append(threading.get_native_id())
    before: dict[int, int] = {}
    took = True
    for tid in tids:
        old = _nice(tid)
        if old is None:
            continue
        try:
            os.setpriority(os.PRIO_PROCESS, tid, BOOST_NICE)
            before[tid] = old
        except PermissionError:
            took = False
            break
        except OSError:  # the thread ended meanwhile
            pass
    for group in groups:
        group.weigh(BOOST_SHARES)
    try:
        yield took
    finally:
        for group in groups:
            group.weigh(rest_shares)
        # Threads started during the block inherited the boost: they go back to their process's
        # niceness from before (the main thread's, whose id is the process id). Twice, for threads
        # started while the first sweep ran.
        for _ in range(2):
            for tid in threads(pid for root in roots for pid in descendants(root)):
                _restore(tid, before)
        if include_current_thread:
            _restore(threading.get_native_id(), before)


def _restore(tid: int, before: dict[int, int]) -> None:
    if tid in before:
        target = before[tid]
    else:
        try:
            with open(f"/proc/{tid}/status") as f:
                tgid = next(int(line.split()[1]) for line in f if line.startswith("Tgid:"))
        except (OSError, StopIteration, ValueError):
            return
        target = before.get(tgid, 0)
    if _nice(tid) == BOOST_NICE and target != BOOST_NICE:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, target)
        except OSError:
            pass
