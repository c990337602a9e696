"""Where evaluations run: a local thread pool, or Ray actors across machines.

Both run the one evaluator, ``hercules.harness.evaluate.evaluate``, which already isolates the
candidate in worker subprocesses. What this module adds is placement and resilience:

* **Placement.** One lock per GPU guards the timed part of an evaluation (``evaluate(gpu_lock=)``),
  so measurements never share a device, while builds and worker start-up of other evaluations
  overlap with them. Each evaluation goes to the least busy device when it starts.
* **Resilience.** An evaluation whose infrastructure died under it (a worker process killed from
  outside, a Ray actor lost with its node) is run again, up to ``retries`` times. A candidate that
  crashes by itself (segfault, ``os._exit``, illegal memory access) is *not* an infrastructure
  failure: its ``crash`` verdict is the answer. After the last retry the future carries the last
  verdict (status ``crash``) or raises ``EvaluationLost``.

``make_executor()`` picks the backend: Ray when given an address ("local" starts a private local
instance), threads otherwise. Ray is an optional extra and imported only then.
"""

from __future__ import annotations

import abc
import os
import socket
import sys
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import torch

from hercules import interrupt
from hercules.harness.device_lock import DeviceLock
from hercules.harness.evaluate import EvalOptions, evaluate
from hercules.harness.ipc import package_pythonpath
from hercules.harness.records import Cause, Verdict
from hercules.problems.model import Candidate, Problem

DEFAULT_RETRIES = 2
T = TypeVar("T")


class EvaluationLost(RuntimeError):
    """The evaluation could not be completed: its worker or actor kept dying."""


@dataclass(frozen=True)
class Tracked:
    """A verdict and how many attempts it took (more than one: infrastructure failed under it)."""

    verdict: Verdict
    attempts: int
    # Why each earlier attempt was run again (its verdict's cause and error, or the exception it
    # raised): a retried evaluation says what failed under it.
    retried: tuple[str, ...] = ()


def infrastructure_failure(verdict: Verdict) -> bool:
    """True when the verdict says the machine failed under the evaluation: a worker killed from
    outside rather than by its candidate, or the device refused to the trusted side."""
    return verdict.cause in (Cause.EXTERNAL_KILL, Cause.DEVICE_UNAVAILABLE)


