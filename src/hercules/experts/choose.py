"""The expert for one problem: every implementation of its operation built, judged against the
float64 truth, timed briefly; the fastest correct one is kept (runs inside the reference worker)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from hercules.experts.registry import Kernel, implementations
from hercules.harness import timing

# Choosing runs outside the exclusive section, beside other evaluations' untimed work: a short
# look is enough to rank implementations whose times differ by more than that noise; the chosen
# one is then timed like every baseline.
CHOICE_BUDGET_S = 0.05
# Triton's CPU interpreter runs a kernel program by program in NumPy: Liger's softmax on a 16x128
# input takes well under a second there, on the suite's 4096x4096 one minutes per call. On the CPU a
# Triton expert is tried only up to this size of one input set.
INTERPRETED_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Considered:
    name: str
    distribution: str
    version: str | None
    entry: str
    status: str  # "chosen", "correct" (slower), "incorrect", "unavailable"
    detail: str = ""
    ms: float | None = None


def choice_time_ms(kernel: Kernel, sets: Sequence[tuple], device: torch.device) -> float:
    """The slower of the events' median and a back-to-back burst on the host clock, per call.

    Events with an L2 flush between calls hide host work (the device waits on the flush while the
    host issues), and the baseline is timed on the parent's clock with it: a pinned SDPA backend
    read 0.013 ms in events but 0.039 ms as a baseline on the H200, its context manager per call."""
    result = timing.time_callable(kernel, sets, device=device, budget_s=CHOICE_BUDGET_S, warmup_s=0.01,
                                  wall_check=True)
    return max(result.median_ms, result.wall_ms or 0.0)


def choose(op: str, model: torch.nn.Module, sets: Sequence[tuple], judge: Callable[[Any], str | None],
           time_ms: Callable[[Kernel], float]) -> tuple[Kernel | None, dict[str, Any]]:
    """(kernel, report): ``judge(outputs)`` says what is wrong with one call's outputs on
    ``sets[0]`` (None: correct); ``time_ms(kernel)`` its time over ``sets``."""
    found: list[Considered] = []
    kernels: dict[str, Kernel] = {}
    tensors = [v for v in sets[0] if isinstance(v, torch.Tensor)]
    on_cpu = bool(tensors) and all(t.device.type == "cpu" for t in tensors)
    set_bytes = timing.set_bytes(tensors)
    for impl in implementations(op):
        base = dict(name=impl.name, distribution=impl.distribution, version=impl.version(), entry=impl.entry)
        if impl.triton and on_cpu and set_bytes > INTERPRETED_MAX_BYTES:
            found.append(Considered(**base, status="unavailable",
                                    detail=f"a Triton kernel, interpreted on the CPU: tried up to "
                                           f"{INTERPRETED_MAX_BYTES / 1e6:.1f} MB of inputs, these are "
                                           f"{set_bytes / 1e6:.1f} MB"))
            continue
        try:
            kernel = impl.make(model)
            with torch.no_grad():
                outputs = kernel(*sets[0])
        except Exception as exc:  # noqa: BLE001 -- a missing library or a refused device is a reason, not a failure
            found.append(Considered(**base, status="unavailable", detail=f"{type(exc).__name__}: {exc}"[:300]))
            continue
        wrong = judge(outputs)
        if wrong:
            found.append(Considered(**base, status="incorrect", detail=wrong[:300]))
            continue
        try:
            with torch.no_grad():
                ms = time_ms(kernel)
        except Exception as exc:  # noqa: BLE001
            found.append(Considered(**base, status="unavailable", detail=f"timing: {type(exc).__name__}: {exc}"[:300]))
            continue
        found.append(Considered(**base, status="correct", ms=ms))
        kernels[impl.name] = kernel
    usable = [c for c in found if c.status == "correct"]
    best = min(usable, key=lambda c: c.ms) if usable else None
    report = {"op": op, "chosen": None, "considered": []}
    for c in found:
        if best is not None and c is best:
            c = Considered(**{**asdict(c), "status": "chosen"})
            report["chosen"] = asdict(c)
        report["considered"].append(asdict(c))
    return (kernels[best.name] if best is not None else None), report


def summary(report: dict[str, Any]) -> str:
    """One line: what was chosen, and why each other implementation was not."""
    parts = []
    for c in report.get("considered", []):
        version = f" {c['version']}" if c.get("version") else ""
        if c["status"] in ("chosen", "correct"):
            parts.append(f"{c['name']} ({c['distribution']}{version}) {c['status']}, {c['ms']:.4f} ms")
        else:
            parts.append(f"{c['name']} {c['status']}: {c['detail']}")
    return f"expert for {report.get('op')}: " + "; ".join(parts)
