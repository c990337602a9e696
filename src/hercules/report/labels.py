"""What a figure is, said where it is shown: times under Triton's CPU interpreter, the two
correctness checks, and error figures that were never measured.

A Triton candidate on the CPU runs under Triton's interpreter (``TRITON_INTERPRET=1``, set by the
build plan): every program instance of the kernel executes as Python, seconds a call where the
compiled kernel takes microseconds. Its time says nothing of the kernel's speed, so reports label it
and keep it out of the speedup aggregates (geomean, fast_p for p > 0), showing it apart.
"""

from __future__ import annotations

from hercules.harness.records import Flag, Status, Verdict

INTERPRETED = "interpreted"
SHAPE_MISMATCH_WORD = Flag.SHAPE_MISMATCH.value  # as verdicts carry their flags
INTERPRETED_NOTE = ("timed under Triton's CPU interpreter (each program instance runs as Python): not the "
                    "kernel's speed; left out of the speedup aggregates")
INTERPRETED_TIMEOUT_NOTE = ("under Triton's CPU interpreter, which runs every program instance as Python (seconds a "
                            "call, where the compiled kernel takes microseconds): run it on a GPU to time the kernel")

# The two correctness checks every verdict reports, named by what they are.
STRICT_CHECK = "strict: per-dtype tolerance against a float64 truth, plus a relative-error bound"
KERNELBENCH_CHECK = "upstream KernelBench: allclose at atol = rtol = 1e-2 against the problem-dtype output"
# Why their counts differ (checks.DEFAULT_TOLERANCES against KERNELBENCH_TOLERANCE).
CHECKS_DIFFER = ("KernelBench's check passes more float32 outputs (1e-2 against strict's 1e-3, no relative-error "
                 "or precision bound) and fewer bfloat16 ones (strict allows 2e-2 there).")


def interpreted(verdict: Verdict) -> bool:
    """Whether the candidate ran under Triton's CPU interpreter: as its timing says, else (a verdict
    not timed, or recorded before timings said so) a Triton build on the CPU."""
    if verdict.timing is not None and verdict.timing.interpreted:
        return True
    build = verdict.build
    language = build.get("language") if isinstance(build, dict) else getattr(build, "language", None)
    return language == "triton" and str(verdict.device).startswith("cpu")


def timeout_note(verdict: Verdict) -> str | None:
    """Why a timeout happened when the interpreter is the likely reason."""
    if verdict.status is Status.TIMEOUT and interpreted(verdict):
        return INTERPRETED_TIMEOUT_NOTE
    return None


def status_text(verdict: Verdict) -> str:
    """The status as a table shows it: a timeout under the interpreter says so in its own cell
    (a bare ``timeout`` reads as the candidate's hang)."""
    if timeout_note(verdict):
        return f"{verdict.status.value} (Triton CPU {INTERPRETED})"
    return verdict.status.value


def errors_measured(verdict: Verdict) -> bool:
    """Whether ``max_abs_err`` and ``rel_err`` were measured: outputs of the right shape and dtype
    were compared. A shape mismatch or a run with no output leaves zeros that mean nothing."""
    if SHAPE_MISMATCH_WORD in verdict.flags:
        return False
    return verdict.status in (Status.OK, Status.SUSPICIOUS, Status.INCORRECT) and verdict.max_abs_err is not None
