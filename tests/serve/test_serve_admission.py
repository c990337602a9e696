"""``serve`` runs at most as many timed evaluations at once as the host can time honestly, and
queues the rest: the limit's rule (scripted cores and devices), the service's queue over a
scripted executor (no process), and a real server whose verdicts' spans never overlap."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from click.testing import CliRunner
from serve_helpers import PROBLEM, SERVE_ARGS, candidate_code

from hercules.harness.records import Speedups, Status, Verdict
from hercules.serve.admission import TimedLimit, chosen_limit, honest_limit
from hercules.serve.client import LaunchedServer, ServeClient, ServeError


# ---- the rule --------------------------------------------------------------------------------
@pytest.mark.parametrize("devices, capacity, cores, threads, at_once", [
    (["cpu"], 2, 2, 2, 1),  # the 2-core machine: one at a time (issue 31's four requests)
    (["cpu"], 4, 16, 2, 4),  # enough cores for every slot the executor has
    (["cpu"], 8, 8, 2, 4),  # 8 cores, 2 threads each: 4
    (["cpu"], 2, 1, 2, 1),  # never fewer than one
    (["cuda:0"], 2, 16, 2, 2),  # a GPU: its lock keeps measurements apart; the executor's two stay
    (["cuda:0", "cuda:1"], 4, 4, 2, 2),  # ... bounded by the host's cores (launches are host work)
    (["ray:cuda"] * 3, 6, 2, 2, 6),  # Ray places its slots; the local cores say nothing of them
])
def test_the_limit_follows_the_cores_on_a_cpu_and_the_device_lock_on_a_gpu(devices, capacity, cores, threads,
                                                                            at_once):
    limit = honest_limit(devices, capacity, cores, threads)
    assert limit.at_once == at_once and limit.why


def test_a_chosen_limit_is_kept_within_the_executor():
    assert chosen_limit(["cpu"], 4, 3) == TimedLimit(3, "set by --max-timed")
    assert chosen_limit(["cpu"], 2, 5).at_once == 2
    with pytest.raises(ValueError):
        chosen_limit(["cpu"], 2, 0)


def test_max_timed_below_one_is_one_line_and_exit_2():
    from hercules.serve.cli import serve_command

    result = CliRunner().invoke(serve_command, ["--max-timed", "0"])
    assert result.exit_code == 2 and "--max-timed must be at least 1" in result.output


# ---- the queue, over a scripted executor -----------------------------------------------------
class _ScriptedExecutor:
    """Four slots that would all run at once; records how many ran together."""

    devices = ["cpu"]
    capacity = 4

    def __init__(self) -> None:
        self.running = self.most = 0
        self._lock = threading.Lock()

    def submit_tracked(self, problem, candidate, options) -> Future:
        from hercules.executor import Tracked

        future: Future = Future()

        def run() -> None:
            with self._lock:
                self.running += 1
                self.most = max(self.most, self.running)
            time.sleep(0.02)
            with self._lock:
                self.running -= 1
            verdict = Verdict(status=Status.INCORRECT, correct=False, flags=(), error="scripted", max_abs_err=None,
                              rel_err=None, ref_ms=None, cand_ms=None, speedup=Speedups(), sol_fraction=None)
            future.set_result(Tracked(verdict, 1))

        threading.Thread(target=run, daemon=True).start()
        return future

    def close(self) -> None:
        pass


def test_the_service_runs_at_most_its_limit_and_says_where_each_waited():
    from hercules.harness.evaluate import EvalOptions
    from hercules.serve.service import RewardService

    executor = _ScriptedExecutor()
    service = RewardService(executor, options=EvalOptions(device="cpu"), limit=TimedLimit(2, "scripted"))

    async def run():
        await service.start()
        try:
            subs = [service.parse({"problem": PROBLEM, "candidate": candidate_code(init_extra=f"x = {i}")})
                    for i in range(5)]
            return await service.evaluate_many(subs)
        finally:
            await service.stop()

    answers = asyncio.run(run())
    assert [a.status for a in answers] == ["incorrect"] * 5
    assert executor.most <= 2
    # queued together: each saw those before it, running or waiting
    assert [a.queued.position for a in answers] == [0, 1, 2, 3, 4]
    assert all(a.queued.waited_s >= 0 for a in answers)
    metrics = service.metrics_json()
    assert metrics["max_timed"] == 2 and metrics["running_max"] <= 2 and metrics["queue_wait_ms"]["n"] == 5
    assert answers[0].to_json()["queue_position"] == 0


# ---- a real server ---------------------------------------------------------------------------
def _wait_for(client: ServeClient, running: int, waiting: int) -> None:
    deadline = time.monotonic() + 120
    while True:
        metrics = client.metrics()
        if metrics["running"] == running and metrics["queue_depth"] == waiting:
            return
        assert time.monotonic() < deadline, f"never {running} running and {waiting} waiting: {metrics}"
        time.sleep(0.05)


def _interval(answer: dict) -> tuple[float, float]:
    spans = answer["verdict"]["spans"]
    return min(s[1] for s in spans), max(s[2] for s in spans)


def test_a_real_server_times_one_evaluation_at_a_time_and_answers_a_full_queue(tmp_path, problem_code):
    """Two executor slots, a limit of one: two distinct submissions run one after the other (their
    verdicts' spans, measurements included, never overlap), each answer says how many were ahead
    and how long it waited, and a third finds the queue full and is told so in one JSON line."""
    args = [*SERVE_ARGS, "--no-cache", "--max-timed", "1", "--queue-size", "1", "--admission-timeout", "0.5"]
    with LaunchedServer(args, log_path=str(tmp_path / "serve.log")) as server:
        client = ServeClient(server.url, retries=0)
        assert client.health()["max_timed"] == 1 and client.health()["capacity"] == 2
        with ThreadPoolExecutor(2) as pool:
            # the first sleeps long enough to be running still when the third asks (0.5 s admission)
            first = pool.submit(client.evaluate, problem_code, candidate_code(init_extra="time.sleep(4)"))
            _wait_for(client, 1, 0)
            second = pool.submit(client.evaluate, problem_code, candidate_code(init_extra="time.sleep(0.1)"))
            _wait_for(client, 1, 1)
            with pytest.raises(ServeError) as info:
                client.evaluate(problem_code, candidate_code(init_extra="time.sleep(0.2)"))
            answers = [f.result(timeout=600) for f in (first, second)]
        assert info.value.status == 429 and "\n" not in str(info.value)
        assert "queue full" in str(info.value) and "at most 1 at once" in str(info.value)
        assert [a["status"] for a in answers] == ["ok"] * 2
        assert [a["queue_position"] for a in answers] == [0, 1] and answers[1]["queue_wait_ms"] > 0
        (_, first_end), (second_start, _) = sorted(_interval(a) for a in answers)
        assert second_start >= first_end - 0.002  # spans are rounded to the millisecond
        measuring = sorted((s[1], s[2]) for a in answers for s in a["verdict"]["spans"] if s[0] == "measuring")
        assert len(measuring) >= 2 and all(b[0] >= a[1] - 0.002 for a, b in zip(measuring, measuring[1:]))
        metrics = client.metrics()
        assert metrics["running_max"] == 1 and metrics["max_timed"] == 1
        assert metrics["queue_wait_ms"]["n"] == 2 and metrics["counts"]["rejected_queue_full"] == 1
