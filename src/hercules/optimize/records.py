"""Frozen records passed between the stages of the optimisation loop."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from hercules.harness.records import Status, Verdict
from hercules.problems.model import code_hash

Objective = Literal["eager", "best"]

# Statuses a variant can have beyond the evaluation core's: the reference itself (never
# evaluated: it is the 1.0x baseline by definition) and a completion without usable code.
REFERENCE = "reference"
NO_CODE = "no_code"


@dataclass(frozen=True)
class Slot:
    """One place in the trajectory: round 0 holds the seeds, rounds 1.. the model's samples."""

    problem: str
    round: int
    sample: int

    @property
    def name(self) -> str:
        return f"r{self.round}s{self.sample}"


@dataclass(frozen=True)
class Variant:
    slot: Slot
    origin: str  # "reference", "seed", "model", "replay"
    code: str
    status: str  # a verdict status, REFERENCE or NO_CODE
    reason: str | None = None  # why it failed or was flagged (shown to the model)
    verdict: Verdict | None = None
    tags: tuple[str, ...] = ()
    reused: bool = False  # the verdict was taken from an identical earlier variant

    @property
    def name(self) -> str:
        return self.slot.name

    @property
    def code_hash(self) -> str:
        return code_hash(self.code)

    @property
    def honest(self) -> bool:
        """The only variants that may be best: status ok and no flag at all."""
        v = self.verdict
        return v is not None and v.status is Status.OK and not v.flags

    def speedup(self, objective: Objective = "eager") -> float | None:
        if self.status == REFERENCE:
            return 1.0 if objective == "eager" else None
        if self.verdict is None:
            return None
        return self.verdict.speedup.usable(objective)

    @property
    def flags(self) -> tuple[str, ...]:
        return self.verdict.flags if self.verdict else ()


@dataclass(frozen=True)
class Completion:
    """One answer of a model backend (or a replayed program), with what it cost."""

    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    attempts: int = 1
    tokens_estimated: bool = False  # the server reported no usage; estimated from the text
    error: str | None = None  # the backend failed; text is empty

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Prompt:
    system: str
    user: str
    exemplars: tuple[str, ...] = ()  # names of the variants shown

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


@dataclass(frozen=True)
class ProblemResult:
    """What ``hercules optimize --json`` reports per problem."""

    name: str
    best_status: str | None
    best_speedup: float | None
    best_code_path: str | None
    best_variant: str | None
    best_speedups: dict[str, float | None] = field(default_factory=dict)
    # The 95% interval of each of the best's speedups, where it was measured side by side with
    # its baseline: a speedup is shown with its uncertainty (a difference inside it is a tie).
    best_intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    rounds: int = 0
    variants: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    stop_reason: str = ""
    best_so_far: tuple[float | None, ...] = ()  # per round, 0 = seeds
    tags: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "best_status": self.best_status,
            "best_speedup": self.best_speedup,
            "best_code_path": self.best_code_path,
            "best_variant": self.best_variant,
            "best_speedups": self.best_speedups,
            "best_intervals": {name: list(ends) for name, ends in self.best_intervals.items()},
            "rounds": self.rounds,
            "variants": self.variants,
            "statuses": self.statuses,
            "stop_reason": self.stop_reason,
            "best_so_far": list(self.best_so_far),
            "tags": list(self.tags),
        }
