"""What each stage of an evaluation found, and the one pure function that turns it into a verdict.

The stages (scan, build, check, measure, integrity, baselines) each return a frozen record of
findings; ``decide`` owns the status precedence and the speedups, and runs without any process,
so every rule here is unit-tested directly (tests/harness/test_decide.py).

Precedence: a stage that could not finish (``Failure``) decides the status (build error, timeout,
crash, ...); then incorrect outputs (trials, or revalidation after timing); then any flag makes a
correct candidate ``suspicious``; otherwise ``ok``. Only ``ok`` and ``suspicious`` carry times. A static
finding whose threat a dynamic check judges on the evaluation's device is a note (``static_hints``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hercules.harness.records import (
    BuildResult,
    Cause,
    CheckResult,
    Degeneracy,
    Flag,
    SideBySide,
    Speedups,
    Status,
    TimingResult,
    Verdict,
)
from hercules.harness.scan import dynamic_check_for


@dataclass(frozen=True)
class Finding:
    """A flag with its evidence (a note for the reader)."""

    flag: str
    note: str


@dataclass(frozen=True)
class Failure:
    """A stage that could not finish: the status it implies, why, and the cause as data."""

    status: Status
    cause: Cause
    error: str
    role: str = ""  # the process it happened in: "candidate", "reference", or "" (the parent)


# A fault that Hercules' own code raised inside the candidate's process is the harness's, unless the
# candidate's code reaches into other modules (these flags): there it may have changed that very
# code. The red team's unsealed_outputs.py replaces the worker's pack writer; once the writer took
# a new argument, its stale replacement raised TypeError at the call, in Hercules' frames only.
TAMPERING_FLAGS = frozenset({Flag.PROBLEM_EDIT.value})
TAMPERED_FAULT_NOTE = ("a fault in Hercules' code inside the candidate's process, whose code reaches into other "
                       "modules (problem_edit): the candidate's, not Hercules'")


@dataclass(frozen=True)
class ScanOutcome:
    findings: tuple[Finding, ...] = ()
    # Flags whose evidence is a code path, judged by whether that path ran: (flag, line ranges).
    conditional: tuple[tuple[str, tuple[tuple[int, int], ...]], ...] = ()
    notes: tuple[str, ...] = ()  # seen and said, not flagged


@dataclass(frozen=True)
class CheckOutcome:
    result: CheckResult
    findings: tuple[Finding, ...] = ()
    executed_lines: frozenset[int] = frozenset()
    degeneracy: Degeneracy | None = None  # inputs the problem's outputs ignore (dependence.py)


@dataclass(frozen=True)
class MeasureOutcome:
    timing: TimingResult | None
    findings: tuple[Finding, ...] = ()
    revalidated: bool = True  # False: outputs went wrong after the timing buffers were refreshed
    revalidation_error: str | None = None
    executed_lines: frozenset[int] = frozenset()
    timing_sets: int = 1  # the candidate's timing buffers (the baselines are timed over as many sets)
    # The speedup against a baseline timed beside the candidate in the same rounds, by its name.
    side_by_side: Mapping[str, SideBySide] = field(default_factory=dict)


@dataclass(frozen=True)
class IntegrityOutcome:
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class BaselineOutcome:
    times_ms: Mapping[str, float | None] = field(default_factory=dict)
    # The 95% interval of the candidate's speedup against each baseline, by name, where candidate
    # and baseline were timed in the same rounds; empty when not measured that way.
    intervals: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    expert: Mapping[str, Any] | None = None  # the expert baseline's choice report
    # A baseline timed after the candidate ended, against eager in the same rounds: its time over
    # eager's, with the interval (``Beside.bridge``); the candidate reaches it through eager.
    bridges: Mapping[str, SideBySide] = field(default_factory=dict)


@dataclass(frozen=True)
class Context:
    """Everything about the evaluation that is not a finding."""

    problem: str
    candidate: str
    device: str
    sandbox: dict[str, Any] | None = None
    limits: Mapping[str, float] = field(default_factory=dict)
    phases: Mapping[str, float] = field(default_factory=dict)
    requests: Mapping[str, Any] = field(default_factory=dict)
    notes: Sequence[str] = ()
    datapath: str = ""
    spans: Sequence[tuple[str, float, float]] = ()


def conditional_findings(scan: ScanOutcome, executed: frozenset[int]) -> tuple[Finding, ...]:
    """The scan's conditional flags whose code path actually ran (during trials or timing)."""
    found = []
    for flag, ranges in scan.conditional:
        hit = sorted(n for n in executed if any(a <= n <= b for a, b in ranges))
        if hit:
            found.append(Finding(flag, f"the fallback path ran (line {hit[0]})"))
    return tuple(found)


def static_hints(scan: ScanOutcome, device: str) -> tuple[tuple[Finding, ...], tuple[str, ...]]:
    """The scan's outright findings split in two: those that stay flags, and, as notes, those whose
    threat a check of the running candidate judges on ``device`` (static findings are hints where
    dynamic evidence decides: a side stream joined back, bf16 pieces summed to fp32 accuracy)."""
    kept, hints = [], []
    for finding in scan.findings:
        check = dynamic_check_for(finding.flag, device)
        if check is None:
            kept.append(finding)
        else:
            hints.append(f"{finding.note} (a hint, not a flag: {check.name} judges {finding.flag})")
    return tuple(kept), tuple(hints)


