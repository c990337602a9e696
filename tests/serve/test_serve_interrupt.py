"""Stopping ``hercules serve`` as a terminal's Ctrl-C does, and the errors every route answers in
JSON: a real server process, real HTTP, real SQLite."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from serve_helpers import SERVE_ARGS, candidate_code

from hercules.executor import evaluation_worker_pids
from hercules.serve.client import LaunchedServer, ServeError


def _cached(path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])


def test_sigint_to_the_group_stops_serve_in_seconds_and_caches_nothing_in_flight(tmp_path, problem_code):
    cache = tmp_path / "verdicts.sqlite"
    code = candidate_code(init_extra="time.sleep(3)")  # in flight when the signal comes
    server = LaunchedServer([*SERVE_ARGS, "--cache", str(cache)], log_path=str(tmp_path / "serve.log"),
                            own_group=True)
    try:
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(server.client.evaluate, problem_code, code)
            deadline = time.monotonic() + 120
            while not any(role == "candidate" for _pid, role in evaluation_worker_pids(server.pid)):
                assert time.monotonic() < deadline, "no candidate worker appeared"
                time.sleep(0.05)
            sent = time.monotonic()
            os.killpg(server.pid, signal.SIGINT)
            code_ = server.process.wait(timeout=60)
            took = time.monotonic() - sent
            try:  # the request in flight is answered as lost or cut off: never with a verdict
                answer = pending.result(timeout=30)
                assert answer["status"] == "error" and answer["verdict"] is None, answer
            except ServeError:
                pass
    finally:
        server.stop()
    log = (tmp_path / "serve.log").read_text()
    assert code_ == 130, log[-3000:]
    assert took < 20, f"{took:.1f} s from SIGINT to exit"
    print(f"stopped {took:.1f} s after the signal")
    assert "stopped by SIGINT" in log
    assert _cached(cache) == 0

    with LaunchedServer([*SERVE_ARGS, "--cache", str(cache)]) as again:
        answer = again.client.evaluate(problem_code, code)
    assert answer["status"] == "ok" and not answer["cached"]


def _post(url: str, data: bytes, path: str = "/v1/evaluate", method: str = "POST") -> tuple[int, dict]:
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())  # raises if the body is not JSON
    except (ConnectionError, urllib.error.URLError) as exc:
        pytest.fail(f"no answer: {exc}")


@pytest.mark.parametrize("path, method, body, status, message", [
    ("/v1/evaluate", "POST", b"x" * (70 << 20), 413, "over 64 MB"),
    ("/v1/evaluate", "POST", b"{not json", 400, "must be a JSON object"),
    ("/v1/evaluate", "POST", b"[1, 2]", 400, "must be a JSON object"),
    ("/v1/evaluate", "POST", json.dumps({"candidate": "x"}).encode(), 400, "missing field 'problem'"),
    ("/v1/evaluate", "POST", json.dumps({"problem": "mish_fp32"}).encode(), 400, "missing field 'candidate'"),
    ("/v1/evaluate/batch", "POST", json.dumps({"items": []}).encode(), 400, "'items' must be"),
    ("/v1/evaluate/batch", "POST", json.dumps({"items": [{"problem": "mish_fp32"}]}).encode(), 400,
     "items[0]: missing field 'candidate'"),
    ("/v1/nothing", "POST", b"{}", 404, "Not Found"),
    ("/v1/evaluate", "GET", None, 405, "Method Not Allowed"),
])
def test_every_route_answers_errors_in_one_json_line(server, path, method, body, status, message):
    code, answer = _post(server.url, body, path, method)
    assert code == status and set(answer) == {"error"}, answer
    assert message in answer["error"] and "\n" not in answer["error"]
