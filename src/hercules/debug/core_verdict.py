"""An evaluation core verdict -> the debugging benchmark's category, decided on its typed fields.

The core says what happened in a ``Status`` and, for a failure, why in a ``Cause``
(``harness/classify.py`` chose both); this function maps them onto the benchmark's categories
(``classifier.CATEGORIES``). Text is read only where the core has no type for what a category
needs, and only through ``classifier``'s readers, each named for the output it reads:

    BUILD_ERROR                     which compiler, linker or import error (``classify_build``)
    a candidate crash or exception  which memory fault, or an environment this machine lacks
                                    (``read_runtime_error``: CUDA runtime and torch messages)

Every other decision is the status's and the cause's. What is not the candidate's doing is never
its category: a worker killed from outside, the problem's own code failing, or Hercules' own
fault are ``env`` (this machine could not observe the candidate), never a crash that a
``memory_crash`` label would take as reproduced.
"""

from __future__ import annotations

from hercules.debug import classifier as cls
from hercules.harness.classify import trusted_side_out_of_memory
from hercules.harness.records import BuildResult, Cause, Status, Verdict

# Causes that say nothing of the candidate: the run observed the machine, the problem or Hercules.
KILLED_FROM_OUTSIDE = "external_kill"
NOT_THE_CANDIDATE = {
    Cause.EXTERNAL_KILL: KILLED_FROM_OUTSIDE,  # killed from outside (the host's OOM killer, a stop)
    Cause.REFERENCE: "problem",  # the problem's own code (the trusted side) failed
    Cause.HARNESS: "harness_error",  # Hercules' own code raised
    Cause.DEVICE_UNAVAILABLE: "device_unavailable",  # the driver refused the trusted side the device
}
PROBLEM_OUT_OF_MEMORY = "problem_out_of_memory"  # the trusted side ran out of device memory
# The candidate's process ended or misbehaved for a reason the cause names; the subtype says which.
CRASH_SUBTYPE = {
    Cause.CANDIDATE_CRASH: "worker",  # died by itself: exit, fatal signal, fatal CUDA error
    Cause.CANDIDATE_ERROR: "python",  # raised while running
    Cause.SANDBOX_REFUSAL: "sandbox",  # over a sandbox bound (host memory, processes), or outlived it
    Cause.PROTOCOL: "protocol",  # a reply malformed or forged
}


def killed_from_outside(category: str, subtype: str) -> bool:
    """A category that says a process was killed from outside (the host's OOM killer): the
    machine's doing, so neither a reproduction to cache nor a round to keep."""
    return (category, subtype) == (cls.ENV, KILLED_FROM_OUTSIDE)


def classify_core(status: Status, cause: Cause = Cause.NONE, error: str = "",
                  build: BuildResult | None = None) -> cls.Classification:
    """The category of a core verdict with this status and cause (``error``: the verdict's error;
    ``build``: its build result, whose log is read for a build error's line)."""
    error = error or ""
    if status is Status.OK:
        return cls.Classification(cls.PASSED)
    if status is Status.SKIPPED or cause is Cause.DEVICE_MISSING:
        return cls.Classification(cls.UNTESTED, "no_device", (error or "skipped")[:400])
    if trusted_side_out_of_memory(status, cause):
        # The problem's side did not fit beside the candidate (on the H100 a 6.4 GB-input
        # KernelBench reference's float64 truth asked 12 GiB with 36.7 GiB its own and 30.7 GiB the
        # candidate's): this machine could not test the candidate, which did nothing wrong.
        return cls.Classification(cls.ENV, PROBLEM_OUT_OF_MEMORY, (error or "out of memory")[:400])
    if status is Status.HARNESS_ERROR or cause in NOT_THE_CANDIDATE:
        subtype = NOT_THE_CANDIDATE.get(cause, "harness_error")
        return cls.Classification(cls.ENV, subtype, (error or f"{status.value} ({cause.value})")[:400])
    if status is Status.BUILD_ERROR:
        # A build timeout is the core's ``timeout`` status, never this one.
        return cls.classify_build(f"{error}\n{build.log if build is not None else ''}")
    if status is Status.INCORRECT:
        return cls.Classification(cls.WRONG, "", (error or "outputs differ from the reference")[:400])
    if status is Status.SUSPICIOUS:
        return cls.Classification(cls.SUSPICIOUS, "", (error or "anti-hacking flag")[:400])
    if status is Status.TIMEOUT or cause is Cause.TIMEOUT:
        return cls.Classification(cls.TIMEOUT, "test", (error or "timed out")[:400])
    if cause is Cause.OUT_OF_MEMORY:
        return cls.Classification(cls.OOM, "", (error or "out of memory")[:400])
    # CRASH or RUNTIME_ERROR of the candidate: the runtime's message names the memory fault (or an
    # environment this machine lacks) where the cause cannot.
    if cause in (Cause.CANDIDATE_CRASH, Cause.CANDIDATE_ERROR, Cause.NONE):
        found = cls.read_runtime_error(error)
        if found is not None:
            return found
    subtype = CRASH_SUBTYPE.get(cause, "runtime")
    return cls.Classification(cls.CRASH, subtype, (error or f"{status.value} ({cause.value})")[:400])


def classify_verdict(verdict: Verdict) -> cls.Classification:
    return classify_core(verdict.status, verdict.cause, verdict.error or "", verdict.build)
