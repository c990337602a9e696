"""Speed of light: how close a candidate's time comes to the fastest any honest candidate could be.

A fraction of the speed of light is floor time / measured time, and it may only exceed 1 when
the candidate is not honest (or a ceiling is wrong). That needs both halves to be bounds:

- Ceilings are upper bounds: per (device, dtype), max(datasheet peak, best measured rate). A
  measured matmul rate alone is not one (on the H200 a large bf16 product runs near 790 of the
  989.4 dense TFLOP/s), and beating it is no sign of cheating.
- The floor's work must be a lower bound. The fewest bytes (inputs, outputs and parameters once)
  are, for any candidate that must read its inputs and write its outputs; an input the outputs do
  not depend on need not be read, and an output that depends on no input at all need only be
  written (``floor_bytes``: KernelBench level 2 #83 clamps min(x, 0) to [0, 1], so its output is
  zero whatever x, and a released kernel read 8.38 of a floor that counted reading x). The FLOPs
  ``torch.utils.flop_counter`` counts on the reference are the *reference's* work, not a lower
  bound: an upper-triangular matmul kernel that skips the zero half the reference multiplies read
  2.47 of the speed of light that way, a convolution 1.93 (Winograd-style algorithms do fewer
  multiplications than the direct convolution the counter assumes).

So ``sol_fraction`` counts compute only for a FLOP count given as a lower bound (``min_flops``);
otherwise it is the memory fraction. The reference's FLOPs still yield
``compute_fraction_of_reference_work``, reported beside it, labelled, never folded in.

A time below the floor means the floor's model is wrong for this problem (or a ceiling is): the
fraction is then not reported at all (None, ``floor_beaten``), and the ``note`` says by how much
the floor was beaten. Nothing is clamped: a clamped 1.0 would read as a kernel at the speed of
light.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from hercules.harness.records import Degeneracy

TERA = 1e12

# Units of the figures in the ``sol`` dict, carried in it so a reader needs no source code.
UNITS: dict[str, str] = {
    "flops": "FLOP", "min_flops": "FLOP", "min_bytes": "byte",
    "floor_ms": "ms", "memory_floor_ms": "ms", "compute_ms_reference_work": "ms", "time_ms": "ms",
    "peak_flops_per_s": "FLOP/s", "bandwidth_bytes_per_s": "byte/s (read + written)",
    "fractions": "floor time / candidate time (1.0 = at the ceiling)",
}


# ---- ceilings ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Datasheet:
    """A GPU's published dense peaks: FLOP/s per compute dtype and HBM bandwidth."""

    name: str
    match: tuple[str, ...]  # substrings of torch.cuda.get_device_name, case-insensitive
    flops_per_s: Mapping[str, float]
    bandwidth_bytes_per_s: float


# NVIDIA H100/H200 SXM (Hopper, same SMs and clocks; the H200 has more and faster HBM). Dense
# tensor-core rates (the "with sparsity" figures are twice these and need 2:4 sparse operands).
# "float32" is the SIMT (non-tensor-core) rate: every worker computes with TF32 off, so an fp32
# problem's matmuls never reach the 494.7 TF32 tensor-core rate ("tfloat32", listed for
# reference only). The fp64 figure is the fp64 tensor-core (DMMA) rate, twice the fp64 SIMT one.
_HOPPER_SXM_FLOPS: dict[str, float] = {
    "float16": 989.4 * TERA,
    "bfloat16": 989.4 * TERA,
    "tfloat32": 494.7 * TERA,
    "float8_e4m3fn": 1979.0 * TERA,
    "float8_e5m2": 1979.0 * TERA,
    "float64": 66.9 * TERA,
    "float32": 66.9 * TERA,
}

