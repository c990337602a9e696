"""One lock per device: exclusive for measurements, shared for device work nothing times.

A measurement (candidate timing, baselines, the roofline) must have the device to itself, or a
neighbour's kernels inflate its figures. Correctness trials time nothing, so several evaluations
may run them together; they only have to stay clear of a measurement in progress. Writers (the
measurements) are preferred, so a stream of trials cannot starve a waiting measurement.

``with lock:`` takes it exclusively, so a DeviceLock stands in wherever a plain lock was used.

It also counts the evaluations in flight on the device (``evaluation()``). One whose data alone
fills a large share of the device's memory asks to run with no other evaluation beside it
(``alone()``): it waits, holding no section, until the others in flight have finished, and no new
one starts meanwhile. On the H200 two KernelBench problems of 6.4 GB inputs each (21_Sigmoid,
26_GELU), evaluated side by side, ran out of memory between them.

A caller whose threads are not already its bound on evaluations (``hercules bench`` runs
``--eval-jobs`` threads; the debugging benchmark runs up to ``--jobs`` trajectories, most of them
native builds and tests) gives ``max_evaluations``: a new one waits while that many are in flight.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class DeviceLock:
    def __init__(self, max_evaluations: int | None = None) -> None:
        if max_evaluations is not None and max_evaluations < 1:
            raise ValueError(f"max_evaluations must be at least 1, not {max_evaluations}")
        self._max_evaluations = max_evaluations
        self._cond = threading.Condition()
        self._sharers = 0
        self._exclusive = False
        self._waiting_exclusive = 0
        self._evaluations = 0  # in flight beside each other
        self._alone = False  # one evaluation in flight with no other
        self._waiting_alone = 0

    def acquire(self) -> None:
        with self._cond:
            self._waiting_exclusive += 1
            try:
                self._cond.wait_for(lambda: not self._exclusive and self._sharers == 0)
            finally:
                self._waiting_exclusive -= 1
            self._exclusive = True

    def release(self) -> None:
        with self._cond:
            if not self._exclusive:
                raise RuntimeError("release of a DeviceLock that is not held exclusively")
            self._exclusive = False
            self._cond.notify_all()

    def __enter__(self) -> DeviceLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive and self._waiting_exclusive == 0)
            self._sharers += 1
        try:
            yield
        finally:
            with self._cond:
                self._sharers -= 1
                self._cond.notify_all()


    @contextlib.contextmanager
    def evaluation(self) -> Iterator["Occupancy"]:
        """One evaluation in flight, for its whole length; it may ask to go on alone."""
        with self._cond:
            self._cond.wait_for(lambda: not self._alone and self._waiting_alone == 0 and self._has_room())
            self._evaluations += 1
        ticket = Occupancy(self)
        try:
            yield ticket
        finally:
            with self._cond:
                if ticket.alone:
                    self._alone = False
                else:
                    self._evaluations -= 1
                self._cond.notify_all()

    def _has_room(self) -> bool:
        return self._max_evaluations is None or self._evaluations < self._max_evaluations

    def _go_alone(self, ticket: "Occupancy") -> None:
        with self._cond:
            self._evaluations -= 1  # a waiter does not count: two asking at once take turns
            self._waiting_alone += 1
            try:
                self._cond.wait_for(lambda: not self._alone and self._evaluations == 0)
            finally:
                self._waiting_alone -= 1
            self._alone = True
            ticket.alone = True


class Occupancy:
    """An evaluation's place on the device: shared with others in flight, or alone."""

    def __init__(self, lock: DeviceLock):
        self._lock = lock
        self.alone = False

    def go_alone(self) -> None:
        """Wait until no other evaluation is in flight, then go on alone. Call it holding no
        section of the lock: the others need theirs to finish."""
        if not self.alone:
            self._lock._go_alone(self)


def shared_section(lock) -> contextlib.AbstractContextManager:
    """The shared side of ``lock`` when it has one; a plain lock is simply taken."""
    return lock.shared() if isinstance(lock, DeviceLock) else lock
