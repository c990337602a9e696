"""classify(): every way a worker request can end, as a status and a cause (process-free)."""

from __future__ import annotations

import pytest

from hercules.harness.classify import DEVICE_HELD_FRACTION, Ending, WorkerEvent, classify, out_of_memory_alone
from hercules.harness.records import Cause, Status

CASES = [
    # (event, status, cause)
    (WorkerEvent("candidate", "run", Ending.TIMEOUT), Status.TIMEOUT, Cause.TIMEOUT),
    (WorkerEvent("reference", "compare", Ending.TIMEOUT), Status.TIMEOUT, Cause.TIMEOUT),
    (WorkerEvent("candidate", "run", Ending.UNREADABLE), Status.RUNTIME_ERROR, Cause.PROTOCOL),
    (WorkerEvent("candidate", "end", Ending.OUTLIVED), Status.CRASH, Cause.SANDBOX_REFUSAL),
    (WorkerEvent("candidate", "run", Ending.DIED), Status.CRASH, Cause.CANDIDATE_CRASH),
    (WorkerEvent("candidate", "run", Ending.DIED, external=True), Status.CRASH, Cause.EXTERNAL_KILL),
    (WorkerEvent("candidate", "run", Ending.DIED, breach=True), Status.CRASH, Cause.SANDBOX_REFUSAL),
    (WorkerEvent("candidate", "run", Ending.DIED, breach=True, too_big=True), Status.CRASH, Cause.OUT_OF_MEMORY),
    (WorkerEvent("reference", "inputs", Ending.DIED), Status.RUNTIME_ERROR, Cause.REFERENCE),
    (WorkerEvent("reference", "inputs", Ending.DIED, external=True), Status.RUNTIME_ERROR, Cause.EXTERNAL_KILL),
    (WorkerEvent("candidate", "prepare", Ending.REFUSED, "device_missing"), Status.SKIPPED, Cause.DEVICE_MISSING),
    (WorkerEvent("reference", "setup", Ending.REFUSED, "device_unavailable", "AcceleratorError: CUDA error: "
                 "CUDA-capable device(s) is/are busy or unavailable"), Status.HARNESS_ERROR, Cause.DEVICE_UNAVAILABLE),
    # the candidate's process can raise any text: its "device unavailable" stays its own failure
    (WorkerEvent("candidate", "run", Ending.REFUSED, "device_unavailable", "busy or unavailable"),
     Status.RUNTIME_ERROR, Cause.CANDIDATE_ERROR),
    (WorkerEvent("candidate", "run", Ending.REFUSED, "harness", "AttributeError: x"), Status.HARNESS_ERROR,
     Cause.HARNESS),
    (WorkerEvent("reference", "compare", Ending.REFUSED, "harness"), Status.HARNESS_ERROR, Cause.HARNESS),
    (WorkerEvent("candidate", "run", Ending.REFUSED, "error", "torch.OutOfMemoryError: CUDA out of memory."),
     Status.CRASH, Cause.OUT_OF_MEMORY),
    (WorkerEvent("reference", "baseline_prepare", Ending.REFUSED, "error", "CUDA out of memory. Tried"),
     Status.RUNTIME_ERROR, Cause.OUT_OF_MEMORY),
    (WorkerEvent("reference", "compare", Ending.REFUSED, "pack", "layout lies"), Status.RUNTIME_ERROR,
     Cause.PROTOCOL),
    (WorkerEvent("reference", "setup", Ending.REFUSED, "error", "ValueError: bad problem"), Status.RUNTIME_ERROR,
     Cause.REFERENCE),
    (WorkerEvent("candidate", "run", Ending.REFUSED, "crash", "illegal memory access"), Status.CRASH,
     Cause.CANDIDATE_CRASH),
    (WorkerEvent("candidate", "build", Ending.REFUSED, "error", "SyntaxError"), Status.BUILD_ERROR,
     Cause.CANDIDATE_ERROR),
    (WorkerEvent("candidate", "import", Ending.REFUSED, "error", "nvcc failed"), Status.BUILD_ERROR,
     Cause.CANDIDATE_ERROR),
    (WorkerEvent("candidate", "run", Ending.REFUSED, "error", "ValueError: kernel launch failed"),
     Status.RUNTIME_ERROR, Cause.CANDIDATE_ERROR),
]


@pytest.mark.parametrize("event,status,cause", CASES, ids=[f"{e.role}-{e.op}-{e.ending.value}-{e.kind}" for e, _, _ in CASES])
def test_each_ending_has_one_status_and_cause(event, status, cause):
    assert classify(event) == (status, cause)


def test_a_harness_fault_is_never_the_candidates_status_whatever_its_text_says():
    """The worker's own word (``harness``) wins over any text in the error for the status; an
    allocation that failed in Hercules' own code keeps cause ``out_of_memory``, so that a batch
    judges the problem again alone instead of reporting a fault of its own."""
    for role in ("candidate", "reference"):
        event = WorkerEvent(role, "run", Ending.REFUSED, "harness", "KeyError: 'specs'")
        assert classify(event) == (Status.HARNESS_ERROR, Cause.HARNESS)
        event = WorkerEvent(role, "run", Ending.REFUSED, "harness",
                            "transform scale_x100: OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 GiB")
        assert classify(event) == (Status.HARNESS_ERROR, Cause.OUT_OF_MEMORY)


def test_out_of_memory_judged_alone_on_a_held_device_is_the_machines_fault_not_the_problems():
    held = DEVICE_HELD_FRACTION + 0.01
    assert out_of_memory_alone(Status.RUNTIME_ERROR, Cause.OUT_OF_MEMORY, held) is Status.HARNESS_ERROR
    assert out_of_memory_alone(Status.CRASH, Cause.OUT_OF_MEMORY, 0.98) is Status.HARNESS_ERROR
    # An empty device before it began: the problem (or candidate) did not fit; unknown: unchanged.
    assert out_of_memory_alone(Status.RUNTIME_ERROR, Cause.OUT_OF_MEMORY, 0.01) is Status.RUNTIME_ERROR
    assert out_of_memory_alone(Status.RUNTIME_ERROR, Cause.OUT_OF_MEMORY, None) is Status.RUNTIME_ERROR
    # Only a device out of memory: a held device does not excuse another failure.
    assert out_of_memory_alone(Status.INCORRECT, Cause.CANDIDATE_ERROR, 0.98) is Status.INCORRECT


def test_the_workers_word_for_a_device_the_driver_refuses():
    """The driver's text (cudaErrorDevicesUnavailable as torch raises it) is its own kind, before the
    classification decides whose it is by role."""
    from hercules.harness.worker import classify_exception

    refused = RuntimeError("CUDA error: CUDA-capable device(s) is/are busy or unavailable\nSearch for "
                           "`cudaErrorDevicesUnavailable' in https://docs.nvidia.com/cuda/")
    assert classify_exception(refused) == "device_unavailable"
    assert classify_exception(RuntimeError("Found no NVIDIA driver on your system")) == "device_missing"
    assert classify_exception(ValueError("shapes do not match")) == "error"
