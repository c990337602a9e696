"""One lock per device: exclusive for measurements, shared for device work nothing times.

A measurement (candidate timing, baselines, the roofline) must have the device to itself, or a
neighbour's kernels inflate its figures. Correctness trials time nothing, so several evaluations
may run them together; they only have to stay clear of a measurement in progress. Writers (the
measurements) are preferred, so a stream of trials cannot starve a waiting measurement.

``with lock:`` takes it exclusively, so a DeviceLock stands in wherever a plain lock was used.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class DeviceLock:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._sharers = 0
        self._exclusive = False
        self._waiting_exclusive = 0

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


def shared_section(lock) -> contextlib.AbstractContextManager:
    """The shared side of ``lock`` when it has one; a plain lock is simply taken."""
    return lock.shared() if isinstance(lock, DeviceLock) else lock
