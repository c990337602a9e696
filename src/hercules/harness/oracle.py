"""Correctness beyond the problem's own distribution: which transformed inputs a problem admits,
and what a candidate that fails on one of them is.

The trials draw every input from the problem's ``get_inputs``; code that is right only there (a
softmax without the max subtraction, a LayerNorm that ignores its weight and bias) passes them.
After the trials the parent runs the same checks on transformed inputs (transforms.py) and, from
the start, on parameters drawn away from their defaults (perturb.py). A transform counts only
where it is meaningful for the problem: the problem-dtype reference must stay finite on it and
within its usual error of the float64 truth (``skip_reason``); otherwise even an exact
reimplementation of the reference could not be told apart from a wrong one there, and the verdict
says which transforms were left out and why. A candidate right in the trials and wrong on a
transform is flagged ``fragile_inputs`` with the transforms that broke it.

Everything here is pure (tests/harness/test_oracle.py); the figures come from the workers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hercules.harness.decide import Finding
from hercules.harness.records import Degeneracy, Flag, Tolerance
from hercules.harness.transforms import DESCRIPTIONS, TRANSFORMS

TRANSFORM_NAMES: tuple[str, ...] = tuple(TRANSFORMS)
PARAMETERS = "parameters"  # the perturbation of parameters and buffers, reported as a transform

# The reference's own error on a transform may exceed its error in the trials by this much (its
# error moves with the values: a shift of 100 rms costs an fp32 LayerNorm 1e-5 where randn costs
# 1e-7) or reach the tolerance it is judged at, whichever is larger, and still be meaningful.
USUAL_ERROR_RATIO = 10.0

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"

# Transforms that make values equal: every 16th one zero, the same extreme magnitude, or a shift
# by 100 rms that rounds neighbours within ulp(100 rms) together. An index output (argmax, argmin,
# top-k) then has ties, which the reference breaks its way and an honest kernel may break another:
# no transform for such outputs to be judged on. The scales keep every value's relative precision.
MAKE_TIES = frozenset({"zeros", "extremes", "shift"})


@dataclass(frozen=True)
class ReferenceOnTransform:
    """What the reference worker found running the problem's reference on a transform."""

    name: str
    error: str | None = None  # the reference raised
    has_truth: bool = True  # a float64 truth was computed
    nonfinite: int = 0  # values of the problem-dtype reference's outputs that are not finite
    ref_err: float | None = None  # its relative error against the float64 truth (worst output)

    @classmethod
    def from_reply(cls, name: str, reply: Mapping[str, Any]) -> ReferenceOnTransform:
        ref_err = reply.get("ref_err")
        return cls(name=name, error=reply.get("error") or None, has_truth=bool(reply.get("has_truth")),
                   nonfinite=int(reply.get("nonfinite") or 0),
                   ref_err=float(ref_err) if ref_err is not None else None)


@dataclass(frozen=True)
class TransformResult:
    name: str
    outcome: str  # PASSED, FAILED or SKIPPED
    why: str = ""  # what failed, or why the transform was left out


def has_integer_outputs(specs: Sequence[Mapping[str, Any]] | None) -> bool:
    """Whether any output (``specs``: the reference's shapes and dtype names) is not floating-point."""
    return any(not str(spec.get("dtype", "")).startswith(("float", "bfloat", "complex")) for spec in specs or ())


def skip_reason(found: ReferenceOnTransform, usual_err: float | None, tol: Tolerance,
                integer_outputs: bool = False) -> str | None:
    """Why the transform is not meaningful for this problem, or None when it is."""
    if integer_outputs and found.name in MAKE_TIES:
        return ("it makes values equal, and the problem's integer outputs (indices) would depend on how ties "
                "are broken")
    if found.error:
        return f"the reference raised on it ({found.error[:160]})"
    if not found.has_truth or found.ref_err is None:
        return "no float64 truth to judge it against"
    if found.nonfinite:
        return f"the problem-dtype reference is not finite there ({found.nonfinite} values)"
    if not math.isfinite(found.ref_err):
        return "the problem-dtype reference's error against float64 is not finite there"
    allowed = max(tol.rel_tol, USUAL_ERROR_RATIO * (usual_err or 0.0))
    if found.ref_err > allowed:
        usual = f"{usual_err:.2e}" if usual_err is not None else "unknown"
        return (f"the problem-dtype reference misses the float64 truth by {found.ref_err:.2e} there, over "
                f"{allowed:.2e} (its usual error {usual} x {USUAL_ERROR_RATIO:g}, or the tolerance)")
    return None


