"""The requests the parent sends its workers: one frozen record per operation, shared by both ends.

A request travels as a plain dict (``message()``: only numbers, strings, booleans, lists and dicts,
so ``torch.load(weights_only=True)`` reads it) and is rebuilt on the other side by ``parse``, which
refuses an unknown operation, a field the record does not have and a missing one: a field renamed
at one end fails a unit test (tests/harness/test_requests.py), not a GPU run. Descriptors travel
beside the message (``fds``), never in it. The replies are ``protocol.py``'s records.

An operation both workers answer (``burst``: a baseline's or the candidate's; ``datapath``) has one
record with the fields of both; a field one side does not use keeps its default.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, TypeVar

R = TypeVar("R", bound="Request")

REQUESTS: dict[str, type["Request"]] = {}
TRANSPORT = frozenset({"op", "fds", "_fds"})  # filled by the channel, not by a request


class RequestError(ValueError):
    """A message that is not a request this module knows, field by field."""


@dataclass(frozen=True)
class Request:
    op: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.op:
            REQUESTS[cls.op] = cls

    def message(self) -> dict[str, Any]:
        return {"op": self.op, **{f.name: getattr(self, f.name) for f in fields(self)}}


def parse(message: dict[str, Any]) -> Request:
    """The request a message carries; ``RequestError`` names what does not fit."""
    kind = REQUESTS.get(str(message.get("op")))
    if kind is None:
        raise RequestError(f"unknown operation {message.get('op')!r}")
    names = {f.name for f in fields(kind)}
    extra = sorted(set(message) - names - TRANSPORT)
    if extra:
        raise RequestError(f"'{kind.op}' has no field {', '.join(extra)}")
    missing = sorted(f.name for f in fields(kind)
                     if f.name not in message and f.default is MISSING and f.default_factory is MISSING)
    if missing:
        raise RequestError(f"'{kind.op}' misses {', '.join(missing)}")
    return kind(**{name: message[name] for name in names if name in message})


# ---- both workers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Datapath(Request):
    op: ClassVar[str] = "datapath"
    medium: str


@dataclass(frozen=True)
class Reserve(Request):
    """Allocate now, off the clock, the device pack of at most ``nbytes`` that the next timed
    request's reply will carry (``device_pack.reserve``); nothing where packs are host files."""

    op: ClassVar[str] = "reserve"
    nbytes: int


@dataclass(frozen=True)
class Burst(Request):
    """Back-to-back calls: the candidate's (``every_call``: every call's outputs back, into the
    destination ``into`` when given), or a baseline's (``name``), or, with ``calls = 0``, the
    calibration's empty burst (outputs shaped like ``seed``'s, ``outputs_of`` calls of them, the
    fresh pass's values received when ``layout`` is given)."""

    op: ClassVar[str] = "burst"
    calls: int
    every_call: bool = False
    into: dict[str, Any] | None = None
    name: str | None = None
    seed: int | None = None
    layout: dict[str, Any] | None = None
    outputs_of: int = 1


# ---- the reference worker ---------------------------------------------------------------------


@dataclass(frozen=True)
class Setup(Request):
    op: ClassVar[str] = "setup"
    code: str
    device: str
    dtype: str
    init_seed: int
    tolerance: dict[str, float]
    perturb_seed: int | None = None


@dataclass(frozen=True)
class Inputs(Request):
    op: ClassVar[str] = "inputs"
    seed: int
    transform: str | None = None


@dataclass(frozen=True)
class InputsMany(Request):
    op: ClassVar[str] = "inputs_many"
    seeds: list[int]


@dataclass(frozen=True)
class DatapathOffer(Request):
    op: ClassVar[str] = "datapath_offer"
    seed: int


@dataclass(frozen=True)
class DatapathConfirm(Request):
    op: ClassVar[str] = "datapath_confirm"
    seed: int
    layout: dict[str, Any]


@dataclass(frozen=True)
class Footprint(Request):
    op: ClassVar[str] = "footprint"
    limit_s: float = 2.0


