"""Why a worker request ended without an answer, as a status and a cause: one pure function.

Every way a request to a worker can fail (its reply refused the work, its process died, it did
not answer in time, its reply could not be read) arrives here as a ``WorkerEvent``; ``classify``
says what that means for the verdict. Callers (the evaluation, and through ``Verdict.cause`` the
executor's retries, ``serve`` and ``debug``) branch on the cause, never on error text. The error
text is read only for what the worker's own classification cannot know: an out-of-memory error
raised by torch.

Rules, in order:
- a reply refused for want of the device -> ``skipped`` / ``device_missing``;
- the reference's process refused the device by the driver (busy or unavailable) ->
  ``harness_error`` / ``device_unavailable``: the machine's state, retried by the executor; the
  candidate's process saying so is not believed (its code can raise any text), and stays its own;
- out of device memory -> ``crash`` for the candidate, ``runtime_error`` for the reference,
  ``harness_error`` where Hercules' own code asked for the memory; cause ``out_of_memory``;
- Hercules' own code raised (``harness``) -> ``harness_error`` / ``harness``: never the candidate's;
- the reference refused a pack the candidate wrote -> ``runtime_error`` / ``protocol`` (forged);
- the reference's own code raised -> ``runtime_error`` / ``reference``;
- the candidate raised: ``build_error`` while building or importing, else ``runtime_error``, cause
  ``candidate_error``; a fatal CUDA error (``crash``) -> ``crash`` / ``candidate_crash``;
- a process that died: over a sandbox bound -> ``crash`` / ``out_of_memory`` when the problem's own
  data does not fit that bound (``too_big``), else ``sandbox_refusal``; killed from outside ->
  ``external_kill``; otherwise ``crash`` / ``candidate_crash`` (reference: ``runtime_error`` /
  ``reference``);
- no answer in time -> ``timeout``; a reply that cannot be read -> ``runtime_error`` / ``protocol``;
  processes of the candidate alive after its sandbox ended -> ``crash`` / ``sandbox_refusal``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hercules.harness.records import Cause, Status

# torch's words for an allocation the device could not make.
OOM_MARKERS = ("OutOfMemoryError", "CUDA out of memory", "cudaErrorMemoryAllocation")
BUILD_OPS = frozenset({"build", "import"})


class Ending(str, enum.Enum):
    REFUSED = "refused"  # the worker answered that the request failed
    DIED = "died"  # its process ended
    TIMEOUT = "timeout"  # no answer within the bound
    UNREADABLE = "unreadable"  # an answer that is not a valid message (forged, truncated)
    OUTLIVED = "outlived"  # processes of the candidate survived the end of its sandbox


@dataclass(frozen=True)
class WorkerEvent:
    role: str  # "reference" or "candidate"
    op: str
    ending: Ending
    kind: str = ""  # the worker's own word for a refusal: error, crash, device_missing, device_unavailable,
    # harness, pack
    error: str = ""
    breach: bool = False  # died over a sandbox bound
    too_big: bool = False  # ... which the problem's own data exceeds
    external: bool = False  # killed from outside (SIGKILL/SIGTERM not its own doing)


def is_oom(error: str) -> bool:
    return any(marker in error for marker in OOM_MARKERS)


def classify(event: WorkerEvent) -> tuple[Status, Cause]:
    candidate = event.role == "candidate"
    if event.ending is Ending.TIMEOUT:
        return Status.TIMEOUT, Cause.TIMEOUT
    if event.ending is Ending.UNREADABLE:
        return Status.RUNTIME_ERROR, Cause.PROTOCOL
    if event.ending is Ending.OUTLIVED:
        return Status.CRASH, Cause.SANDBOX_REFUSAL
    if event.ending is Ending.DIED:
        if event.breach:
            return Status.CRASH, Cause.OUT_OF_MEMORY if event.too_big and candidate else Cause.SANDBOX_REFUSAL
        if event.external:
            return (Status.CRASH if candidate else Status.RUNTIME_ERROR), Cause.EXTERNAL_KILL
        return (Status.CRASH, Cause.CANDIDATE_CRASH) if candidate else (Status.RUNTIME_ERROR, Cause.REFERENCE)
    if event.kind == "device_missing":
        return Status.SKIPPED, Cause.DEVICE_MISSING
    if event.kind == "device_unavailable" and not candidate:
        return Status.HARNESS_ERROR, Cause.DEVICE_UNAVAILABLE
    if is_oom(event.error):
        # Before the harness rule: torch raises it wherever the allocation failed, often in
        # Hercules' own code (a transform's inputs, a trial's truth) while neighbours fill a shared
        # device; the cause lets ``bench`` judge the problem again alone. On the H200, 9 of 49
        # KernelBench references came out harness_error this way with six evaluations in flight.
        if event.kind == "harness":
            return Status.HARNESS_ERROR, Cause.OUT_OF_MEMORY
        return (Status.CRASH if candidate else Status.RUNTIME_ERROR), Cause.OUT_OF_MEMORY
    if event.kind == "harness":
        return Status.HARNESS_ERROR, Cause.HARNESS
    if not candidate:
        # The reference reads no packs but the candidate's: one it refuses is a forged reply.
        return Status.RUNTIME_ERROR, Cause.PROTOCOL if event.kind == "pack" else Cause.REFERENCE
    if event.kind == "crash":
        return Status.CRASH, Cause.CANDIDATE_CRASH
    return (Status.BUILD_ERROR if event.op in BUILD_OPS else Status.RUNTIME_ERROR), Cause.CANDIDATE_ERROR


def trusted_side_out_of_memory(status: Status, cause: Cause) -> bool:
    """A verdict whose out-of-memory was the trusted side's: the reference's process (the problem's
    inputs, its own code, the float64 truth, a calibration) or Hercules' own code asked for the
    memory. ``classify`` gives the candidate's ``crash`` and the others ``runtime_error`` or
    ``harness_error``, so the status says whose it was; the candidate is not to be blamed for it."""
    return cause is Cause.OUT_OF_MEMORY and status in (Status.RUNTIME_ERROR, Status.HARNESS_ERROR)


# An evaluation judged again alone (no other evaluation of its run in flight) that runs out of
# device memory once more, while more than this share of the device was already in use before it
# started: the machine's state decided it, not the problem or the candidate. On the H100 16
# KernelBench references came out runtime_error this way with 77.5 of 79.2 GiB in use beforehand.
DEVICE_HELD_FRACTION = 0.1


def out_of_memory_alone(status: Status, cause: Cause, held_fraction: float | None) -> Status:
    """The status of a verdict judged alone, given the share of the device in use before it began
    (None: not known, the status stands)."""
    if cause is Cause.OUT_OF_MEMORY and held_fraction is not None and held_fraction > DEVICE_HELD_FRACTION:
        return Status.HARNESS_ERROR
    return status
