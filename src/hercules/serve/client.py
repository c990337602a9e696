"""A small client for ``hercules serve`` on the standard library only (trainer machines vary).

Retries what is worth retrying (connection refused or reset, 429 queue full, 503 evaluation lost)
with exponential back-off, a bounded number of times; a 400 is raised at once.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.request
from typing import Any

RETRY_STATUSES = {429, 502, 503, 504}


class ServeError(RuntimeError):
    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class ServeClient:
    def __init__(self, url: str, timeout_s: float = 3600.0, retries: int = 4, backoff_s: float = 1.0):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s

    def evaluate(self, problem: Any, candidate: str | None = None, *, completion: str | None = None,
                 options: dict[str, Any] | None = None, reward: dict[str, Any] | None = None) -> dict[str, Any]:
        item = submission_item(problem, candidate, completion, options, reward)
        return self._call("POST", "/v1/evaluate", item, accept={503})

    def batch(self, items: list[dict[str, Any]], **defaults: Any) -> list[dict[str, Any]]:
        """Answers in the order of ``items`` (each a dict as ``evaluate`` would send)."""
        return self._call("POST", "/v1/evaluate/batch", {"items": items, **defaults})["results"]

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/health")

    def metrics(self) -> dict[str, Any]:
        return self._call("GET", "/metrics")

    def _call(self, method: str, path: str, payload: Any = None, accept: set[int] = frozenset()) -> dict[str, Any]:
        data = json.dumps(payload).encode() if payload is not None else None
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            request = urllib.request.Request(self.url + path, data=data, method=method,
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                body = _json_or_text(exc.read())
                if exc.code in accept and attempt == self.retries:
                    return body
                if exc.code not in RETRY_STATUSES:
                    raise ServeError(f"{method} {path}: HTTP {exc.code}: {body.get('error', body)}", exc.code) from None
                last = ServeError(f"{method} {path}: HTTP {exc.code}: {body.get('error', body)}", exc.code)
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                last = ServeError(f"{method} {path}: {exc}")
        raise last or ServeError(f"{method} {path}: failed")


def submission_item(problem: Any, candidate: str | None, completion: str | None, options: dict[str, Any] | None,
                    reward: dict[str, Any] | None) -> dict[str, Any]:
    item: dict[str, Any] = {"problem": problem}
    if candidate is not None:
        item["candidate"] = candidate
    if completion is not None:
        item["completion"] = completion
    if options:
        item["options"] = options
    if reward:
        item["reward"] = reward
    return item


def _json_or_text(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
        return value if isinstance(value, dict) else {"error": str(value)}
    except ValueError:
        return {"error": raw.decode(errors="replace")[:300]}


class LaunchedServer:
    """``hercules serve`` in a child process on loopback (tests and the load test).

    Started with ``python -m hercules.cli serve ARGS --port PORT``; ready once /health answers.
    ``stop()`` sends SIGTERM (a graceful shutdown) and kills it if it lingers."""

    def __init__(self, args: list[str], port: int | None = None, timeout_s: float = 60.0,
                 log_path: str | None = None, own_group: bool = False):
        import socket
        import subprocess
        import sys

        if port is None:
            with socket.socket() as probe:  # a free port; the tiny race with other programs is acceptable
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        command = [sys.executable, "-m", "hercules.cli", "serve", *args, "--port", str(port)]
        with open(log_path, "ab") if log_path else contextlib.nullcontext(subprocess.DEVNULL) as log:
            # own_group: in a process group of its own, to be signalled as a terminal's Ctrl-C does
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=own_group)
        self.client = ServeClient(self.url, retries=0)
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise ServeError(f"hercules serve exited with status {self.process.returncode} before it was ready")
            try:
                self.client.health()
                return
            except ServeError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise ServeError(f"hercules serve not ready within {timeout_s:.0f} s") from None
                time.sleep(0.2)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout_s: float = 30.0) -> None:
        import subprocess

        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
