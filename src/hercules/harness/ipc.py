"""Worker processes and the channel the parent talks to them through.

Messages are dicts of plain values (codec.py: JSON, or ``torch.save`` read back with
``weights_only=True`` where they hold tuples or CPU tensors): a hostile worker can send wrong
numbers, but it cannot make the parent execute code. The worker's stdout and stderr go to a log
file, so a candidate that prints can never reach the parent's output.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from collections.abc import Sequence
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from typing import Any

from hercules.harness import zygote
from hercules.harness.codec import decode, encode
from hercules.harness.datapath import receive_fds, send_fds


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
    """The worker exited (crash, ``os._exit``, fatal signal) before answering, or its sandbox
    ended it for exceeding a limit (``breach``)."""

    def __init__(self, message: str, returncode: int | None, breach: str | None = None):
        super().__init__(message)
        self.returncode = returncode
        self.breach = breach

    @property
    def external(self) -> bool:
        """Killed from outside (an operator, the OOM killer): SIGKILL or SIGTERM it did not get from us."""
        return self.breach is None and self.returncode is not None and exit_signal(self.returncode) in (
            signal.SIGKILL, signal.SIGTERM)


class WorkerTimeout(Exception):
    """The worker did not answer within the deadline; it has been killed."""


def exit_signal(returncode: int) -> int | None:
    """The signal that ended a process: negative return codes from Popen, 128 + N from a wrapper
    (bubblewrap reports its child's fatal signal that way)."""
    if returncode < 0:
        return -returncode
    if 128 < returncode < 128 + 65:
        return returncode - 128
    return None


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "worker vanished"
    number = exit_signal(returncode)
    if number is not None:
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"worker killed by {name}"
    return f"worker exited with status {returncode}"


# What an untrusted worker inherits of the parent's environment: enough to find Python, CUDA and a
# compiler, nothing that names the run, its store, keys or tokens.
_SANDBOX_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "TERM", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES",
                     "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "LD_LIBRARY_PATH", "CC", "CXX",
                     "HERCULES_WORKER_THREADS", "TRITON_INTERPRET", "MAX_JOBS", "OMP_NUM_THREADS", "VIRTUAL_ENV")


# glibc's allocator as every worker uses it: blocks up to 32 MB (glibc's largest mapping
# threshold) come from the heap and freed ones are kept for the next allocation, never handed
# back. By default each allocation above 128 KB (a tensor of a few hundred KB) can be a fresh
# mapping whose pages fault in on first write, and freed memory at the heap's top goes back to the
# kernel. On the 2-core VM that churn was the timing: a burst keeping every call's 2 MB outputs
# read 0.6-3.6 ms per call with it and 0.1 ms without, where a burst freeing each output read
# 0.06-0.09 (an honest candidate was flagged result_cache by the passes that keep every output);
# a 16 MB elementwise burst 5.0 ms per call with it, 1.6 without. Larger blocks stay mappings,
# returned when freed: with every block on the heap (no mappings at all) a 64 MB burst read 6.9 ms
# instead of 21, but freed multi-GB blocks stayed resident: on KernelBench 98_KLDivLoss (2 GB
# inputs) the kernel's OOM killer ended the reference worker (external_kill), where with blocks
# this large mapped the candidate's sandbox bound ends it first (sandbox_refusal), as by default.
HOST_ALLOCATOR_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 46)}

# GNU OpenMP (torch's intra-op pool) as every worker runs it: after each parallel region its idle
# threads spin before they sleep, by default 300,000 rounds, ~13 ms of one core here. The workers
# take turns on the 2-core VM, so the reference's spin after a comparison ran into the candidate's
# next burst, and its own float64 work never had the candidate's in its way: the same 4 x 384^2
# matmul+tanh burst read 6-16% slower right after the other process's float64 product (16 of 16
# runs; 3.5-4.4 ms per call alone), and honest code came out 0.68-0.94x eager (median 0.91, 4
# clean evaluations). At 30,000 (2-4 ms of spin) that was -12..+11% (median -1%), the burst alone
# as fast (3.7-4.2 ms), honest code 0.96-1.05x. Set for both workers alike: the sandbox passes no
# OMP_WAIT_POLICY, so one from the parent's environment would reach the reference alone (an
# explicit GOMP_SPINCOUNT overrides it in libgomp).
WORKER_OPENMP_ENV = {"GOMP_SPINCOUNT": "30000"}


def _sandbox_env() -> dict[str, str]:
    return {k: os.environ[k] for k in _SANDBOX_ENV_KEYS if k in os.environ}


def package_pythonpath(existing: str = "") -> str:
    """A PYTHONPATH under which a child process imports this very package, wherever this process
    found it (an editable install, a source checkout, a copy on a remote machine)."""
    package_root = str(Path(__file__).resolve().parents[2])
    return os.pathsep.join(p for p in (package_root, existing) if p)


