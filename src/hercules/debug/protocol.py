"""Protocol A: how a fixer is run on a task, and what feedback it sees.

    n           attempts (independent samples) per task; pass@k needs n >= k
    iterations  fix -> build -> test rounds within one attempt (stops at the first pass)
    feedback    none | code | log | evidence | profile  (each level includes the ones before)
    history     how many earlier rounds of the attempt the prompt shows
    temperature, seed   passed to the model (scripted fixers ignore them)
    p           the gate threshold that stops an attempt and decides ``passed``

Written on the command line as ``n=2,iter=2,fb=log,hist=1,T=0.2,seed=0,p=0.7``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FEEDBACK_LEVELS = ("none", "code", "log", "evidence", "profile")
_KEYS = {"n": "attempts", "iter": "iterations", "fb": "feedback", "hist": "history", "T": "temperature",
         "seed": "seed", "p": "p"}


@dataclass(frozen=True)
class Protocol:
    attempts: int = 1
    iterations: int = 1
    feedback: str = "log"
    history: int = 1
    temperature: float = 0.0
    seed: int = 0
    p: float = 0.7

    def __post_init__(self):
        if self.feedback not in FEEDBACK_LEVELS:
            raise ValueError(f"feedback must be one of {', '.join(FEEDBACK_LEVELS)}, not {self.feedback!r}")
        if self.attempts < 1 or self.iterations < 1 or self.history < 0:
            raise ValueError("attempts and iterations must be >= 1, history >= 0")

    def describe(self) -> str:
        return (f"n={self.attempts},iter={self.iterations},fb={self.feedback},hist={self.history},"
                f"T={self.temperature:g},seed={self.seed},p={self.p:g}")

    @classmethod
    def parse(cls, text: str) -> Protocol:
        """``n=2,iter=2,fb=log`` (unnamed keys keep their defaults); ValueError on a bad key or value."""
        values: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, sep, raw = part.partition("=")
            if not sep or key.strip() not in _KEYS:
                raise ValueError(f"bad protocol item {part!r} (keys: {', '.join(_KEYS)})")
            name = _KEYS[key.strip()]
            kind = type(getattr(cls(), name))
            try:
                values[name] = kind(raw.strip())
            except ValueError:
                raise ValueError(f"bad value for {key.strip()}: {raw.strip()!r}") from None
        return cls(**values)


@dataclass(frozen=True)
class Round:
    """One earlier round of an attempt, as the prompt may show it."""

    code: str
    category: str
    reason: str
    log: str
    speedup: float | None = None
    metrics: str = ""  # measured figures shown at the ``profile`` level (see round_metrics)


@dataclass(frozen=True)
class FixRequest:
    instance: Any  # corpus.Instance
    current_code: str
    protocol: Protocol
    sample: int = 0
    iteration: int = 0
    rounds: tuple[Round, ...] = field(default_factory=tuple)


def _level(protocol: Protocol) -> int:
    return FEEDBACK_LEVELS.index(protocol.feedback)


def render_messages(request: FixRequest) -> list[dict[str, str]]:
    """Chat messages for a model fixer, with exactly the feedback the protocol allows."""
    inst = request.instance
    level = _level(request.protocol)
    parts = [inst.prompt.strip(), f"The file `{inst.solution_file}` currently fails. Current version:",
             f"```\n{request.current_code}\n```"]
    shown = request.rounds[-request.protocol.history:] if request.protocol.history else ()
    for i, r in enumerate(shown, 1):
        if level >= 1:
            parts.append(f"Earlier round {i}: code\n```\n{r.code}\n```")
        if level >= 2 and r.log:
            parts.append(f"Earlier round {i}: build/test log (tail)\n```\n{r.log[-4000:]}\n```")
        if level >= 3:
            parts.append(f"Earlier round {i}: classified failure: {r.category} ({r.reason})")
        if level >= 4 and r.speedup is not None:
            parts.append(f"Earlier round {i}: speedup over the reference: {r.speedup:.3f}x")
        if level >= 4 and r.metrics:
            parts.append(f"Earlier round {i}: measurements: {r.metrics}")
    parts.append(f"Return the complete corrected `{inst.solution_file}` in one fenced code block. "
                 "Keep it fast: a slow fallback does not count as a repair.")
    return [{"role": "system", "content": "You repair broken CUDA code."},
            {"role": "user", "content": "\n\n".join(parts)}]


def round_metrics(record: dict[str, Any]) -> str:
    """The measured figures of one round, for the ``profile`` feedback level: the gate's times and,
    where the evaluation core ran, its timing statistics and speed-of-light figures."""
    parts: list[str] = []
    gate = record.get("gate") or {}
    if gate.get("cand_ms") is not None:
        parts.append(f"candidate {gate['cand_ms']:.4f} ms ({gate.get('method')})")
    if gate.get("ref_ms") is not None:
        parts.append(f"reference {gate['ref_ms']:.4f} ms")
    verdict = (record.get("outcome") or {}).get("verdict") or {}
    timing = verdict.get("timing") or {}
    if timing.get("median_ms") is not None:
        parts.append(f"median {timing['median_ms']:.4f} ms, IQR {timing.get('iqr_ms') or 0:.4f} ms over "
                     f"{timing.get('reps')} repetitions")
    sol = verdict.get("sol") or {}
    if sol.get("sol_fraction") is not None:
        parts.append(f"{sol['sol_fraction']:.2f} of the speed of light ({sol.get('bound')}-bound: floor "
                     f"{sol.get('floor_ms', 0):.4f} ms for {sol.get('flops', 0):.3g} FLOP and "
                     f"{sol.get('min_bytes', 0):.3g} bytes)")
    return "; ".join(parts)
