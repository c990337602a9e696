"""The test suite's long single-threaded jobs, run side by side.

Some fixtures each wait on one long subprocess that uses one core: nvcc on a translation unit of
torch headers, Python under Triton's interpreter with one thread. On the 2-core CI machine four of
them took 56 + 56 + 71 + 38 s one after another. A module registers its job when it is collected
(``register``); the first fixture that asks for any result (``result``) starts every registered
job whose tests were selected, in threads (each waits on its subprocess), and waits for all of
them before any test goes on: no test runs beside them, since some time candidates.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

# name -> (does the session need it, the job given the session's pytest request)
_JOBS: dict[str, tuple[Callable[[pytest.Session], bool], Callable[[pytest.FixtureRequest], Any]]] = {}
_RESULTS: dict[str, Future] = {}


def register(name: str, needed: Callable[[pytest.Session], bool], job: Callable[[pytest.FixtureRequest], Any]) -> None:
    """``job(request)`` runs with the others when first asked for, if ``needed(session)``."""
    _JOBS[name] = (needed, job)


def result(name: str, request: pytest.FixtureRequest) -> Any:
    """The job's return value (its exception raised here, in the fixture that asked for it)."""
    if name not in _RESULTS:
        pending = {n: job for n, (needed, job) in _JOBS.items()
                   if n not in _RESULTS and (n == name or needed(request.session))}
        with ThreadPoolExecutor(max_workers=len(pending)) as pool:  # leaving it waits for every job
            _RESULTS.update({n: pool.submit(job, request) for n, job in pending.items()})
    return _RESULTS[name].result()
