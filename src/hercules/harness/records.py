"""Plain, frozen, serialisable records passed between the evaluation stages.

A failure is data (a status and a message), never an exception that escapes a batch loop.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hercules.harness import baselines


class Status(str, enum.Enum):
    """Final verdict of one evaluation. Only ``OK`` counts as a scored result."""

    BUILD_ERROR = "build_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    CRASH = "crash"
    INCORRECT = "incorrect"
    SUSPICIOUS = "suspicious"  # outputs are correct, but an anti-hacking check raised a flag
    OK = "ok"
    SKIPPED = "skipped"  # the candidate needs a device that is not present
    # Hercules' own code failed (a bug or a limit of the harness): says nothing of the candidate,
    # and batch scores leave such rows out (and say how many).
    HARNESS_ERROR = "harness_error"


class Cause(str, enum.Enum):
    """Why an evaluation ended without a scored result: callers (the executor's retries, the
    service, the debugging benchmark) branch on this, never on error strings."""

    NONE = "none"
    CANDIDATE_ERROR = "candidate_error"  # the candidate's code raised, or its build failed
    CANDIDATE_CRASH = "candidate_crash"  # its process died by itself (exit, fatal signal, CUDA fault)
    EXTERNAL_KILL = "external_kill"  # its process was killed from outside (SIGKILL/SIGTERM, OOM killer)
    TIMEOUT = "timeout"  # no answer within the bound derived from the reference's own cost
    OUT_OF_MEMORY = "out_of_memory"  # the device ran out of memory
    SANDBOX_REFUSAL = "sandbox_refusal"  # a sandbox limit was exceeded (host memory, processes)
    PROTOCOL = "protocol"  # a reply that is malformed or forged
    DEVICE_MISSING = "device_missing"  # the candidate needs a device that is not present
    REFERENCE = "reference"  # the trusted side failed (the problem's own code)
    HARNESS = "harness"  # Hercules' own code raised (traceback kept in the run folder as harness_error.txt)
    DEVICE_UNAVAILABLE = "device_unavailable"  # the trusted side's process was refused the device itself


class Flag(str, enum.Enum):
    """Named anti-hacking findings; one per threat in docs/design.md (some threats also fail outright)."""

    SIDE_STREAM = "side_stream"  # work hidden from the timed stream (wall clock disagrees with events)
    TENSOR_SUBCLASS = "tensor_subclass"  # output is not exactly torch.Tensor (lazy subclasses)
    RESULT_CACHE = "result_cache"  # stale outputs after inputs were refreshed in place
    PROBLEM_EDIT = "problem_edit"  # reaches for the problem's module, sizes or constants
    FOREIGN_MEMORY = "foreign_memory"  # output holds values it never wrote (poisoned memory)
    ZERO_OUTPUT = "zero_output"  # (near) zero output where the reference is not
    PRECISION_DOWNCAST = "precision_downcast"  # error far above what the problem's dtype gives
    MONKEY_PATCH = "monkey_patch"  # torch, timers, builtins or comparisons replaced
    BACKGROUND_THREAD = "background_thread"  # threads left running by the candidate
    GLOBAL_STATE = "global_state"  # backend flags or global torch settings changed
    OUTPUT_ALIASES_INPUT = "output_aliases_input"  # returns an input or a view of one
    INPUT_MUTATED = "input_mutated"  # inputs changed by the candidate
    REFERENCE_FALLBACK = "reference_fallback"  # try/except that falls back to PyTorch
    SWALLOWED_EXCEPTION = "swallowed_exception"  # an exception raised and hidden during forward
    SHAPE_MISMATCH = "shape_mismatch"  # output shape/dtype/device differ from reference
    OUTPUT_OVERWRITTEN = "output_overwritten"  # a later call writes over outputs the caller still holds
    # right on the problem's own inputs, wrong on transformed ones (scaled, shifted, edge values)
    FRAGILE_INPUTS = "fragile_inputs"


@dataclass(frozen=True)
class Tolerance:
    """Elementwise tolerance plus a bound on the relative error norm ||out - ref|| / ||ref||."""

    atol: float
    rtol: float
    rel_tol: float
    # A candidate whose relative error exceeds max(downcast_ratio * reference error, downcast_floor)
    # computed in lower precision than the problem's dtype intends (fp16 / TF32 / autocast).
    downcast_ratio: float
    downcast_floor: float


@dataclass(frozen=True)
class BuildResult:
    ok: bool
    seconds: float
    cache_key: str = ""
    cache_hit: bool = False
    log: str = ""  # tail of the build log (full log lives in the artifacts directory)
    error: str | None = None
    language: str = "pytorch"


@dataclass(frozen=True)
class CheckResult:
    correct: bool
    trials: int
    max_abs_err: float | None
    rel_err: float | None
    ref_rel_err: float | None  # the problem-dtype reference's own error against float64
    flags: tuple[str, ...] = ()
    error: str | None = None
    correct_kernelbench: bool | None = None  # within upstream KernelBench's atol = rtol = 1e-2
    # The checks on transformed inputs and perturbed parameters (oracle.py): "name: outcome" each.
    transforms: tuple[str, ...] = ()


@dataclass(frozen=True)
class Degeneracy:
    """A problem whose reference's outputs do not depend on some of its inputs (dependence.py)."""

    ignored_inputs: tuple[str, ...]  # "input 0 (x, (128, 3):float32)" each
    constant_output: bool  # no output depends on any input: the floor is the output write alone
    ignored_bytes: int = 0  # bytes of one input set no output depends on


