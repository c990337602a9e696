"""The evaluation executor on the CPU: real evaluations in real worker processes, real kills.

Each evaluation starts two Python workers (~4 s on two cores), so the cases are few and combined.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from serve_helpers import HONEST, PROBLEM, WRONG, candidate_code

from hercules.executor import (
    EvaluationLost,
    LocalExecutor,
    make_executor,
)
from hercules.harness.evaluate import EvalOptions
from hercules.harness.records import Status
from hercules.problems.model import Candidate
from hercules.serve.problems import problem_from_code


@pytest.fixture(scope="module")
def problem():
    return problem_from_code(PROBLEM["code"], PROBLEM["name"])


@pytest.fixture
def options(tmp_path):
    return EvalOptions(device="cpu", baselines=("eager",), timing_budget_s=0.05, warmup_s=0.01, trials=2,
                       revalidation_sets=1, run_timeout_s=60, cache_dir=tmp_path / "cache")


def candidate(init_extra: str = "", forward: str = HONEST, name: str = "c"):
    return Candidate(name=name, code=candidate_code(forward=forward, init_extra=init_extra), source="test")


def test_concurrent_evaluations_crashes_and_the_retry_bound(problem, options):
    with make_executor(device="cpu", workers=2, retries=1) as executor:
        assert executor.devices == ["cpu"] and executor.capacity == 2
        futures = [executor.submit_tracked(problem, c, options) for c in (
            candidate(),
            candidate(forward=WRONG),
            # Kills itself with SIGKILL every time: indistinguishable from an outside kill, so
            # retried, but only once; the answer is then the crash verdict.
            candidate(init_extra="os.kill(os.getpid(), signal.SIGKILL)"),
            # Exits by itself: the candidate's fault, never retried.
            candidate(init_extra="os._exit(3)"),
        )]
        good, wrong, suicidal, exiting = (f.result(timeout=180) for f in futures)
    assert (good.verdict.status, good.attempts) == (Status.OK, 1), (good.verdict.error, good.retried)
    assert wrong.verdict.status is Status.INCORRECT
    assert (suicidal.attempts, suicidal.verdict.status) == (2, Status.CRASH)
    assert len(suicidal.retried) == 1 and suicidal.retried[0].startswith("external_kill: "), suicidal.retried
    assert "SIGKILL" in suicidal.verdict.error
    assert (exiting.attempts, exiting.verdict.status) == (1, Status.CRASH)


def test_bad_devices_are_refused(problem, options):
    with pytest.raises(ValueError, match="device"):
        make_executor(device="tpu")
    with make_executor(device="cpu", workers=1) as executor, pytest.raises(ValueError, match="runs on cpu"):
        executor.submit(problem, candidate(), EvalOptions(device="cuda"))
    with pytest.raises(RuntimeError, match="closed"):
        executor.submit(problem, candidate(), options)


def _device_and_pid(device: str) -> tuple[str, int]:
    return device, os.getpid()


def test_local_executor_runs_device_facts_on_its_first_device(options):
    with make_executor(device="cpu", workers=1) as executor:
        assert executor.run_on_device(_device_and_pid) == ("cpu", os.getpid())


def test_ray_two_cpu_workers_survive_an_actor_death(problem, options, tmp_path):
    """A two-actor local Ray instance: both evaluate, and an actor killed mid-request is retried."""
    pytest.importorskip("ray")
    from hercules.optimize.hardware import hardware_facts

    with make_executor(ray_address="local", device="cpu", workers=2, retries=2) as executor:
        assert executor.devices == ["ray:cpu", "ray:cpu"]
        pids = executor.actor_pids()
        assert len(set(pids)) == 2
        # facts about the evaluating device are measured by an actor (a function it can import)
        facts = executor.run_on_device(hardware_facts, tmp_path)
        assert facts.device == "cpu" and facts.bandwidth_gbs > 0 and facts.matmul_tflops
        assert list((tmp_path / "devices").glob("*.json"))  # the ceilings it measured, cached
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


@pytest.mark.gpu
def test_gpu_slots_time_with_cuda_events(problem, tmp_path):
    """One slot (and lock) per GPU; two evaluations at once, both measured with CUDA events."""
    import torch

    options = EvalOptions(device="cuda", baselines=("eager",), timing_budget_s=0.05, warmup_s=0.01, trials=2,
                          cache_dir=tmp_path / "cache")
    with make_executor(device="cuda") as executor:
        assert executor.devices == [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        futures = [executor.submit(problem, candidate(name=f"c{i}"), options) for i in range(2)]
        verdicts = [f.result(timeout=300) for f in futures]
    assert all(v.status is Status.OK for v in verdicts), [v.error for v in verdicts]
    assert all(v.timing.method == "cuda_events" and v.speedup.eager > 0 for v in verdicts)


def test_the_machine_failing_under_an_evaluation_is_retried_and_its_candidates_failures_are_not():
    """A worker killed from outside, or the device refused to the trusted side, is the machine's
    failure (tried again, never cached); every cause that is the candidate's or the problem's is not."""
    from hercules.executor import infrastructure_failure
    from hercules.harness.records import Cause, Speedups, Verdict

    def verdict(status: Status, cause: Cause) -> Verdict:
        return Verdict(status=status, correct=False, flags=(), error="x", max_abs_err=None, rel_err=None,
                       ref_ms=None, cand_ms=None, speedup=Speedups(), sol_fraction=None, cause=cause)

    assert infrastructure_failure(verdict(Status.CRASH, Cause.EXTERNAL_KILL))
    assert infrastructure_failure(verdict(Status.HARNESS_ERROR, Cause.DEVICE_UNAVAILABLE))
    for cause in (Cause.CANDIDATE_ERROR, Cause.CANDIDATE_CRASH, Cause.REFERENCE, Cause.OUT_OF_MEMORY, Cause.HARNESS):
        assert not infrastructure_failure(verdict(Status.RUNTIME_ERROR, cause)), cause
