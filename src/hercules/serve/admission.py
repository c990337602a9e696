"""How many timed evaluations ``serve`` runs at once: as many as the host can time honestly.

Every evaluation ``serve`` runs is timed (a reward is a speedup). A measurement times the
candidate's calls on the device that computes them, so it must have that device's compute alone:

* **On a GPU** the device lock (``harness/device_lock.py``) already gives it that: a measurement
  holds the lock exclusively, so another evaluation's trials and measurements wait for it, and
  what does not wait (builds, worker start-up) is host work. The executor's two evaluations per
  GPU (one building while the other measures) stay; the host's cores bound them as well (below),
  since a measurement's launches and the parent's clock are host work too.
* **On the CPU** the device *is* the host's cores. The same lock keeps two measurements apart, but
  not the untimed work of the evaluations beside a measurement (worker start-up, builds,
  correctness trials), which then runs on the cores being timed: four concurrent requests for one
  candidate on the 2-core machine read rewards from 1.49x to 2.46x (issue 31). Each evaluation's
  workers compute on ``HERCULES_WORKER_THREADS`` threads (2 by default, ``harness/worker.py``), so
  each evaluation in flight needs that many cores of its own: at most ``cores // threads``
  evaluations at once, and never fewer than one (the 2-core machine: one at a time).
* **On Ray** the actors' hosts are Ray's to choose and their cores are not this process's to
  count: the limit is the executor's capacity unless set (``--max-timed``).

The rest wait in the service's queue, in order; each answer says how many were ahead of it and how
long it waited (``queue_position``, ``queue_wait_ms``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from hercules.harness.build import usable_cpus

# The worker's own default (harness/worker.py: torch.set_num_threads).
DEFAULT_WORKER_THREADS = 2


@dataclass(frozen=True)
class TimedLimit:
    """Timed evaluations at once, and why that many (printed at start, in /health and /metrics)."""

    at_once: int
    why: str


def worker_threads() -> int:
    """Threads each evaluation's workers compute on (``HERCULES_WORKER_THREADS``)."""
    try:
        return max(1, int(os.environ.get("HERCULES_WORKER_THREADS", DEFAULT_WORKER_THREADS)))
    except ValueError:
        return DEFAULT_WORKER_THREADS


def honest_limit(devices: Sequence[str], capacity: int, cores: int | None = None,
                 threads: int | None = None) -> TimedLimit:
    """The default limit for an executor with these ``devices`` (one entry per slot: ``cpu``,
    ``cuda:0``, ``ray:cpu``...) running ``capacity`` evaluations at once, on a host with ``cores``
    usable cores whose evaluations compute on ``threads`` threads each."""
    cores = usable_cpus() if cores is None else cores
    threads = worker_threads() if threads is None else threads
    by_cores = max(1, cores // threads)
    if any(d.startswith("ray:") for d in devices):
        return TimedLimit(capacity, f"Ray places the {capacity} evaluation slots; their hosts' cores are not "
                                    "counted here")
    if all(d == "cpu" for d in devices):
        return TimedLimit(min(capacity, by_cores),
                          f"CPU: {cores} cores, {threads} per timed evaluation (its workers' threads), so that "
                          "no evaluation's work runs on the cores another one is timing")
    return TimedLimit(min(capacity, by_cores),
                      f"GPU: each measurement holds its device's lock alone ({len(devices)} device(s), "
                      f"{capacity} evaluations at once); {cores} host cores, {threads} per evaluation")


def chosen_limit(devices: Sequence[str], capacity: int, max_timed: int | None) -> TimedLimit:
    """``max_timed`` when given (at most the executor's capacity), else ``honest_limit``."""
    if max_timed is None:
        return honest_limit(devices, capacity)
    if max_timed < 1:
        raise ValueError(f"max_timed must be at least 1 (got {max_timed})")
    if max_timed > capacity:
        return TimedLimit(capacity, f"set to {max_timed}, but the executor runs {capacity} at once")
    return TimedLimit(max_timed, "set by --max-timed")