@dataclass(frozen=True)
class TransformCheck(Request):
    op: ClassVar[str] = "transform_check"
    seed: int
    transform: str


@dataclass(frozen=True)
class Dependence(Request):
    op: ClassVar[str] = "dependence"
    seeds: list[int]


@dataclass(frozen=True)
class Specs(Request):
    op: ClassVar[str] = "specs"
    seed: int


@dataclass(frozen=True)
class Compare(Request):
    """The candidate's outputs (a pack) against the truth of ``seed``, or call after call against
    ``seeds`` (None: not judged), the calls ``strict`` judged in full."""

    op: ClassVar[str] = "compare"
    layout: dict[str, Any]
    types: list[str]
    seed: int | None = None
    seeds: list[int | None] | None = None
    strict: list[int] | None = None


@dataclass(frozen=True)
class InputsIntact(Request):
    op: ClassVar[str] = "inputs_intact"
    seeds: list[int]
    layout: dict[str, Any]


@dataclass(frozen=True)
class BaselineCompile(Request):
    op: ClassVar[str] = "baseline_compile"
    name: str
    seed: int


@dataclass(frozen=True)
class BaselinePrepare(Request):
    op: ClassVar[str] = "baseline_prepare"
    name: str
    seeds: list[int]
    expert_op: str | None = None


@dataclass(frozen=True)
class BaselineTime(Request):
    op: ClassVar[str] = "baseline_time"
    name: str
    budget_s: float
    warmup_s: float


@dataclass(frozen=True)
class Release(Request):
    op: ClassVar[str] = "release"
    name: str


@dataclass(frozen=True)
class Probe(Request):
    op: ClassVar[str] = "probe"


@dataclass(frozen=True)
class Roofline(Request):
    op: ClassVar[str] = "roofline"
    seed: int


@dataclass(frozen=True)
class Ceilings(Request):
    op: ClassVar[str] = "ceilings"
    device: str


# ---- the candidate worker ---------------------------------------------------------------------


@dataclass(frozen=True)
class Ping(Request):
    op: ClassVar[str] = "ping"


@dataclass(frozen=True)
class DatapathEcho(Request):
    op: ClassVar[str] = "datapath_echo"
    layout: dict[str, Any]


@dataclass(frozen=True)
class Import(Request):
    op: ClassVar[str] = "import"
    code: str
    path: str


@dataclass(frozen=True)
class Prepare(Request):
    op: ClassVar[str] = "prepare"
    device: str
    dtype: str
    compiler: bool = True


@dataclass(frozen=True)
class Build(Request):
    op: ClassVar[str] = "build"
    code: str
    path: str
    device: str
    dtype: str
    init_inputs: list[Any]
    init_seed: int
    perturb_seed: int | None = None
    trace_lines: bool = False
    compiler: bool = True


@dataclass(frozen=True)
class Run(Request):
    op: ClassVar[str] = "run"
    layout: dict[str, Any]
    specs: list[dict[str, Any]] | None = None
    trace: bool = False
    first: bool = False


@dataclass(frozen=True)
class Time(Request):
    op: ClassVar[str] = "time"
    budget_s: float
    warmup_s: float
    min_reps: int = 5
    keep_sets: bool = False


@dataclass(frozen=True)
class Buffers(Request):
    op: ClassVar[str] = "buffers"


@dataclass(frozen=True)
class Refresh(Request):
    op: ClassVar[str] = "refresh"
    index: int
    layout: dict[str, Any] | None


@dataclass(frozen=True)
class Single(Request):
    op: ClassVar[str] = "single"
    index: int
    specs: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class FreshBurst(Request):
    op: ClassVar[str] = "fresh_burst"
    layout: dict[str, Any]
    per_set: int
    into: dict[str, Any] | None = None


@dataclass(frozen=True)
class Streams(Request):
    op: ClassVar[str] = "streams"


@dataclass(frozen=True)
class Integrity(Request):
    op: ClassVar[str] = "integrity"