@dataclass(frozen=True)
class TimingResult:
    method: str  # "cuda_events" or "perf_counter"
    reps: int
    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    std_ms: float
    input_sets: int
    l2_flushed: bool
    wall_ms: float | None = None  # per call, back to back, after a device-wide synchronise
    samples_ms: tuple[float, ...] = ()
    # What the verdict's time is: max(in-process median, the parent's own wall figure per call).
    # The in-process figures come from the candidate's process and could be forged; the wall
    # figure is the parent's clock around calls whose last outputs arrive in the reply.
    event_median_ms: float | None = None
    # "events", "wall" or "judged": which figure the time is ("judged": the floor set by the passes
    # whose every call's outputs were judged, ``judged_ms`` per call over never-seen values).
    bounded_by: str = "events"
    judged_ms: float | None = None  # the fastest pass over never-seen values, every call judged
    seen_ms: float | None = None  # the median pass over the timing buffers on values just seen
    # Timed under Triton's CPU interpreter: minimally, and what it measures is the interpreter, not
    # the kernel (reports keep such times out of speedup aggregates and show them apart).
    interpreted: bool = False

    @property
    def spread(self) -> float:
        """Interquartile range over median: the noise band of this measurement."""
        return self.iqr_ms / self.median_ms if self.median_ms > 0 else 0.0


Interval = tuple[float, float]