DATASHEETS: tuple[Datasheet, ...] = (
    # "H200" also matches the H200 NVL, whose peaks are lower: still an upper bound for it.
    Datasheet("NVIDIA H200 SXM", ("H200",), _HOPPER_SXM_FLOPS, 4.8 * TERA),
    # The SXM5 part reports itself as "NVIDIA H100 80GB HBM3"; the PCIe and NVL parts do not match.
    Datasheet("NVIDIA H100 SXM", ("H100 80GB HBM3", "H100 SXM"), _HOPPER_SXM_FLOPS, 3.35 * TERA),
)


def datasheet_for(device_name: str) -> Datasheet | None:
    """The datasheet whose name pattern occurs in ``device_name``, or None (fall back to measured)."""
    name = device_name.lower()
    for sheet in DATASHEETS:
        if any(m.lower() in name for m in sheet.match):
            return sheet
    return None


@dataclass(frozen=True)
class Ceiling:
    """The ceilings one problem is judged against, with where each came from."""

    device_name: str
    flops_per_s: float | None
    flops_dtype: str | None  # the rate row used ("float32" is SIMT: TF32 is off in every worker)
    flops_source: str | None  # "datasheet" | "measured"
    bandwidth_bytes_per_s: float | None
    bandwidth_source: str | None


def _best_of(datasheet: float | None, measured: float | None) -> tuple[float | None, str | None]:
    """The larger of the two (a ceiling is the most the device can do), and which one it was."""
    if datasheet and (not measured or datasheet >= measured):
        return datasheet, "datasheet"
    if measured:
        return measured, "measured"
    return None, None


def ceiling_for(ceilings: Mapping[str, Any], dtype: str) -> Ceiling:
    """Upper bounds for ``dtype`` on the device ``ceilings`` (as ``measure_ceilings`` returns them,
    possibly from a cache written before this table existed) were measured on."""
    device_name = str(ceilings.get("device_name") or "")
    sheet = datasheet_for(device_name)
    measured = dict(ceilings.get("matmul_flops_per_s") or {})
    listed = dict(sheet.flops_per_s) if sheet else {}
    if dtype in measured or dtype in listed:
        rate_dtype = dtype
        flops, flops_source = _best_of(listed.get(dtype), measured.get(dtype))
    elif measured or listed:
        # A dtype with no rate of its own (int8, a float8 never measured): the fastest rate known
        # for the device, the only figure of the two that is still an upper bound.
        best = {k: max(listed.get(k, 0.0), measured.get(k, 0.0)) for k in {*listed, *measured}}
        rate_dtype = max(sorted(best), key=best.__getitem__)
        flops, flops_source = _best_of(listed.get(rate_dtype), measured.get(rate_dtype))
    else:
        rate_dtype, flops, flops_source = None, None, None
    bandwidth, bandwidth_source = _best_of(sheet.bandwidth_bytes_per_s if sheet else None,
                                           ceilings.get("bandwidth_bytes_per_s"))
    return Ceiling(device_name, flops, rate_dtype, flops_source, bandwidth, bandwidth_source)


def _best_ms(fn, device: torch.device) -> float:
    """A ceiling is the best the device did, not its typical run: the fastest repetition."""
    from hercules.harness.timing import time_callable

    return time_callable(fn, [()], device=device, budget_s=0.2, warmup_s=0.02, flush_l2=False,
                         wall_check=False).min_ms