class EvalExecutor(abc.ABC):
    """Submit evaluations, get ``concurrent.futures.Future`` objects back."""

    def __init__(self, retries: int):
        self.retries = max(0, retries)
        self._closed = False

    # ---- backend -------------------------------------------------------------------------
    @abc.abstractmethod
    def _attempt(self, problem: Problem, candidate: Candidate, options: EvalOptions) -> Future:
        """One try; the future resolves to a Verdict or raises when the infrastructure failed."""

    @property
    @abc.abstractmethod
    def capacity(self) -> int:
        """How many evaluations run at the same time (callers size their queues with it)."""

    @property
    @abc.abstractmethod
    def devices(self) -> list[str]:
        """One entry per evaluation slot with its own lock (``cpu``, ``cuda:0``, ``ray:cuda``...)."""

    def _shutdown(self) -> None:
        """Release the backend (threads, actors)."""

    def placements(self) -> list[str]:
        """Where each slot runs, one line each (a run says it so that a user can check that every
        GPU got its own): the device name, for local threads."""
        return list(self.devices)

    @abc.abstractmethod
    def run_on_device(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(device, *args)`` where evaluations run (a Ray actor's process on a cluster), holding
        that device's measurement lock: for facts about the evaluating hardware, such as its
        measured ceilings, which the submitting process may not have (a CPU-only Ray driver).
        ``fn`` must be importable there (a module-level function)."""

    # ---- public --------------------------------------------------------------------------
    def submit(self, problem: Problem, candidate: Candidate, options: EvalOptions | None = None) -> Future:
        """Future[Verdict]; see ``submit_tracked`` for the number of attempts as well."""
        verdict: Future = Future()
        verdict.set_running_or_notify_cancel()

        def copy(tracked: Future) -> None:
            exc = _exception(tracked)
            if exc is not None:
                verdict.set_exception(exc)
            else:
                verdict.set_result(tracked.result().verdict)

        self.submit_tracked(problem, candidate, options).add_done_callback(copy)
        return verdict

    def submit_tracked(self, problem: Problem, candidate: Candidate, options: EvalOptions | None = None) -> Future:
        """Future[Tracked]: the verdict after at most ``1 + retries`` attempts."""
        options = options or EvalOptions()
        if self._closed:
            raise RuntimeError("executor is closed")
        result: Future = Future()
        result.set_running_or_notify_cancel()

        retried: list[str] = []

        def launch(attempt: int) -> None:
            try:
                future = self._attempt(problem, candidate, options)
            except Exception as exc:
                if attempt == 1:  # bad options: the caller's mistake, raised at once
                    raise
                # shut down meanwhile, or the backend refused the task
                result.set_exception(EvaluationLost(f"evaluation not started (attempt {attempt}): {exc}"))
                return
            future.add_done_callback(lambda f: settle(f, attempt))

        def settle(future: Future, attempt: int) -> None:
            exc = _exception(future)
            verdict = future.result() if exc is None else None
            if verdict is not None and not infrastructure_failure(verdict):
                result.set_result(Tracked(verdict, attempt, tuple(retried)))
            elif attempt <= self.retries and not self._closed and not interrupt.STOP.is_set():
                # (a stopping run killed the worker or actor itself: nothing to run again)
                retried.append(f"{verdict.cause.value}: {(verdict.error or '')[:300]}" if verdict is not None
                               else f"raised {exc!r}"[:300])
                launch(attempt + 1)
            elif verdict is not None:
                result.set_result(Tracked(verdict, attempt, tuple(retried)))
            else:
                result.set_exception(EvaluationLost(f"evaluation failed {attempt} times; last: {exc!r}"))

        launch(1)
        return result

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._shutdown()

    def abandon(self) -> None:
        """A stopping run's close: the evaluations in flight end now and nothing waits for the
        backend to wind down (the process leaves right after). A cluster's actors are killed: they
        may run on other machines, out of reach of this process's stop."""
        if not self._closed:
            self._closed = True
            self._abandon()

    def _abandon(self) -> None:
        """Local threads: their workers are this process's children, which the stop kills."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _exception(future: Future) -> BaseException | None:
    try:
        return future.exception()
    except CancelledError as exc:
        return exc


# ---- local threads ---------------------------------------------------------------------------
@dataclass
class _Slot:
    device: str
    lock: DeviceLock
    busy: int = 0


class LocalExecutor(EvalExecutor):
    """Threads calling ``evaluate``; one lock per device, the least busy device per evaluation.

    ``workers`` evaluations run at once (default: two per GPU, two on the CPU), so one builds or
    starts its workers while another holds the device's lock and measures.
    """

    def __init__(self, device: str = "auto", workers: int | None = None, retries: int = DEFAULT_RETRIES):
        super().__init__(retries)
        self._kind, names = _local_devices(device)
        self._slots = [_Slot(name, DeviceLock()) for name in names]
        self._pick = threading.Lock()
        self._workers = workers or 2 * len(self._slots)
        if self._workers < 1:
            raise ValueError(f"workers must be at least 1 (got {self._workers})")
        self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="hercules-eval")

    @property
    def capacity(self) -> int:
        return self._workers

    @property
    def devices(self) -> list[str]:
        return [s.device for s in self._slots]

    def _attempt(self, problem: Problem, candidate: Candidate, options: EvalOptions) -> Future:
        pinned = _pinned_device(options.device, self._kind)
        return self._pool.submit(self._run, problem, candidate, options, pinned)

    def _run(self, problem: Problem, candidate: Candidate, options: EvalOptions, pinned: str | None) -> Verdict:
        with self._pick:  # chosen when it starts, not when it was queued: load is known then
            slot = next((s for s in self._slots if s.device == pinned), None) if pinned else None
            slot = slot or min(self._slots, key=lambda s: s.busy)
            slot.busy += 1
        try:
            return evaluate(problem, candidate, replace(options, device=slot.device), gpu_lock=slot.lock)
        finally:
            with self._pick:
                slot.busy -= 1

    def run_on_device(self, fn: Callable[..., T], *args: Any) -> T:
        slot = self._slots[0]
        with slot.lock:
            return fn(slot.device, *args)

    def _shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _local_devices(device: str) -> tuple[str, list[str]]:
    """("cpu", ["cpu"]) or ("cuda", ["cuda:0", ...]) for the executor's ``device`` argument."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return "cpu", ["cpu"]
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r}: no CUDA device is present")
        if ":" in device:
            return "cuda", [device]
        return "cuda", [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    raise ValueError(f"device must be auto, cpu, cuda or cuda:N (got {device!r})")


def _pinned_device(requested: str, kind: str) -> str | None:
    """The slot an evaluation's own options insist on (``cuda:1``), or None for any slot."""
    if requested in ("auto", kind):
        return None
    if requested.split(":")[0] != kind:
        raise ValueError(f"evaluation asks for device {requested!r} but this executor runs on {kind}")
    return requested


# ---- Ray -------------------------------------------------------------------------------------
def _import_ray():
    try:
        import ray
    except ImportError:
        raise RuntimeError("Ray is not installed: pip install 'hercules[ray]' (or leave out the Ray address "
                           "to evaluate with local threads)") from None
    return ray


class _EvalActor:
    """One per GPU (or per CPU slot): evaluates with a lock of its own around the timed part.

    Runs ``max_concurrency`` evaluations as threads, so a build overlaps the other's timing."""

    def __init__(self, device: str):
        self.device = device
        self.lock = DeviceLock()
        # Two evaluations share this interpreter: a thread reading the parent's clock when a reply
        # arrives waits for the interpreter lock up to the switch interval (5 ms by default); 1 ms
        # keeps that small against a burst's 60 ms (as ``hercules bench`` does for its threads).
        sys.setswitchinterval(min(sys.getswitchinterval(), 0.001))

    def evaluate(self, problem: Problem, candidate: Candidate, options: EvalOptions) -> Verdict:
        return evaluate(problem, candidate, replace(options, device=self.device), gpu_lock=self.lock)

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        with self.lock:
            return fn(self.device, *args)

    def pid(self) -> int:
        return os.getpid()

    def placement(self) -> str:
        """Host, process and the GPU Ray gave this actor (its CUDA_VISIBLE_DEVICES)."""
        gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "") if self.device == "cuda" else ""
        return f"{self.device} on {socket.gethostname()} pid {os.getpid()}" + (f" GPU {gpu}" if gpu else "")


RAY_CONNECT_S = 5.0


def _check_reachable(address: str) -> None:
    """A cluster address (``host:port`` or ``ray://host:port``) whose host does not resolve or whose
    port does not accept a connection: ValueError at once, with the reason. Ray itself retries such
    an address for minutes before giving up (``serve --ray-address nohost:1`` waited over 40 s with
    nothing said). ``auto`` and other forms go to Ray as they are."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        with socket.create_connection((host, int(port)), timeout=RAY_CONNECT_S):
            pass
    except OSError as exc:
        raise ValueError(f"cannot reach the Ray cluster at {host}:{port} ({exc.strerror or exc})") from None


class RayExecutor(EvalExecutor):
    """One evaluation actor per GPU across the cluster (``num_gpus=1``), or ``workers`` CPU actors.

    An actor that dies (its process killed, its node lost) is restarted by Ray; the evaluations it
    held fail with an actor error and are resubmitted by ``submit_tracked`` to the least busy actor.
    """

    def __init__(self, address: str, device: str = "auto", workers: int | None = None,
                 retries: int = DEFAULT_RETRIES, per_actor: int = 2):
        super().__init__(retries)
        ray = self._ray = _import_ray()
        self._owns_ray = False
        if not ray.is_initialized():
            if address == "local":
                # A private instance: no dashboard, quiet workers, as many CPUs as actors need.
                ray.init(num_cpus=max(workers or 2, 2), include_dashboard=False, log_to_driver=False,
                         runtime_env={"env_vars": _package_env()})
            else:
                _check_reachable(address)
                ray.init(address=address, log_to_driver=False, runtime_env={"env_vars": _package_env()})
            self._owns_ray = True
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if device == "auto":
            device = "cuda" if gpus else "cpu"
        if device == "cuda" and not gpus:
            raise ValueError("device 'cuda': the Ray cluster has no GPU")
        if device not in ("cpu", "cuda"):
            raise ValueError(f"with Ray, device must be auto, cpu or cuda (got {device!r})")
        self._kind = device
        if device == "cuda":
            # Ray sets CUDA_VISIBLE_DEVICES per actor, so each sees its own GPU as cuda:0.
            count, resources = gpus, {"num_gpus": 1}
        else:
            count, resources = workers or 2, {"num_cpus": 1}
        remote = ray.remote(max_restarts=-1, max_task_retries=0, max_concurrency=per_actor, **resources)
        actor_class = remote(_EvalActor)
        self._actors = [actor_class.remote(device) for _ in range(count)]
        self._busy = [0] * count
        self._down: set[int] = set()
        self._per_actor = per_actor
        self._pick = threading.Lock()

    @property
    def capacity(self) -> int:
        return len(self._actors) * self._per_actor

    @property
    def devices(self) -> list[str]:
        return [f"ray:{self._kind}"] * len(self._actors)

    def run_on_device(self, fn: Callable[..., T], *args: Any) -> T:
        return self._ray.get(self._actors[0].run.remote(fn, *args))

    def placements(self) -> list[str]:
        return self._ray.get([a.placement.remote() for a in self._actors])

    def actor_pids(self) -> list[int]:
        """Process ids of the actors (tests and the load test kill one to exercise retries)."""
        return self._ray.get([a.pid.remote() for a in self._actors])

    def _attempt(self, problem: Problem, candidate: Candidate, options: EvalOptions) -> Future:
        if _pinned_device(options.device, self._kind) not in (None, self._kind):
            raise ValueError("with Ray, evaluations cannot ask for one particular GPU")
        with self._pick:
            # An actor that just failed is restarting: calls sent to it now fail too.
            usable = [i for i in range(len(self._actors)) if i not in self._down] or range(len(self._actors))
            index = min(usable, key=self._busy.__getitem__)
            self._busy[index] += 1
        future = self._actors[index].evaluate.remote(problem, candidate, options).future()

        def release(done: Future) -> None:
            with self._pick:
                self._busy[index] -= 1
                failed = _exception(done) is not None and index not in self._down
                if failed:
                    self._down.add(index)
            if failed:  # usable again once it answers (restarted), or Ray gives up on it
                self._actors[index].pid.remote().future().add_done_callback(lambda _: self._down.discard(index))

        future.add_done_callback(release)
        return future

    def _shutdown(self) -> None:
        self._abandon()
        if self._owns_ray:
            self._ray.shutdown()

    def _abandon(self) -> None:
        # Without ray.shutdown: a private local instance's processes died with the stop's kill of
        # this process's children, and shutting it down then waits ~5 s for them.
        for actor in self._actors:
            self._ray.kill(actor, no_restart=True)


def _package_env() -> dict[str, str]:
    """Ray workers must import this very package, wherever the driver found it."""
    return {"PYTHONPATH": package_pythonpath(os.environ.get("PYTHONPATH", ""))}


def make_executor(*, ray_address: str | None = None, device: str = "auto", workers: int | None = None,
                  retries: int = DEFAULT_RETRIES) -> EvalExecutor:
    """Ray actors when ``ray_address`` is given ("local" starts a local instance), threads otherwise."""
    if ray_address:
        return RayExecutor(ray_address, device=device, workers=workers, retries=retries)
    return LocalExecutor(device=device, workers=workers, retries=retries)


def evaluation_worker_pids(root: int | None = None) -> list[tuple[int, str]]:
    """(pid, role) of the evaluation worker processes below ``root`` (this process by default).

    Linux only (reads /proc). Tests and the load test kill one mid-request to check retries."""
    root = root or os.getpid()
    children: dict[int, list[int]] = {}
    commands: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        argv = commands.get(pid, [])
        if "hercules.harness.worker" in argv:
            found.append((pid, argv[argv.index("hercules.harness.worker") + 1]))
    return found
