"""A core verdict's category from its Status and Cause (``debug.core_verdict``): scripted verdicts
for every category, no process started."""

from __future__ import annotations

import itertools

import pytest

from hercules.debug import classifier as cls
from hercules.debug.core_verdict import classify_core, classify_verdict
from hercules.harness.records import BuildResult, Cause, Speedups, Status, Verdict

ILLEGAL = "RuntimeError: CUDA error: an illegal memory access was encountered"
NVCC = 'x.cu(3): error: expected a ";"'


@pytest.mark.parametrize("status, cause, error, category, subtype", [
    (Status.OK, Cause.NONE, "", cls.PASSED, ""),
    (Status.INCORRECT, Cause.NONE, "max abs error 3.0", cls.WRONG, ""),
    (Status.SUSPICIOUS, Cause.NONE, "result_cache", cls.SUSPICIOUS, ""),
    (Status.TIMEOUT, Cause.TIMEOUT, "no answer in 20 s", cls.TIMEOUT, "test"),
    (Status.SKIPPED, Cause.DEVICE_MISSING, "needs a GPU", cls.UNTESTED, "no_device"),
    (Status.BUILD_ERROR, Cause.CANDIDATE_ERROR, "Error building extension\n" + NVCC, cls.BUILD, "syntax_type"),
    (Status.CRASH, Cause.OUT_OF_MEMORY, "worker over its memory bound", cls.OOM, ""),
    # the cause says the candidate's process died; the runtime's message says which fault
    (Status.CRASH, Cause.CANDIDATE_CRASH, ILLEGAL, cls.ILLEGAL, ""),
    (Status.RUNTIME_ERROR, Cause.CANDIDATE_ERROR, "RuntimeError: invalid configuration argument", cls.LAUNCH, ""),
    (Status.CRASH, Cause.CANDIDATE_CRASH, "worker exited with status 3", cls.CRASH, "worker"),
    (Status.RUNTIME_ERROR, Cause.CANDIDATE_ERROR, "TypeError: forward() missing 1 argument", cls.CRASH, "python"),
    (Status.CRASH, Cause.SANDBOX_REFUSAL, "over its process bound", cls.CRASH, "sandbox"),
    (Status.RUNTIME_ERROR, Cause.PROTOCOL, "reply unreadable", cls.CRASH, "protocol"),
    (Status.RUNTIME_ERROR, Cause.CANDIDATE_ERROR, "CUDA error: no kernel image is available", cls.ENV, "runtime"),
    # not the candidate's doing, whatever its error text says
    (Status.CRASH, Cause.EXTERNAL_KILL, "worker killed by SIGKILL; " + ILLEGAL, cls.ENV, "external_kill"),
    (Status.RUNTIME_ERROR, Cause.REFERENCE, "reference: " + ILLEGAL, cls.ENV, "problem"),
    (Status.HARNESS_ERROR, Cause.HARNESS, "KeyError in stage_measure", cls.ENV, "harness_error"),
    # out of memory on the trusted side (the reference's process, Hercules' code): not the candidate's
    (Status.RUNTIME_ERROR, Cause.OUT_OF_MEMORY, "reference: out of memory: torch.OutOfMemoryError", cls.ENV,
     "problem_out_of_memory"),
    (Status.HARNESS_ERROR, Cause.OUT_OF_MEMORY, "calibration: out of memory", cls.ENV, "problem_out_of_memory"),
])
def test_every_category_from_status_and_cause(status, cause, error, category, subtype):
    found = classify_core(status, cause, error)
    assert (found.category, found.subtype) == (category, subtype)
    assert found.reason or category == cls.PASSED


def test_the_same_text_under_another_cause_is_another_category():
    """Error text never overrules the cause: an illegal-address message is a memory fault for the
    candidate's crash, the environment for a kill from outside, and wrong results for a verdict
    that says the outputs differ."""
    assert classify_core(Status.CRASH, Cause.CANDIDATE_CRASH, ILLEGAL).category == cls.ILLEGAL
    assert classify_core(Status.CRASH, Cause.EXTERNAL_KILL, ILLEGAL).category == cls.ENV
    assert classify_core(Status.INCORRECT, Cause.NONE, ILLEGAL).category == cls.WRONG
    assert classify_core(Status.OK, Cause.NONE, ILLEGAL).category == cls.PASSED


def test_a_build_error_reads_the_build_log():
    build = BuildResult(ok=False, seconds=1.0, log="main.cu(7): error: identifier \"cudaMemcpyFromDevice\" "
                        "is undefined", error="Error building extension", language="cuda")
    found = classify_core(Status.BUILD_ERROR, Cause.CANDIDATE_ERROR, "Error building extension", build)
    assert (found.category, found.subtype) == (cls.BUILD, "api_misuse")
    assert "cudaMemcpyFromDevice" in found.reason


def test_every_status_and_cause_gives_a_category_and_only_ok_passes():
    for status, cause in itertools.product(Status, Cause):
        found = classify_core(status, cause, "")
        assert found.category in cls.CATEGORIES, (status, cause)
        assert (found.category == cls.PASSED) == (status is Status.OK), (status, cause)
        if status is Status.HARNESS_ERROR or cause in (Cause.EXTERNAL_KILL, Cause.REFERENCE, Cause.HARNESS):
            assert found.label is None, (status, cause)  # never a label a broken file could reproduce


def test_a_verdict_record_is_classified_on_its_fields():
    verdict = Verdict(status=Status.CRASH, correct=False, flags=(), error=ILLEGAL, max_abs_err=None, rel_err=None,
                      ref_ms=None, cand_ms=None, speedup=Speedups(), sol_fraction=None, cause=Cause.CANDIDATE_CRASH)
    assert classify_verdict(verdict).category == cls.ILLEGAL


def test_out_of_memory_is_the_candidates_only_where_its_own_process_ran_out():
    """classify() gives a candidate's out-of-memory the crash status and the reference's (or
    Hercules' own) runtime_error / harness_error: through one worker event each, the debugging
    category follows whose process it was."""
    from hercules.harness.classify import Ending, WorkerEvent, classify

    error = "OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 GiB"
    seen = {}
    for role, kind in (("candidate", "error"), ("reference", "error"), ("reference", "harness")):
        status, cause = classify(WorkerEvent(role, "run", Ending.REFUSED, kind=kind, error=error))
        seen[(role, kind)] = classify_core(status, cause, error).category
    assert seen == {("candidate", "error"): cls.OOM, ("reference", "error"): cls.ENV,
                    ("reference", "harness"): cls.ENV}
