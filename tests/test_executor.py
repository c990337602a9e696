"""The evaluation executor on the CPU: real evaluations in real worker processes, real kills.

Each evaluation starts two Python workers (~4 s on two cores), so the cases are few and combined.
"""

from __future__ import annotations

import os
import signal
import textwrap
import time
from pathlib import Path

import pytest

from hercules.executor import (
    EvaluationLost,
    LocalExecutor,
    evaluation_worker_pids,
    make_executor,
)
from hercules.harness.evaluate import EvalOptions
from hercules.harness.records import Status
from hercules.problems.loaders import load_source
from hercules.problems.model import Candidate

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def problem():
    return load_source(FIXTURES / "scale_relu.py").problems[0]


@pytest.fixture
def options(tmp_path):
    return EvalOptions(device="cpu", baselines=("eager",), timing_budget_s=0.05, warmup_s=0.01, trials=2,
                       revalidation_sets=1, run_timeout_s=60, cache_dir=tmp_path / "cache")


def candidate(init_extra: str = "", forward: str = "return torch.relu(self.lin(x)) * 2", name: str = "c"):
    code = textwrap.dedent(f"""
        import os, signal, time
        import torch
        import torch.nn as nn

        class ModelNew(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.lin = nn.Linear(n, n)
                {init_extra}

            def forward(self, x):
                {forward}
    """)
    return Candidate(name=name, code=code, source="test")


def wait_for_worker(role: str, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [pid for pid, r in evaluation_worker_pids() if r == role]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no {role} worker appeared")


def test_concurrent_evaluations_and_a_wrong_one(problem, options):
    with make_executor(device="cpu", workers=2) as executor:
        assert executor.devices == ["cpu"] and executor.capacity == 2
        good = executor.submit(problem, candidate(), options)
        wrong = executor.submit(problem, candidate(forward="return self.lin(x)"), options)
        assert good.result(timeout=120).status is Status.OK
        assert wrong.result(timeout=120).status is Status.INCORRECT


def test_worker_killed_mid_request_is_retried(problem, options):
    """The candidate's worker is killed from outside while it builds: the evaluation runs again."""
    with LocalExecutor(device="cpu", workers=1, retries=2) as executor:
        slow = candidate(init_extra="time.sleep(1.5)")
        future = executor.submit_tracked(problem, slow, options)
        os.kill(wait_for_worker("candidate"), signal.SIGKILL)
        tracked = future.result(timeout=120)
        assert tracked.attempts == 2
        assert tracked.verdict.status is Status.OK, tracked.verdict.error


def test_retries_are_bounded_and_candidate_crashes_are_not_retried(problem, options):
    with LocalExecutor(device="cpu", workers=2, retries=1) as executor:
        # Kills itself with SIGKILL every time: indistinguishable from an outside kill, so retried,
        # but only once; the answer is then the crash verdict.
        suicidal = executor.submit_tracked(problem, candidate(init_extra="os.kill(os.getpid(), signal.SIGKILL)"),
                                           options)
        exiting = executor.submit_tracked(problem, candidate(init_extra="os._exit(3)"), options)
        tracked = suicidal.result(timeout=120)
        assert (tracked.attempts, tracked.verdict.status) == (2, Status.CRASH)
        assert "SIGKILL" in tracked.verdict.error
        tracked = exiting.result(timeout=120)
        assert (tracked.attempts, tracked.verdict.status) == (1, Status.CRASH)


def test_bad_devices_are_refused(problem, options):
    with pytest.raises(ValueError, match="device"):
        make_executor(device="tpu")
    with make_executor(device="cpu", workers=1) as executor, pytest.raises(ValueError, match="runs on cpu"):
        executor.submit(problem, candidate(), EvalOptions(device="cuda"))
    with pytest.raises(RuntimeError, match="closed"):
        executor.submit(problem, candidate(), options)


def test_ray_two_cpu_workers_survive_an_actor_death(problem, options):
    """A two-actor local Ray instance: both evaluate, and an actor killed mid-request is retried."""
    pytest.importorskip("ray")
    with make_executor(ray_address="local", device="cpu", workers=2, retries=2) as executor:
        assert executor.devices == ["ray:cpu", "ray:cpu"]
        pids = executor.actor_pids()
        assert len(set(pids)) == 2
        slow = candidate(init_extra="time.sleep(2.0)", name="slow")
        futures = [executor.submit_tracked(problem, slow, options),
                   executor.submit_tracked(problem, candidate(name="fast"), options)]
        time.sleep(1.0)  # both are running now, one per actor
        os.kill(pids[0], signal.SIGKILL)
        results = [f.result(timeout=150) for f in futures]
        assert all(r.verdict.status is Status.OK for r in results), [r.verdict.error for r in results]
        assert max(r.attempts for r in results) == 2


def test_lost_evaluation_raises_after_the_bound(problem, options):
    """A backend whose every attempt fails (an exception, as a lost Ray actor gives) ends in EvaluationLost."""

    class Failing(LocalExecutor):
        calls = 0

        def _run(self, *args):
            Failing.calls += 1
            raise ConnectionError("node lost")

    with Failing(device="cpu", workers=1, retries=2) as executor, pytest.raises(EvaluationLost, match="3 times"):
        executor.submit(problem, candidate(), options).result(timeout=10)
    assert Failing.calls == 3
