"""The parent's side of judging a candidate's outputs: the reference worker compares them with the
truth; which calls of a burst are judged in full is drawn here, after the reply came back."""

from __future__ import annotations

from dataclasses import dataclass

from hercules.harness import requests
from hercules.harness.checks import is_downcast
from hercules.harness.decide import Finding
from hercules.harness.policy import drawn
from hercules.harness.protocol import CompareReply, PackReply
from hercules.harness.records import Flag, Tolerance
from hercules.harness.session import Session, close_fds

# Calls of each judged burst or pass judged in full (float64 truth, strict tolerance, precision
# floor), at positions drawn after the reply: a candidate that degrades one call in k of a pass
# escapes a pass with probability about (1 - 1/k) ** STRICT_CALLS_PER_BURST, and every evaluation
# runs several passes.
STRICT_CALLS_PER_BURST = 2


@dataclass(frozen=True)
class Judged:
    result: CompareReply
    # A call after the trials whose precision is far below the problem's dtype (fp16 GEMMs once
    # the trials are over): flagged like a trial's, which the trials' own check never saw.
    precision: Finding | None = None


@dataclass(frozen=True)
class Judge:
    session: Session
    tol: Tolerance
    strict: bool  # the strict tolerance mode: precision is judged
    dtype_name: str
    timeout_s: float

    def compare(self, seed: int | None, reply: PackReply, fds: list[int], what: str,
                seeds: list[int | None] | None = None, later: bool = False) -> Judged:
        """The reference worker judges a candidate's outputs against the truth for ``seed``, or, for
        a burst that returned every call's outputs, call after call against ``seeds``: there, the
        calls judged in full (float64 truth, the strict tolerance, the precision floor) are drawn
        here with ``secrets`` after the reply came back, so nothing the candidate sees tells it
        which; the others are judged against the problem-dtype reference, loosely (a float64
        truth per call made the CPU passes 2.4x slower). ``later``: a call after the trials, whose
        precision is checked here."""
        strict = None
        if seeds is not None:
            judged = [i for i, s in enumerate(seeds) if s is not None]
            strict = sorted(drawn(judged, STRICT_CALLS_PER_BURST))
        try:
            raw = self.session.call("reference",
                                    requests.Compare(seed=seed, seeds=seeds, strict=strict, layout=reply.layout,
                                                     types=list(reply.types)),
                                    self.timeout_s, what, tuple(fds))
        finally:
            close_fds(fds)
        result = CompareReply.parse(raw)
        rel, ref = (result.strict_rel_err, result.strict_ref_err) if strict else (result.rel_err, result.ref_err)
        if later and result.correct and self.strict and is_downcast(rel, ref, self.tol):
            return Judged(result, Finding(
                Flag.PRECISION_DOWNCAST.value,
                f"{what}: a call after the trials has relative error {rel:.2e} against float64, the "
                f"{self.dtype_name} reference itself {ref:.2e}"))
        return Judged(result)