def describe(name: str) -> str:
    if name == PARAMETERS:
        return "parameters and buffers drawn away from their default initialisation"
    return DESCRIPTIONS.get(name, name)


def parameters_result(setup: Mapping[str, Any]) -> TransformResult | None:
    """The reference's setup reply on the perturbation of parameters: used (the trials run with
    them; ``after_trials`` says how that went), left out (why), or None (nothing to perturb, or
    not asked)."""
    if setup.get("perturbed"):
        return TransformResult(PARAMETERS, PASSED, IN_TRIALS)
    if setup.get("why"):
        return TransformResult(PARAMETERS, SKIPPED, str(setup["why"]))
    return None


IN_TRIALS = "the trials ran with them"


def after_trials(parameters: TransformResult, trials_correct: bool) -> TransformResult:
    """The perturbation's outcome once the trials, which ran with it, are judged: a candidate
    wrong there is ``incorrect`` (not fragile), and this says the parameters were not defaults."""
    if parameters.outcome == SKIPPED or trials_correct:
        return parameters
    return TransformResult(PARAMETERS, FAILED, IN_TRIALS)


def trials_note(parameters: TransformResult | None) -> str | None:
    """For a candidate wrong in the trials that ran with perturbed parameters."""
    if parameters is None or parameters.outcome != FAILED:
        return None
    return ("the trials ran with parameters and buffers drawn away from their default initialisation "
            "(the same draw in the reference): a kernel that ignores them is wrong there")


def fragile_finding(results: Sequence[TransformResult]) -> Finding | None:
    """``fragile_inputs`` naming every transform the candidate failed, with the first failure's
    evidence; None when it failed none."""
    failed = [r for r in results if r.outcome == FAILED and r.name != PARAMETERS]
    if not failed:
        return None
    first = failed[0]
    names = ", ".join(r.name for r in failed)
    return Finding(Flag.FRAGILE_INPUTS.value,
                   f"right on the problem's own inputs, wrong on transformed ones: {names} "
                   f"({first.name}: {describe(first.name)}: {first.why[:300]})")


def skipped_note(results: Sequence[TransformResult]) -> str | None:
    skipped = [r for r in results if r.outcome == SKIPPED]
    if not skipped:
        return None
    return "transforms not meaningful for this problem, left out: " + "; ".join(
        f"{r.name}: {r.why}" for r in skipped)


def summary(results: Sequence[TransformResult]) -> tuple[str, ...]:
    """One line per transform for the check record: ``name: outcome``."""
    return tuple(f"{r.name}: {r.outcome}" for r in results)


# ---- degenerate problems ------------------------------------------------------------------


def degeneracy(reply: Mapping[str, Any]) -> Degeneracy | None:
    """The reference worker's dependence reply as a record; None when every testable input matters."""
    ignored = [int(i) for i in reply.get("ignored") or ()]
    if not ignored:
        return None
    names = list(reply.get("names") or ())
    signature = list(reply.get("signature") or ())

    def label(i: int) -> str:
        name = names[i] if i < len(names) else ""
        sig = signature[i] if i < len(signature) else ""
        return f"input {i}" + (f" ({name}" + (f", {sig})" if sig else ")") if name else (f" ({sig})" if sig else ""))

    return Degeneracy(ignored_inputs=tuple(label(i) for i in ignored), constant_output=bool(reply.get("constant")),
                      ignored_bytes=int(reply.get("ignored_bytes") or 0))


def degeneracy_note(found: Degeneracy) -> str:
    if found.constant_output:
        return ("degenerate problem: the reference's outputs do not depend on its inputs ("
                + ", ".join(found.ignored_inputs) + " ignored); the speed-of-light floor is the output write alone")
    return ("degenerate problem: the reference's outputs do not depend on " + ", ".join(found.ignored_inputs)
            + "; the speed-of-light floor leaves it out")
