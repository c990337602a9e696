"""Output comparison, run in the parent on what the two workers sent back.

The candidate is judged against the float64 reference (the problem's Model run on upcast inputs
and weights) whenever the model runs in float64, otherwise against the problem-dtype reference.
Correct means, for every output: exactly a torch.Tensor, the reference's shape and dtype, finite
where the reference is finite, elementwise within atol + rtol * |ref|, and a relative error norm
||out - ref|| / ||ref|| within rel_tol, so that a (near) zero output cannot pass on a tiny reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from hercules.harness.records import Flag, Tolerance
from hercules.problems.model import Problem

# Downcast thresholds: rounding fp32 data to fp16 or TF32 costs ~2.8e-4 in relative norm
# (unit roundoff 4.9e-4 / sqrt(3)), honest fp32 kernels land near 1e-7..1e-5; 1e-4 separates them.
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float32": Tolerance(atol=1e-3, rtol=1e-3, rel_tol=1e-3, downcast_ratio=50.0, downcast_floor=1e-4),
    "float64": Tolerance(atol=1e-7, rtol=1e-7, rel_tol=1e-7, downcast_ratio=50.0, downcast_floor=1e-9),
    "float16": Tolerance(atol=1e-2, rtol=1e-2, rel_tol=1e-2, downcast_ratio=10.0, downcast_floor=2e-3),
    "bfloat16": Tolerance(atol=2e-2, rtol=2e-2, rel_tol=2e-2, downcast_ratio=10.0, downcast_floor=1.6e-2),
}


# Upstream KernelBench's eval.py: torch.allclose(ref, out, atol=1e-2, rtol=1e-2) against the
# problem-dtype reference, nothing else. Reported beside the strict verdict so published results
# can be reproduced side by side; never what decides a verdict.
KERNELBENCH_TOLERANCE = Tolerance(atol=1e-2, rtol=1e-2, rel_tol=float("inf"), downcast_ratio=float("inf"),
                                  downcast_floor=float("inf"))


def within_allclose(outputs: list[Any], types: list[str], expected: list[torch.Tensor], tol: Tolerance) -> bool:
    """Upstream's rule: every output exactly a tensor of the reference's shape, allclose to it."""
    if len(outputs) != len(expected):
        return False
    for out, kind, ref in zip(outputs, types, expected):
        if kind != "torch.Tensor" or not isinstance(out, torch.Tensor) or out.shape != ref.shape:
            return False
        if out.dtype != ref.dtype:
            return False
        if not torch.allclose(out.double() if out.is_floating_point() else out,
                              ref.double() if ref.is_floating_point() else ref, atol=tol.atol, rtol=tol.rtol):
            return False
    return True


def tolerance_for(problem: Problem) -> Tolerance:
    base = DEFAULT_TOLERANCES.get(problem.dtype_name, DEFAULT_TOLERANCES["float32"])
    overrides = {k: float(problem.metadata[k]) for k in ("atol", "rtol", "rel_tol") if k in problem.metadata}
    return Tolerance(**{**base.__dict__, **overrides})


@dataclass
class Comparison:
    ok: bool = True
    max_abs_err: float = 0.0
    rel_err: float = 0.0
    flags: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)

    def fail(self, message: str, flag: Flag | None = None) -> None:
        self.ok = False
        self.problems.append(message)
        if flag is not None:
            self.flags.add(flag.value)


def compare_outputs(outputs: list[Any], types: list[str], expected: list[torch.Tensor],
                    specs: list[dict[str, Any]], tol: Tolerance,
                    ref_errs: list[float] | None = None) -> Comparison:
    """``ref_errs``: per output, the problem-dtype reference's own relative error against the
    float64 truth (None without a float64 run)."""
    result = Comparison()
    if len(outputs) != len(expected):
        result.fail(f"returned {len(outputs)} outputs, reference returns {len(expected)}", Flag.SHAPE_MISMATCH)
        return result
    for index, (out, kind, ref, spec) in enumerate(zip(outputs, types, expected, specs)):
        where = f"output {index}"
        if out is None or kind != "torch.Tensor":
            subclass = kind.startswith("subclass:")
            result.fail(f"{where} is {kind}, not exactly torch.Tensor", Flag.TENSOR_SUBCLASS if subclass else None)
            continue
        if list(out.shape) != list(spec["shape"]):
            result.fail(f"{where} has shape {list(out.shape)}, expected {spec['shape']}", Flag.SHAPE_MISMATCH)
            continue
        if str(out.dtype).replace("torch.", "") != spec["dtype"]:
            result.fail(f"{where} has dtype {out.dtype}, expected {spec['dtype']}", Flag.SHAPE_MISMATCH)
            continue
        _compare_values(result, where, out, ref, tol, ref_errs[index] if ref_errs and index < len(ref_errs) else None)
    return result


def _compare_values(result: Comparison, where: str, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance,
                    ref_err: float | None = None) -> None:
    if not (out.is_floating_point() or out.is_complex()):
        if not torch.equal(out.to(ref.dtype) if ref.dtype != out.dtype else out, ref):
            result.fail(f"{where}: integer values differ")
        return
    cand = out.double()
    truth = ref.double()
    finite = torch.isfinite(truth)
    # Almost always every reference value is finite: then no mask is applied, since boolean
    # indexing copies both tensors (1.5 s of a 2-core machine's 14 s evaluation of an 8M-element output).
    all_finite = bool(finite.all())
    bad = ~torch.isfinite(cand)
    if not all_finite:
        bad &= finite
    if bad.any():
        # NaN is what the allocator was poisoned with: most often memory the candidate never wrote.
        poisoned = Flag.FOREIGN_MEMORY if torch.isnan(cand[bad]).any() else None
        result.fail(f"{where}: {int(bad.sum())} NaN/Inf values where the reference is finite", poisoned)
        return
    if not all_finite:
        if not torch.equal(cand[~finite].nan_to_num(), truth[~finite].nan_to_num()):
            result.fail(f"{where}: non-finite values differ from the reference")
        cand, truth = cand[finite], truth[finite]
    diff = (cand - truth).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    scale = float(truth.norm())
    rel = float(diff.norm()) / scale if scale > 0 else float(diff.norm())
    result.max_abs_err = max(result.max_abs_err, max_abs)
    result.rel_err = max(result.rel_err, rel)
    if scale > 0 and float(cand.norm()) <= 1e-12 * scale:
        result.fail(f"{where}: output is zero where the reference is not", Flag.ZERO_OUTPUT)
        return
    outside = diff > truth.abs().mul_(tol.rtol).add_(tol.atol)
    if outside.any():
        result.fail(f"{where}: {int(outside.sum())} of {diff.numel()} values outside atol={tol.atol:g}, "
                    f"rtol={tol.rtol:g} (max abs error {max_abs:.3g})")
    elif rel > (bound := _norm_bound(tol, ref_err)):
        result.fail(f"{where}: relative error {rel:.3g} exceeds {bound:.3g}"
                    + (f" (the reference's own error is {ref_err:.3g})" if bound > tol.rel_tol else ""))


def _norm_bound(tol: Tolerance, ref_err: float | None) -> float:
    """rel_tol, unless the problem-dtype reference itself misses the float64 truth by more: an output
    that is zero in exact arithmetic (KernelBench level2_23: the mean of a GroupNorm output) has a
    truth of ~1e-17, and the problem's own fp32 reference misses it by a relative 1e8. There the
    bound follows the reference's own error, as the downcast check does, and the elementwise bound
    decides. Where the reference meets rel_tol the bound is rel_tol, never looser."""
    if ref_err is not None and ref_err > tol.rel_tol:
        return tol.downcast_ratio * ref_err
    return tol.rel_tol


def is_downcast(rel_err: float, ref_err: float | None, tol: Tolerance) -> bool:
    """Error far above what computing in the problem's own dtype gives (needs a float64 reference)."""
    if ref_err is None:
        return False
    return rel_err > max(tol.downcast_ratio * ref_err, tol.downcast_floor)
