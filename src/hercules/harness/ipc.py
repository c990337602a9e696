"""Worker processes and the channel the parent talks to them through.

Messages are dicts of plain values and CPU tensors, serialised with ``torch.save`` and read back
with ``torch.load(weights_only=True)``: a hostile worker can send wrong numbers, but it cannot make
the parent execute code (no pickled classes are accepted). The worker's stdout and stderr go to a
log file, so a candidate that prints can never reach the parent's output.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from typing import Any

import torch


@contextlib.contextmanager
def private_dir(prefix: str) -> Iterator[Path]:
    """A fresh, empty working folder for an untrusted worker, removed afterwards: the candidate's
    file and working directory hold nothing of the problem, the run folder or other candidates."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class WorkerDied(Exception):
    """The worker exited (crash, ``os._exit``, fatal signal) before answering."""

    def __init__(self, message: str, returncode: int | None):
        super().__init__(message)
        self.returncode = returncode


class WorkerTimeout(Exception):
    """The worker did not answer within the deadline; it has been killed."""


def encode(message: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    torch.save(message, buffer)
    return buffer.getvalue()


def decode(payload: bytes) -> dict[str, Any]:
    return torch.load(io.BytesIO(payload), weights_only=True, map_location="cpu")


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "worker vanished"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"worker killed by {name}"
    return f"worker exited with status {returncode}"


def package_pythonpath(existing: str = "") -> str:
    """A PYTHONPATH under which a child process imports this very package, wherever this process
    found it (an editable install, a source checkout, a copy on a remote machine)."""
    package_root = str(Path(__file__).resolve().parents[2])
    return os.pathsep.join(p for p in (package_root, existing) if p)


@dataclass
class Worker:
    """A child Python process running ``hercules.harness.worker`` with one duplex pipe."""

    process: subprocess.Popen
    conn: Connection
    log_path: Path
    # op -> [requests, seconds from send to answer, seconds inside the worker's handler]: where an
    # evaluation's time goes, down to the request (the rest of a round trip is transfer and wait).
    ledger: dict[str, list[float]] = field(default_factory=dict)
    _sent: float = 0.0

    @classmethod
    def start(cls, role: str, log_path: Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> "Worker":
        parent_end, child_end = Pipe(duplex=True)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(log_path, "ab")
        full_env = dict(os.environ)
        full_env.update(env or {})
        full_env["PYTHONPATH"] = package_pythonpath(full_env.get("PYTHONPATH", ""))
        full_env.setdefault("PYTHONUNBUFFERED", "1")
        process = subprocess.Popen(
            [sys.executable, "-m", "hercules.harness.worker", role, str(child_end.fileno())],
            pass_fds=[child_end.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=str(cwd) if cwd else None,
            start_new_session=True,  # so a kill takes any grandchildren (nvcc, ninja) with it
        )
        child_end.close()
        log.close()
        return cls(process=process, conn=parent_end, log_path=log_path)

    def request(self, op: str, timeout: float, **fields: Any) -> dict[str, Any]:
        """Send one request and wait for its answer; raise WorkerDied / WorkerTimeout."""
        self.send(op, **fields)
        return self.receive(op, timeout)

    def send(self, op: str, **fields: Any) -> None:
        """Send a request without waiting: the worker starts on it while the parent does other work
        (``receive`` collects the answer; one request in flight per worker)."""
        try:
            self.conn.send_bytes(encode({"op": op, **fields}))
        except (BrokenPipeError, OSError) as exc:
            raise WorkerDied(describe_exit(self._wait_exit()), self.process.returncode) from exc
        self._sent = time.monotonic()

    def receive(self, op: str, timeout: float) -> dict[str, Any]:
        """The answer to the request in flight, within ``timeout`` seconds from now."""
        sent = self._sent
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise WorkerTimeout(f"no answer to '{op}' within {timeout:.0f} s")
            try:
                if self.conn.poll(min(remaining, 1.0)):
                    reply = decode(self.conn.recv_bytes())
                    entry = self.ledger.setdefault(op, [0, 0.0, 0.0])
                    entry[0] += 1
                    entry[1] += time.monotonic() - sent
                    entry[2] += float(reply.get("worker_seconds") or 0.0)
                    return reply
            except (EOFError, OSError) as exc:
                raise WorkerDied(describe_exit(self._wait_exit()), self.process.returncode) from exc
            if self.process.poll() is not None and not self.conn.poll(0):
                raise WorkerDied(describe_exit(self.process.returncode), self.process.returncode)

    def _wait_exit(self) -> int | None:
        try:
            return self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.process.returncode

    def kill(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.process.kill()
            self.process.wait()
        self.conn.close()

    def close(self) -> None:
        """Ask politely, then kill: a worker never outlives its evaluation."""
        if self.process.poll() is None:
            try:
                self.conn.send_bytes(encode({"op": "exit"}))
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def log_tail(self, chars: int = 4000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-chars:].decode(errors="replace")
