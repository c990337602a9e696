"""``hercules serve`` over HTTP: real server process, real evaluations, real SQLite, real kills."""

from __future__ import annotations

import math
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from serve_helpers import HONEST, SERVE_ARGS, WRONG, candidate_code

from hercules.executor import evaluation_worker_pids
from hercules.serve.client import LaunchedServer, ServeClient, ServeError


def test_identical_submissions_are_evaluated_once_then_cached(server, problem_code):
    client = server.client
    before = client.metrics()["counts"].get("evaluations", 0)
    code = candidate_code(forward=HONEST + "  # unique to this test")
    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda _: client.evaluate(problem_code, code), range(3)))
    assert [a["status"] for a in answers] == ["ok"] * 3
    assert sum(a["deduplicated"] for a in answers) == 2
    assert len({a["key"] for a in answers}) == 1 and len({a["reward"] for a in answers}) == 1
    assert answers[0]["reward"] == pytest.approx(math.log(answers[0]["speedup"]))
    assert answers[0]["verdict"]["speedup"]["eager"] == answers[0]["speedup"]
    # eager was timed beside the candidate: the answer carries the speedup's interval
    assert answers[0]["interval"] == answers[0]["verdict"]["speedup"]["intervals"]["eager"]
    assert answers[0]["interval"][0] <= answers[0]["speedup"] <= answers[0]["interval"][1]
    again = client.evaluate({"code": problem_code, "name": "renamed"}, code)
    assert again["cached"] and again["attempts"] == 0 and again["reward"] == answers[0]["reward"]
    metrics = client.metrics()
    assert metrics["counts"]["evaluations"] - before == 1
    assert metrics["counts"]["cache_hits"] >= 1 and metrics["counts"]["deduplicated"] >= 2


def test_batch_answers_in_order(server, problem_code):
    good = candidate_code()
    results = server.client.batch([
        {"candidate": candidate_code(forward=WRONG)},
        {"completion": "I would fuse the ops, but here is no code."},
        {"completion": f"Analysis...\n```python\n{good}```\n"},
        {"candidate": {"code": good, "name": "honest"}, "reward": {"transform": "raw"}},
    ], problem=problem_code)
    assert [r["status"] for r in results] == ["incorrect", "no_code", "ok", "ok"]
    assert results[0]["reward"] == -1.0 and results[1]["reward"] == -1.0
    assert results[1]["error"] == "no code block defining class ModelNew"
    assert results[3]["reward"] == pytest.approx(results[3]["speedup"])  # raw transform: the ratio itself


@pytest.mark.parametrize("payload, message", [
    ({"problem": "no_such_problem", "candidate": "x"}, "unknown built-in problem"),
    ({"problem": "class Model: pass\n"}, "missing get_inputs"),
    ({"problem": "mish_fp32"}, "missing field 'candidate'"),
    ({"problem": "mish_fp32", "candidate": "x", "options": {"device": "cuda"}}, "not settable"),
    ({"problem": "mish_fp32", "candidate": "x", "options": {"baselines": "eager"}}, "must be a list of names"),
    ({"problem": "mish_fp32", "candidate": "x", "options": {"baselines": ["eagre"]}}, "unknown baselines eagre"),
    ({"problem": "mish_fp32", "candidate": "x", "reward": {"transform": "cube"}}, "transform must be"),
    # A field present with the wrong type is named as such, not as missing.
    ({"problem": "mish_fp32", "candidate": 5}, "'candidate' must be ModelNew source text"),
    ({"problem": "mish_fp32", "completion": ["x"]}, "'completion' must be the model's output as text"),
    ({"problem": "mish_fp32", "candidate": "x", "reward": 3}, "reward must be an object"),
    ({"problem": "mish_fp32", "candidate": "x", "options": {"trials": "a"}}, "options.trials: must be an integer"),
    ({"problem": "mish_fp32", "candidate": "x", "options": {"trials": 2.5}}, "options.trials: must be an integer"),
    ({"problem": "mish_fp32", "candidate": "x", "options": {"trials": 0}}, "options.trials: must be at least 1"),
    # Bounded: a budget of hours would hold one of the host's few timed evaluations that long.
    ({"problem": "mish_fp32", "candidate": "x", "options": {"timing_budget_s": 1e9}}, "options.timing_budget_s"),
    ({"problem": "mish_fp32", "candidate": "x", "options": {"timing_budget_s": 0}}, "must be above 0"),
    ({"problem": "mish_fp32", "candidate": "x", "options": {"warmup_s": -1}}, "options.warmup_s"),
    ({"problem": "mish_fp32", "candidate": "x", "options": {"revalidation_sets": 0}}, "options.revalidation_sets"),
])
def test_bad_requests_get_a_one_line_400(server, payload, message):
    with pytest.raises(ServeError, match=message) as info:
        server.client._call("POST", "/v1/evaluate", payload)
    assert info.value.status == 400 and "\n" not in str(info.value)


def test_worker_killed_mid_request_is_retried(server, problem_code):
    slow = candidate_code(init_extra="time.sleep(1.5)")
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(server.client.evaluate, problem_code, slow)
        deadline = time.monotonic() + 60
        while not (workers := [p for p, role in evaluation_worker_pids(server.pid) if role == "candidate"]):
            assert time.monotonic() < deadline, "no candidate worker appeared"
            time.sleep(0.05)
        os.kill(workers[0], signal.SIGKILL)
        answer = pending.result(timeout=120)
    assert answer["status"] == "ok" and answer["attempts"] == 2
    metrics = server.client.metrics()
    assert metrics["counts"]["retries"] >= 1
    assert metrics["latency_ms"]["p50"] > 0 and metrics["latency_ms"]["p99"] >= metrics["latency_ms"]["p50"]
    assert server.client.health()["ok"]


def test_cache_survives_a_restart_and_a_full_queue_says_429(server, serve_cache, problem_code):
    server.client.evaluate(problem_code, candidate_code())  # stored (a cache hit if run after the others)
    args = [*SERVE_ARGS, "--cache", str(serve_cache), "--workers", "1", "--queue-size", "1",
            "--admission-timeout", "0.5"]
    with LaunchedServer(args) as second:
        answer = second.client.evaluate(problem_code, candidate_code())
        assert answer["cached"] and answer["status"] == "ok"
        assert second.client.metrics()["counts"].get("evaluations", 0) == 0
        # One evaluation running, one waiting: a third distinct submission finds the queue full.
        client = ServeClient(second.url, retries=0)
        with ThreadPoolExecutor(2) as pool:
            for i in range(2):
                pool.submit(client.evaluate, problem_code, candidate_code(init_extra=f"time.sleep({3 + i})"))
                time.sleep(0.5)
            with pytest.raises(ServeError) as info:
                client.evaluate(problem_code, candidate_code(init_extra="time.sleep(5)"))
            assert info.value.status == 429
            second.process.kill()  # no need to wait for the two sleepers