def _copy_ms(nbytes: int, device: torch.device) -> float:
    source = torch.randn(nbytes // 4, device=device)
    target = torch.empty_like(source)
    return _best_ms(lambda: target.copy_(source), device)  # both buffers are freed on return


def copy_rate(device: torch.device) -> float:
    """The device's copy bandwidth: bytes read + written per second by its best copy of 1 GiB (a GPU)
    or 128 MiB (a CPU)."""
    copy_bytes = (1 << 30) if device.type == "cuda" else (1 << 27)
    return 2 * copy_bytes / (_copy_ms(copy_bytes, device) / 1e3)


# A CPU's matmul rate is measured over square sizes from CPU_MATMUL_SIZES[0], doubling up to the
# last, while one product stays under CPU_MATMUL_CALL_MS: a dtype with no fast kernel on the CPU
# costs seconds a product at the top size (bfloat16 at 1024 on the 2-core AMD EPYC dev machine:
# 2.17 s a call, 15 s of the ceilings' 16.4 s, paid by every evaluation with a fresh cache), and
# its rate does not grow with the size (1.3-3.1 GFLOP/s at 128-1024; float32 150-190 GFLOP/s).
CPU_MATMUL_SIZES = (128, 1024)
CPU_MATMUL_CALL_MS = 20.0


def _matmul_rate(n: int, dtype: torch.dtype, device: torch.device) -> tuple[float, float]:
    """FLOP/s of the best of several n x n products, and that product's time in ms."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    ms = _best_ms(lambda: a @ b, device)
    return 2 * n**3 / (ms / 1e3), ms


def matmul_rate(dtype: torch.dtype, device: torch.device) -> float:
    """The device's matmul FLOP/s for ``dtype``: on a GPU at one size big enough to fill it; on a
    CPU the best rate over the sizes of CPU_MATMUL_SIZES whose product stays under
    CPU_MATMUL_CALL_MS (the best the device did, as a ceiling must be)."""
    if device.type == "cuda":
        return _matmul_rate(8192 if dtype != torch.float32 else 4096, dtype, device)[0]
    n, best = CPU_MATMUL_SIZES[0], 0.0
    while True:
        rate, ms = _matmul_rate(n, dtype, device)
        best = max(best, rate)
        if ms >= CPU_MATMUL_CALL_MS or 2 * n > CPU_MATMUL_SIZES[1]:
            return best
        n *= 2


def measure_ceilings(device: torch.device) -> dict[str, Any]:
    """Copy bandwidth (bytes read + written per second) and matmul FLOP/s per dtype, TF32 off.
    ``ceiling_for`` raises these to the datasheet's peaks where the device has one."""
    gpu = device.type == "cuda"
    ceilings: dict[str, Any] = {
        "device_name": torch.cuda.get_device_name(device) if gpu else "cpu",
        "bandwidth_bytes_per_s": copy_rate(device),
        "matmul_flops_per_s": {},
    }
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        dtypes = ("float32", "bfloat16", "float16") if gpu else ("float32", "bfloat16")
        for name in dtypes:
            ceilings["matmul_flops_per_s"][name] = matmul_rate(getattr(torch, name), device)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    return ceilings


# ---- the floor -----------------------------------------------------------------------------


def floor_bytes(input_bytes: int, output_bytes: int, param_bytes: int, degeneracy: Degeneracy | None = None) -> int:
    """The fewest bytes one call must move: its inputs, outputs and parameters once, less the
    inputs no output depends on; an output that depends on no input at all (constant for the
    problem, so computable once, ahead) only has to be written."""
    if degeneracy is not None and degeneracy.constant_output:
        return output_bytes
    ignored = degeneracy.ignored_bytes if degeneracy is not None else 0
    return max(0, input_bytes - ignored) + output_bytes + param_bytes


# ---- the fraction --------------------------------------------------------------------------


def _fraction(floor_ms: float, time_ms: float | None) -> float | None:
    return floor_ms / time_ms if time_ms and time_ms > 0 and floor_ms > 0 else None


def sol_figures(flops: int, min_bytes: int, dtype: str, ceilings: Mapping[str, Any], time_ms: float | None,
                *, min_flops: int | None = None) -> dict[str, Any]:
    """The ``sol`` dict a verdict carries.

    ``flops`` is the reference's FLOP count (``flops.count_flops``); ``min_bytes`` the bytes any
    candidate must move; ``min_flops``, when given, a FLOP count no correct candidate can go
    below (declared by the problem's author), the only compute figure ``sol_fraction`` trusts.
    """
    ceiling = ceiling_for(ceilings, dtype)
    peak, bandwidth = ceiling.flops_per_s, ceiling.bandwidth_bytes_per_s
    memory_s = min_bytes / bandwidth if bandwidth and min_bytes else 0.0
    reference_compute_s = flops / peak if peak and flops else 0.0
    trusted_compute_s = min_flops / peak if peak and min_flops else 0.0
    bound = "compute" if trusted_compute_s > memory_s else "memory"
    floor_ms = max(memory_s, trusted_compute_s) * 1e3
    memory_floor_ms = memory_s * 1e3
    reference_compute_ms = reference_compute_s * 1e3

    sol_fraction = _fraction(floor_ms, time_ms)
    memory_fraction = _fraction(memory_floor_ms, time_ms)
    compute_fraction = _fraction(trusted_compute_s * 1e3, time_ms) if min_flops else None
    reference_fraction = _fraction(reference_compute_ms, time_ms)

    notes: list[str] = []
    floor_beaten = False
    if memory_fraction is not None and memory_fraction > 1:
        floor_beaten = True
        notes.append(f"the time {time_ms:.4g} ms beats the memory floor {memory_floor_ms:.4g} ms by "
                     f"{memory_fraction:.2f}x: the floor is wrong for this problem (the candidate moved fewer "
                     "bytes than the floor's model counts: input regions it need not read, outputs still in "
                     f"L2 when timing stopped) or the {ceiling.bandwidth_source} bandwidth ceiling is too low; "
                     "no fraction reported")
        memory_fraction = None
    if compute_fraction is not None and compute_fraction > 1:
        floor_beaten = True
        notes.append(f"the time {time_ms:.4g} ms beats the compute floor of the declared minimum FLOPs by "
                     f"{compute_fraction:.2f}x: that minimum is not one, or the {ceiling.flops_source} "
                     f"{ceiling.flops_dtype} ceiling is too low; no fraction reported")
        compute_fraction = None
    if sol_fraction is not None and sol_fraction > 1:
        floor_beaten, sol_fraction = True, None
    if reference_fraction is not None and reference_fraction > 1:
        # Expected for honest code that skips zeros or uses a cheaper algorithm; also for fp32 work
        # done on tensor cores at fp32 accuracy (3xTF32 splitting), which outruns the SIMT ceiling.
        notes.append(f"{reference_fraction:.2f} of the {ceiling.flops_dtype} ceiling on the reference's "
                     "FLOPs: the candidate does less arithmetic than the reference, so those FLOPs are "
                     "not a floor and sol_fraction leaves them out")
    return {
        "sol_fraction": sol_fraction,  # None when the time beats the floor (``floor_beaten``)
        "floor_beaten": floor_beaten,  # the time is below the floor: its model is wrong here
        "bound": bound,  # the term that sets floor_ms and sol_fraction
        "floor_ms": floor_ms,
        "work": "min_flops" if min_flops else "reference_flops",  # what the compute term counts
        "memory_fraction": memory_fraction,
        "compute_fraction": compute_fraction,  # of min_flops; None without one
        "compute_fraction_of_reference_work": reference_fraction,
        # Which term the reference's own roofline is limited by: a compute-bound reference judged
        # on its bytes alone has a small sol_fraction however good the candidate.
        "reference_bound": "compute" if reference_compute_s > memory_s else "memory",
        "memory_floor_ms": memory_floor_ms,
        "compute_ms_reference_work": reference_compute_ms,
        "flops": flops,  # the reference's, from torch.utils.flop_counter
        "min_flops": min_flops,
        "min_bytes": min_bytes,
        "time_ms": time_ms,
        "dtype": dtype,
        "device_name": ceiling.device_name,
        "peak_flops_per_s": peak,
        "peak_flops_dtype": ceiling.flops_dtype,
        "peak_flops_source": ceiling.flops_source,
        "bandwidth_bytes_per_s": bandwidth,
        "bandwidth_source": ceiling.bandwidth_source,
        "ceiling_source": ceiling.flops_source if bound == "compute" else ceiling.bandwidth_source,
        "units": UNITS,
        "note": "; ".join(notes) or None,
    }
