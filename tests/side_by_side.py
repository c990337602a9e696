"""The test suite's long single-threaded jobs, run beside the session at idle priority.

Some fixtures each wait on one long subprocess that uses one core: nvcc on a translation unit of
torch headers, Python under Triton's interpreter with one thread. On the 2-core CI machine four of
them took 56 + 56 + 71 + 38 s one after another, 115-136 s side by side with nothing else running.

A module registers its job when it is collected (``register``, with the test items that consume
its result). Once collection is done (``start``, from the root conftest), every job some selected
test consumes starts in a thread of its own, its subprocess under the SCHED_IDLE policy
(``chrt --idle 0``, see ``launcher``): the kernel runs it only on a core that nothing else wants, so
the tests that time evaluations meanwhile keep the machine as they would have it alone (an
evaluation keeps ~1.5 of the 2 cores busy on average). The consuming tests are moved to the end of
the session (``order``), by when the jobs have had its idle time. Without ``chrt`` the jobs start
together when a test first asks and are all awaited before any test goes on, as before.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

CHRT = shutil.which("chrt")

# name -> (does this test item consume the job's result, the job given the session)
_JOBS: dict[str, tuple[Callable[[pytest.Item], bool], Callable[[pytest.Session], Any]]] = {}
_RESULTS: dict[str, Future] = {}


def register(name: str, consumes: Callable[[pytest.Item], bool], job: Callable[[pytest.Session], Any]) -> None:
    """``job(session)`` runs with the others if a selected test item ``consumes`` its result."""
    _JOBS[name] = (consumes, job)


def launcher() -> list[str]:
    """The prefix that runs a job's command at idle priority (empty where the jobs block instead)."""
    return [CHRT, "--idle", "0"] if CHRT else []


def _consumer(item: pytest.Item) -> bool:
    return any(consumes(item) for consumes, _ in _JOBS.values())


def order(items: list[pytest.Item]) -> None:
    """The tests that consume a job's result last, in their order (in place)."""
    if CHRT and _JOBS:
        items[:] = [i for i in items if not _consumer(i)] + [i for i in items if _consumer(i)]


def _run_into(future: Future, job: Callable[[pytest.Session], Any], session: pytest.Session) -> None:
    try:
        future.set_result(job(session))
    except BaseException as exc:  # noqa: BLE001 -- raised where the result is asked for
        future.set_exception(exc)


def start(session: pytest.Session) -> None:
    """Start every job a selected test consumes, in the background (only with ``chrt``), in daemon
    threads: a session that ends early does not wait for them (``stop`` ends their processes)."""
    if not CHRT or session.config.option.collectonly:
        return
    for name, (consumes, job) in _JOBS.items():
        if name not in _RESULTS and any(consumes(i) for i in session.items):
            _RESULTS[name] = Future()
            threading.Thread(target=_run_into, args=(_RESULTS[name], job, session), daemon=True,
                             name=f"side-by-side {name}").start()


def stop() -> None:
    """End the idle-priority processes of jobs still running (a session stopped early)."""
    if not CHRT or all(f.done() for f in _RESULTS.values()):
        return
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            if ppid == os.getpid() and os.sched_getscheduler(int(entry.name)) == os.SCHED_IDLE:
                os.kill(int(entry.name), signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            continue


def result(name: str, session: pytest.Session) -> Any:
    """The job's return value (its exception raised here, in the fixture that asked for it)."""
    if name not in _RESULTS:
        pending = {n: job for n, (consumes, job) in _JOBS.items()
                   if n not in _RESULTS and (n == name or any(consumes(i) for i in session.items))}
        with ThreadPoolExecutor(max_workers=len(pending)) as pool:  # leaving it waits for every job
            _RESULTS.update({n: pool.submit(job, session) for n, job in pending.items()})
    return _RESULTS[name].result()
