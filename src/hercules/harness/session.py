"""The parent's side of an evaluation's two workers: one typed request in, one reply out, and
every way a request can fail turned into an ``Abort`` carrying a status and a cause
(``classify``). Nothing here decides how anything is measured or judged."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hercules.harness import requests
from hercules.harness.classify import Ending, WorkerEvent, classify
from hercules.harness.decide import Failure
from hercules.harness.ipc import Worker, WorkerDied, WorkerTimeout
from hercules.harness.protocol import ProtocolError, Reply
from hercules.harness.records import Cause, Status

HARNESS_TRACEBACK = "harness_error.txt"
# An honest candidate's process holds up to about this many copies of one input set and its
# outputs at its peak (trial and timing sets, a fresh pass's sets, what it copies out of packs and
# writes into them): on KernelBench 98_KLDivLoss on the CPU (2 GB inputs) the honest reference,
# run as a candidate, reached 12.7 GB. A sandbox that breaks its host memory bound on a problem
# that needs this many copies of a set, or more, is the problem's size, not the candidate's doing:
# out_of_memory with the sizes, not a sandbox refusal.
HONEST_SET_COPIES = 6

R = TypeVar("R", bound=Reply)


class Abort(Exception):
    """Ends an evaluation early with a status and its cause."""

    def __init__(self, status: Status, error: str, cause: Cause, role: str = ""):
        super().__init__(error)
        self.failure = Failure(status, cause, error, role)


def abort_for(event: WorkerEvent, error: str) -> Abort:
    """The classified status and cause of ``event`` around ``error``."""
    status, cause = classify(event)
    return Abort(status, error, cause, event.role)


def close_fds(fds: Iterable[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


@dataclass(frozen=True)
class Sizes:
    """The problem's sizes, known once the reference made its first input set: for messages that
    say a problem does not fit (they are not used to decide anything here)."""

    input_bytes: int = 0
    input_shapes: tuple[str, ...] = ()
    output_bytes: int = 0
    param_bytes: int = 0

    def shapes_text(self, label: str = "") -> str:
        return f" ({label}{', '.join(self.input_shapes)})" if self.input_shapes else ""


@dataclass
class Session:
    workers: dict[str, Worker]
    workdir: Path
    run_timeout_s: float
    sizes: Sizes = field(default_factory=Sizes)

    def call(self, role: str, request: requests.Request, timeout: float, what: str, fds: tuple[int, ...] = (),
             idle_s: float | None = None) -> dict[str, Any]:
        """One request; every way it can fail becomes an Abort carrying a status and a cause."""
        self.send(role, request, what, fds)
        return self.receive(role, request.op, timeout, what, idle_s)

    def candidate(self, record: type[R], request: requests.Request, timeout: float, what: str,
                  fds: tuple[int, ...] = (), idle_s: float | None = None) -> tuple[R, list[int]]:
        """A request to the candidate; its reply parsed into ``record`` (a forged shape is PROTOCOL)."""
        raw = self.call("candidate", request, timeout, what, fds, idle_s)
        try:
            return record.parse(raw), raw.get("_fds") or []
        except ProtocolError as exc:
            close_fds(raw.get("_fds") or [])
            self.workers["candidate"].kill()
            raise abort_for(WorkerEvent("candidate", request.op, Ending.UNREADABLE),
                            f"{what}: unreadable reply: {exc}") from None

    def send(self, role: str, request: requests.Request, what: str, fds: tuple[int, ...] = ()) -> None:
        worker = self.workers[role]
        try:
            worker.send(request.op, fds=fds, **{k: v for k, v in request.message().items() if k != "op"})
        except WorkerDied as exc:
            raise self._death(worker, role, what, exc) from None

    def receive(self, role: str, op: str, timeout: float, what: str, idle_s: float | None = None) -> dict[str, Any]:
        worker = self.workers[role]
        try:
            reply = worker.receive(op, timeout, idle_s=idle_s)
        except WorkerTimeout as exc:
            raise abort_for(WorkerEvent(role, op, Ending.TIMEOUT), f"{what}: {exc}") from None
        except WorkerDied as exc:
            raise self._death(worker, role, what, exc) from None
        except (ProtocolError, ValueError) as exc:  # a reply that cannot be read (forged, truncated)
            worker.kill()
            raise abort_for(WorkerEvent(role, op, Ending.UNREADABLE), f"{what}: unreadable reply: {exc}") from None
        if not isinstance(reply, dict):
            worker.kill()
            raise abort_for(WorkerEvent(role, op, Ending.UNREADABLE), f"{what}: reply is not a message")
        if not reply.get("ok"):
            error = str(reply.get("error"))[:2000]
            event = WorkerEvent(role, op, Ending.REFUSED, kind=str(reply.get("kind") or ""), error=error)
            status, cause = classify(event)
            if cause is Cause.HARNESS:
                raise self.harness_fault(f"{what}: {error}", str(reply.get("traceback") or ""), role)
            if cause is Cause.OUT_OF_MEMORY:
                error = f"out of memory{self.sizes.shapes_text('inputs: ')}: {error}"
            elif cause is Cause.PROTOCOL:
                error = f"the candidate's pack was refused: {error}"
            raise Abort(status, f"{what}: {error}", cause, role)
        return reply

    def alive(self, role: str) -> bool:
        worker = self.workers.get(role)
        return worker is not None and worker.process.poll() is None

    def end_candidate(self) -> None:
        worker = self.workers["candidate"]
        worker.close()  # ends the whole sandbox, however its processes detached
        box = worker.sandbox
        if box is not None and box.alive():
            raise abort_for(WorkerEvent("candidate", "end", Ending.OUTLIVED),
                            "processes of the candidate survived the end of its sandbox")

    def harness_fault(self, error: str, trace: str, where: str) -> Abort:
        """Hercules' own code failed: the verdict says so (never the candidate's status) and the
        traceback is kept in the run folder for whoever fixes it."""
        path = self.workdir / HARNESS_TRACEBACK
        with contextlib.suppress(OSError), path.open("a") as out:
            out.write(f"--- {where}: {error}\n{trace}\n")
        return abort_for(WorkerEvent(where, "", Ending.REFUSED, kind="harness"),
                         f"harness error in the {where} process: {error} "
                         f"(traceback: {HARNESS_TRACEBACK} in the run folder)")

    def ledger(self) -> dict[str, dict[str, float]]:
        """Per worker request: count, seconds from send to answer, seconds inside the handler."""
        return {f"{role}.{op}": {"count": int(n), "seconds": round(total, 3), "inside": round(inside, 3)}
                for role, worker in self.workers.items() for op, (n, total, inside) in worker.ledger.items()}

    def _death(self, worker: Worker, role: str, what: str, exc: WorkerDied) -> Abort:
        tail = worker.log_tail(1500).strip().splitlines()[-5:]
        detail = f"{what}: {exc}" + (f" ({' | '.join(tail)})" if tail else "")
        too_big = self._too_big_for_the_sandbox(worker) if exc.breach and role == "candidate" else None
        status, cause = classify(WorkerEvent(role, "", Ending.DIED, breach=bool(exc.breach), too_big=bool(too_big),
                                             external=bool(exc.external)))
        return Abort(status, f"{what}: out of memory: {too_big}" if too_big else detail, cause)

    def _too_big_for_the_sandbox(self, worker: Worker) -> str | None:
        """Why the problem itself does not fit the host memory bound the candidate's sandbox broke,
        with its sizes; None when it should have fitted (then the breach is the candidate's)."""
        box = worker.sandbox
        sizes = self.sizes
        if box is None or getattr(box, "breach_bound", None) != "memory" or not sizes.input_bytes:
            return None
        need = HONEST_SET_COPIES * (sizes.input_bytes + sizes.output_bytes) + sizes.param_bytes
        bound = box.limits.memory_bytes
        if need < bound:
            return None
        return (f"one input set takes {sizes.input_bytes / 1e9:.2f} GB{sizes.shapes_text()}, one call's outputs "
                f"{sizes.output_bytes / 1e9:.2f} GB and the weights {sizes.param_bytes / 1e9:.2f} GB; an evaluation "
                f"holds about {HONEST_SET_COPIES} sets and their outputs in the candidate's process "
                f"({need / 1e9:.1f} GB), over its sandbox's {bound / 1e9:.1f} GB host memory bound "
                "(HERCULES_SANDBOX_MEMORY_GB sets it)")


@dataclass(frozen=True)
class Deadlines:
    """Deadlines derived from the reference's own cost: a request making ``calls`` calls gets the
    base plus ``factor`` times the reference's call for each, capped at the run's limit."""

    run_timeout_s: float
    ref_call_s: float
    base_s: float
    factor: float

    def call_s(self, calls: int = 1, per_call_s: float | None = None) -> float:
        per_call = max(self.ref_call_s or 0.0, per_call_s or 0.0)
        return min(self.run_timeout_s, self.base_s + self.factor * per_call * max(calls, 1))


@dataclass(frozen=True)
class Trials:
    """What the trials established for the stages after them."""

    seeds: tuple[int, ...]  # each trial's input seed, in order
    specs: list[dict[str, Any]]  # the reference's outputs: shape and dtype name each
    deadlines: Deadlines
    signature: str  # a digest of the inputs' shapes and dtypes
