"""How many evaluations of the core a debug run lets run at once, on the lock its attempts share.

KernelBench instances are evaluated by the core two at a time (as ``hercules bench`` does by default
on a GPU), however many trajectories run beside them (``--jobs``: mostly native builds and tests).
Unbounded, with 16 jobs on the H200 (128 GiB host), 15 of the 25 KernelBench reproductions reached
were killed from outside (SIGKILL, in the candidate's setup) and came out untested; on the H100
several came out of device memory with up to 15 others in flight (whether they fit alone was not
tried). Kept out of ``attempt.py``: how many run at once is not what an attempt's outcome is made of
(``conditions.code_fingerprint``), and the native reproductions made before stay valid.
"""

from __future__ import annotations

from hercules.harness.device_lock import DeviceLock

CORE_EVALUATIONS_IN_FLIGHT = 2


def device_lock() -> DeviceLock:
    """The lock a debug run shares among its attempts: GPU tests one at a time, core evaluations
    ``CORE_EVALUATIONS_IN_FLIGHT`` at a time."""
    return DeviceLock(max_evaluations=CORE_EVALUATIONS_IN_FLIGHT)
