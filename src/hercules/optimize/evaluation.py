"""Evaluations go through the executor (``hercules.executor.make_executor``): a local process pool
by default, Ray workers (one per GPU) given a cluster address, evaluations bounded per GPU.
The executor calls the evaluation core (``hercules.harness.evaluate.evaluate``) and nothing else.

``LocalExecutor`` is the same interface over threads in this process, each calling the core with
one shared measurement lock: the fallback where ``hercules.executor`` is not installed.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from hercules.harness.evaluate import EvalOptions, evaluate
from hercules.harness.records import Verdict
from hercules.problems.model import Candidate, Problem


class EvalExecutor(Protocol):
    def submit(self, problem: Problem, candidate: Candidate, options: EvalOptions) -> Future[Verdict]: ...

    def close(self) -> None: ...


class LocalExecutor:
    def __init__(self, workers: int = 2) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="hercules-eval")
        self._lock = threading.Lock()  # one measurement at a time: timings must not share the device

    def submit(self, problem: Problem, candidate: Candidate, options: EvalOptions) -> Future[Verdict]:
        return self._pool.submit(evaluate, problem, candidate, options, self._lock)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def open_executor(*, ray_address: str | None, device: str, workers: int | None) -> EvalExecutor:
    try:
        from hercules.executor import make_executor
    except ImportError:
        if ray_address:
            raise RuntimeError("--ray-address needs hercules.executor, which is not installed") from None
        return LocalExecutor(workers or 2)
    return make_executor(ray_address=ray_address, device=device, workers=workers)