@dataclass(frozen=True, init=False)
class Speedups:
    """The candidate's speedup (baseline time / candidate time) against each baseline, keyed by the
    baseline's name (``harness.baselines.BASELINES``: a name added there is a speedup here, in the
    verdict's JSON, the rewards and the reports), the fastest baseline's as ``best``, and the 95%
    interval of each ratio where the measurement gave one (``intervals``, by name; ``"best"``: the
    fastest baseline's).

    ``Speedups(eager=2.0, best=2.0)`` and ``Speedups({"eager": 2.0}, best=2.0)`` make the same record;
    ``speedups.eager`` reads a ratio by name (None when not measured). A baseline without a figure is
    absent from ``ratios``, so a record compares equal however its missing figures were spelt.
    """

    ratios: Mapping[str, float]
    best: float | None
    intervals: Mapping[str, Interval]

    def __init__(self, ratios: Mapping[str, float | None] | None = None, *, best: float | None = None,
                 intervals: Mapping[str, Sequence[float]] | None = None, **by_name: float | None) -> None:
        given = {**(ratios or {}), **by_name}
        names = speedup_names()
        _known(given, names[:-1])
        _known(intervals or {}, names)
        bounds = {name: (float(low), float(high)) for name, (low, high) in (intervals or {}).items()}
        object.__setattr__(self, "ratios", {name: float(given[name]) for name in names if given.get(name) is not None})
        object.__setattr__(self, "best", None if best is None else float(best))
        object.__setattr__(self, "intervals", {name: bounds[name] for name in names if name in bounds})

    def __getattr__(self, name: str) -> float | None:
        # Only reached when ordinary lookup fails: a baseline's name reads its ratio. Read from
        # __dict__ so that a copy or unpickle, which asks before ``ratios`` is set, cannot recurse.
        if name in baselines.BASELINES:
            return self.__dict__.get("ratios", {}).get(name)
        raise AttributeError(name)

    def ratio(self, name: str) -> float | None:
        """The speedup against ``name`` (a baseline or ``best``) as measured, or None."""
        _known((name,), speedup_names())
        return self.best if name == "best" else self.ratios.get(name)

    def usable(self, baseline: str) -> float | None:
        """The speedup against ``baseline`` (a name, or ``best``) when it is finite and positive, else None."""
        value = self.ratio(baseline)
        return value if value is not None and math.isfinite(value) and value > 0 else None

    def interval(self, name: str) -> Interval | None:
        """The 95% interval of the speedup against ``name`` (a baseline or ``best``), if measured."""
        _known((name,), speedup_names())
        return self.intervals.get(name)

    def to_json(self) -> dict[str, Any]:
        """Flat, as verdict files have always been read (``verdict["speedup"]["eager"]``): every
        baseline's name (null when not measured), ``best``, and ``intervals`` as [low, high] pairs."""
        flat: dict[str, Any] = {name: _finite(self.ratios.get(name)) for name in baselines.BASELINES}
        flat["best"] = _finite(self.best)
        # A bound that is not finite has no JSON spelling and bounds nothing: that interval is left out.
        flat["intervals"] = {name: [low, high] for name, (low, high) in self.intervals.items()
                             if math.isfinite(low) and math.isfinite(high)}
        return flat

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Speedups:
        """Inverse of ``to_json``; also reads files from before intervals were measured. A name that is
        no longer a baseline is dropped: nothing could compare it with anything measured now."""
        data, names = data or {}, speedup_names()
        intervals = {name: pair for name, pair in (data.get("intervals") or {}).items()
                     if name in names and _numbers(pair, 2)}
        return cls({name: data.get(name) for name in names[:-1]}, best=data.get("best"), intervals=intervals)


def speedup_names() -> tuple[str, ...]:
    """Every name a speedup is reported against: the baselines, then ``best``. Read when asked, so
    that the names in ``harness.baselines`` are the only list."""
    return (*baselines.BASELINES, "best")


def _known(names: Iterable[str], allowed: Sequence[str]) -> None:
    unknown = sorted(set(names) - set(allowed))
    if unknown:
        raise ValueError(f"unknown baseline {', '.join(map(repr, unknown))} (one of {', '.join(allowed)})")


def _numbers(value: Any, n: int) -> bool:
    return isinstance(value, (list, tuple)) and len(value) == n and all(isinstance(x, (int, float)) for x in value)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


@dataclass(frozen=True)
class SideBySide:
    """A speedup measured with candidate and baseline in the same rounds (policy.paired_speedup)."""

    speedup: float  # the median per-round ratio, held as the candidate's time is
    low: float
    high: float
    rounds: int  # valid rounds
    calls: int = 0  # calls of each side's burst in a round (the same on both sides)
    pairs: tuple[tuple[float, float], ...] = ()  # per round: (candidate, baseline) ms per call