@dataclass
class Worker:
    """A child Python process running ``hercules.harness.worker`` with one duplex pipe."""

    process: subprocess.Popen | zygote.ForkedProcess
    conn: Connection
    log_path: Path
    sandbox: Any = None  # hercules.harness.sandbox.Sandbox for untrusted workers
    # op -> [requests, seconds from send to answer, seconds inside the worker's handler]: where an
    # evaluation's time goes, down to the request (the rest of a round trip is transfer and wait).
    ledger: dict[str, list[float]] = field(default_factory=dict)
    _sent: float = 0.0

    @classmethod
    def start(cls, role: str, log_path: Path, env: dict[str, str] | None = None, cwd: Path | None = None,
              sandbox: Any = None) -> "Worker":
        """Start a worker; with ``sandbox`` (untrusted code) it runs inside it, with the channel
        and its log file as its only descriptors."""
        parent_end, child_end = Pipe(duplex=True)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(log_path, "ab")
        full_env = dict(os.environ) if sandbox is None else _sandbox_env()
        full_env.update(HOST_ALLOCATOR_ENV)
        full_env.update(WORKER_OPENMP_ENV)
        full_env.update(env or {})
        # Inside the sandbox the parent's own import path still holds (packages installed with
        # --target, a checkout): the sandbox binds every sys.path folder read-only.
        full_env["PYTHONPATH"] = package_pythonpath(os.environ.get("PYTHONPATH", "") if sandbox is not None
                                                    else full_env.get("PYTHONPATH", ""))
        full_env.setdefault("PYTHONUNBUFFERED", "1")
        argv = [sys.executable, "-m", "hercules.harness.worker", role, str(child_end.fileno())]
        try:
            process = None
            if sandbox is None and role == "reference":  # the trusted worker forks from a zygote where one can serve
                process = zygote.spawn(role, child_end.fileno(), log.fileno(), full_env,
                                       str(cwd) if cwd else os.getcwd())
            if process is None and sandbox is not None:
                process = sandbox.popen(argv, env=full_env, pass_fds=[child_end.fileno()], stdout=log,
                                        stderr=subprocess.STDOUT, cwd=cwd)
            elif process is None:
                process = subprocess.Popen(
                    argv,
                    pass_fds=[child_end.fileno()],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=full_env,
                    cwd=str(cwd) if cwd else None,
                    start_new_session=True,  # so a kill takes any grandchildren with it
                )
        finally:
            child_end.close()
            log.close()
        return cls(process=process, conn=parent_end, log_path=log_path, sandbox=sandbox)

    def request(self, op: str, timeout: float, **fields: Any) -> dict[str, Any]:
        """Send one request and wait for its answer; raise WorkerDied / WorkerTimeout."""
        self.send(op, **fields)
        return self.receive(op, timeout)

    def send(self, op: str, fds: Sequence[int] = (), **fields: Any) -> None:
        """Send a request without waiting: the worker starts on it while the parent does other work
        (``receive`` collects the answer; one request in flight per worker). ``fds`` travel right
        behind the message (sealed packs, see datapath.py)."""
        # Stamped before the message leaves: the worker may start (and time) its handler before
        # this thread runs again, and its own seconds must never exceed the round trip's.
        self._sent = time.monotonic()
        try:
            self.conn.send_bytes(encode({"op": op, **fields, **({"fds": len(fds)} if fds else {})}))
            if fds:
                send_fds(self.conn.fileno(), fds)
        except (BrokenPipeError, OSError) as exc:
            raise self._died() from exc

    def _died(self) -> WorkerDied:
        returncode = self._wait_exit()
        breach = getattr(self.sandbox, "breach", None)
        if breach:
            return WorkerDied(f"sandbox limit: {breach}", returncode, breach=breach)
        return WorkerDied(describe_exit(returncode), returncode)

    def receive(self, op: str, timeout: float, idle_s: float | None = None) -> dict[str, Any]:
        """The answer to the request in flight, within ``timeout`` seconds from now.

        ``idle_s``: a shorter deadline that only a build in progress extends (a compiler running
        in the sandbox): a hung import is ended after ``idle_s``, a long nvcc build is not.
        The reply's descriptors, if it announces any, come back in ``reply["_fds"]``.
        """
        sent = self._sent
        started = time.monotonic()
        deadline = started + timeout
        idle_deadline = started + idle_s if idle_s is not None else deadline
        while True:
            now = time.monotonic()
            if idle_s is not None and self.sandbox is not None and self.sandbox.compilers_active():
                idle_deadline = now + idle_s
            remaining = min(deadline, idle_deadline) - now
            if remaining <= 0:
                self.kill()
                waited = now - started
                raise WorkerTimeout(f"no answer to '{op}' within {waited:.0f} s"
                                    + (" (no build in progress)" if idle_deadline < deadline else ""))
            try:
                if self.conn.poll(min(remaining, 0.25)):
                    reply = decode(self.conn.recv_bytes())
                    if reply.get("ok") and reply.get("fds"):
                        reply["_fds"] = receive_fds(self.conn.fileno(), int(reply["fds"]),
                                                    timeout=max(1.0, min(30.0, deadline - time.monotonic())))
                    entry = self.ledger.setdefault(op, [0, 0.0, 0.0])
                    entry[0] += 1
                    entry[1] += time.monotonic() - sent
                    entry[2] += float(reply.get("worker_seconds") or 0.0) if isinstance(
                        reply.get("worker_seconds"), (int, float)) else 0.0
                    return reply
            except (EOFError, OSError) as exc:
                raise self._died() from exc
            if getattr(self.sandbox, "breach", None):
                self.kill()
                raise WorkerDied(f"sandbox limit: {self.sandbox.breach}", self.process.returncode,
                                 breach=self.sandbox.breach)
            if self.process.poll() is not None and not self.conn.poll(0):
                raise self._died()

    def _wait_exit(self) -> int | None:
        try:
            return self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.process.returncode

    def kill(self) -> None:
        if self.sandbox is not None:
            self.sandbox.kill()  # every process inside, however it detached
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