def decide(ctx: Context, scan: ScanOutcome, build: BuildResult | None = None, check: CheckOutcome | None = None,
           measure: MeasureOutcome | None = None, integrity: IntegrityOutcome | None = None,
           baselines: BaselineOutcome | None = None, failure: Failure | None = None,
           sol: dict[str, Any] | None = None) -> Verdict:
    executed = (check.executed_lines if check else frozenset()) | (measure.executed_lines if measure else frozenset())
    static, hints = static_hints(scan, ctx.device)
    findings: list[Finding] = [*static, *conditional_findings(scan, executed)]
    for stage in (check, measure, integrity):
        if stage is not None:
            findings.extend(stage.findings)
    flags = tuple(sorted({f.flag for f in findings}))
    notes = [f.note for f in findings]
    notes += list(scan.notes) + list(hints) + list(integrity.notes if integrity else ())
    notes += list(baselines.notes if baselines else ())
    notes += list(ctx.notes)

    check_result = check.result if check else None
    if failure is not None:
        status, cause, error = failure.status, failure.cause, failure.error
        if cause is Cause.HARNESS and failure.role == "candidate" and TAMPERING_FLAGS & {f.flag for f in static}:
            status, cause = Status.RUNTIME_ERROR, Cause.CANDIDATE_ERROR
            notes.append(TAMPERED_FAULT_NOTE)
    elif check_result is None or not check_result.correct:
        status, cause = Status.INCORRECT, Cause.NONE
        error = (check_result.error if check_result else None) or "no correctness result"
    elif measure is not None and not measure.revalidated:
        status, cause, error = Status.INCORRECT, Cause.NONE, measure.revalidation_error
        check_result = CheckResult(**{**check_result.__dict__, "correct": False, "error": error,
                                      "flags": tuple(sorted(set(check_result.flags) | set(flags)))})
    elif flags:
        status, cause, error = Status.SUSPICIOUS, Cause.NONE, "; ".join(notes[:5]) or ", ".join(flags)
    else:
        status, cause, error = Status.OK, Cause.NONE, None

    scored = status in (Status.OK, Status.SUSPICIOUS)
    timing = measure.timing if measure else None
    times = dict(baselines.times_ms) if baselines else {}
    cand_ms = timing.median_ms if timing and scored else None
    speedup = _speedups(times, cand_ms, baselines.intervals if baselines else {},
                        measure.side_by_side if measure else {}, baselines.bridges if baselines else {})
    return Verdict(
        status=status, correct=bool(check_result and check_result.correct) and scored, flags=flags, error=error,
        max_abs_err=check_result.max_abs_err if check_result else None,
        rel_err=check_result.rel_err if check_result else None,
        ref_ms=times.get("eager"), cand_ms=cand_ms, speedup=speedup,
        sol_fraction=(sol or {}).get("sol_fraction") if scored else None,
        problem=ctx.problem, candidate=ctx.candidate, device=ctx.device, baselines_ms=times,
        build=build, check=check_result, timing=timing, sol=sol if scored else None,
        phases={k: round(v, 3) for k, v in ctx.phases.items()}, requests=dict(ctx.requests),
        cause=cause, sandbox=ctx.sandbox, limits={k: round(v, 3) for k, v in ctx.limits.items()},
        notes=tuple(dict.fromkeys(notes))[:40],
        expert=dict(baselines.expert) if baselines and baselines.expert else None, datapath=ctx.datapath,
        spans=tuple(ctx.spans), degenerate_problem=check.degeneracy if check else None,
    )


def _speedups(times: Mapping[str, float | None], cand_ms: float | None,
              intervals: Mapping[str, tuple[float, float]],
              side_by_side: Mapping[str, SideBySide] | None = None,
              bridges: Mapping[str, SideBySide] | None = None) -> Speedups:
    """Each baseline's time over the candidate's, by name, except where candidate and baseline
    were timed in the same rounds: there the side-by-side speedup and its interval; a baseline
    timed against eager in the same rounds (``bridges``) reaches the candidate through eager's
    side-by-side speedup: the product of the two ratios, and of their intervals' ends. ``best``
    against the fastest baseline, whose interval is also the best's. Only a timed candidate has
    speedups or intervals."""
    if not cand_ms:
        return Speedups()
    ratios = {name: time / cand_ms for name, time in times.items() if time}
    intervals = dict(intervals)
    side_by_side = side_by_side or {}
    for name, paired in side_by_side.items():
        if name in ratios:
            ratios[name] = paired.speedup
            intervals[name] = (paired.low, paired.high)
    through = side_by_side.get("eager")
    for name, bridge in (bridges or {}).items():
        if name in ratios and name not in side_by_side and through is not None:
            ratios[name] = bridge.speedup * through.speedup
            intervals[name] = (bridge.low * through.low, bridge.high * through.high)
    fastest = min(ratios, key=lambda name: times[name] or 0.0, default=None)
    kept = {name: bounds for name, bounds in intervals.items() if name in ratios}
    if fastest in kept:
        kept["best"] = kept[fastest]
    return Speedups(ratios, best=ratios[fastest] if fastest else None, intervals=kept)