@dataclass(frozen=True)
class Verdict:
    status: Status
    correct: bool
    flags: tuple[str, ...]
    error: str | None
    max_abs_err: float | None
    rel_err: float | None
    ref_ms: float | None
    cand_ms: float | None
    speedup: Speedups
    sol_fraction: float | None
    problem: str = ""
    candidate: str = ""
    device: str = "cpu"
    baselines_ms: dict[str, float | None] = field(default_factory=dict)
    build: BuildResult | None = None
    check: CheckResult | None = None
    timing: TimingResult | None = None
    sol: dict[str, Any] | None = None
    seconds: float = 0.0
    # Wall seconds per stage of the evaluation (workers, setup, build, lock wait, trials, timing,
    # baselines, roofline, integrity): where an evaluation's time went.
    phases: dict[str, float] = field(default_factory=dict)
    # Per worker request ("reference.baselines", "candidate.run", ...): count, seconds from send to
    # answer, seconds inside the worker's handler. Finer than ``phases``, for cost analysis.
    requests: dict[str, dict[str, float]] = field(default_factory=dict)
    cause: Cause = Cause.NONE
    # The sandbox the candidate ran in (mechanism, what it isolated, what was missing).
    sandbox: dict[str, Any] | None = None
    # The deadlines this evaluation ran under, in seconds (derived from the reference's own cost).
    limits: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    # The expert baseline's choice: operation, the implementation chosen (library, version, entry
    # point) and why each other one was not (unavailable, incorrect, slower); None when not sought.
    expert: dict[str, Any] | None = None
    # How tensors crossed between the workers: "cuda" (device packs, nothing through host memory)
    # or "memfd" (sealed host memory files); the notes say why device packs were not used.
    datapath: str = ""
    # When each phase ran: (phase, start, end) in Unix seconds, for lining evaluations that ran
    # beside each other up against one another ("measuring": a section with the device alone).
    spans: tuple[tuple[str, float, float], ...] = ()
    # Set when the problem's outputs ignore some of its inputs (a note says the same).
    degenerate_problem: Degeneracy | None = None

    def to_json(self) -> dict[str, Any]:
        return to_jsonable(self)


def to_jsonable(value: Any) -> Any:
    """Dataclasses, enums and tuples to plain JSON types (recursively)."""
    if isinstance(value, Speedups):  # flat by baseline name, as verdict files are read
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, float) and value != value:  # NaN is not valid JSON
        return None
    return value


def verdict_from_json(data: dict[str, Any]) -> Verdict:
    """Inverse of ``Verdict.to_json`` (used to resume a run from its verdict files)."""

    def sub(cls, key):
        raw = data.get(key)
        if raw is None:
            return None
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in raw.items() if k in names}
        return cls(**kwargs)

    return Verdict(
        status=Status(data["status"]),
        correct=bool(data["correct"]),
        flags=tuple(data.get("flags") or ()),
        error=data.get("error"),
        max_abs_err=data.get("max_abs_err"),
        rel_err=data.get("rel_err"),
        ref_ms=data.get("ref_ms"),
        cand_ms=data.get("cand_ms"),
        speedup=Speedups.from_json(data.get("speedup")),
        sol_fraction=data.get("sol_fraction"),
        problem=data.get("problem", ""),
        candidate=data.get("candidate", ""),
        device=data.get("device", "cpu"),
        baselines_ms=dict(data.get("baselines_ms") or {}),
        build=sub(BuildResult, "build"),
        check=sub(CheckResult, "check"),
        timing=sub(TimingResult, "timing"),
        sol=data.get("sol"),
        seconds=float(data.get("seconds") or 0.0),
        phases=dict(data.get("phases") or {}),
        requests=dict(data.get("requests") or {}),
        cause=Cause(data.get("cause") or "none"),
        sandbox=data.get("sandbox"),
        limits=dict(data.get("limits") or {}),
        notes=tuple(data.get("notes") or ()),
        expert=data.get("expert"),
        datapath=data.get("datapath") or "",
        spans=tuple(tuple(span) for span in data.get("spans") or ()),
        degenerate_problem=sub(Degeneracy, "degenerate_problem"),
    )
