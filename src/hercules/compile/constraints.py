"""Reject a candidate *before building it*, with reasons.

Three families, each reason prefixed with its family:

* ``interface``: dtypes, contiguity / strides of the region's tensors, divisibility and power-of-two
  requirements of the parameter point, batch limits;
* ``hardware``: the backend is present (CUDA device, or Triton's CPU interpreter in tests), SM
  version (``torch.cuda.get_device_capability``), threads per block, shared memory per block,
  estimated registers per thread and per block;
* ``numerics``: accumulation must be fp32; no approximate intrinsics or TF32 products on an fp32
  model (its tolerance intends fp32 arithmetic).

One rule reads a parameter by name: a point with ``PDL=1`` (programmatic dependent launch: the
kernel may start before the previous one in its stream ends, and waits on the grid dependency
itself) needs a CUDA device of SM 9.0+, and for Triton a ``tl.extra.cuda.gdc_wait`` to call; the
CPU interpreter has no grid dependency control, so there the point is rejected (``hardware``).

Requirements come from the template (``Template.requirements(params, region)``); this module only
compares them with the region and the device.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .regions import Region
from .templates.base import Requirements, Template, is_pow2, triton_interpreting

MAX_REGS_PER_THREAD = 255


@dataclass(frozen=True)
class DeviceInfo:
    type: str  # "cuda" | "cpu"
    name: str
    sm: tuple[int, int] | None = None
    smem_per_block: int = 48 * 1024  # without opt-in (the static __shared__ limit)
    smem_per_block_optin: int = 48 * 1024  # dynamic, with opt-in (Triton uses this)
    regs_per_block: int = 65536
    max_threads_per_block: int = 1024
    sm_count: int = 0
    triton_interpreter: bool = False

    @classmethod
    def detect(cls, device: str | torch.device | None = None) -> "DeviceInfo":
        dev = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if dev.type == "cuda":
            idx = dev.index if dev.index is not None else torch.cuda.current_device()
            p = torch.cuda.get_device_properties(idx)
            smem = int(getattr(p, "shared_memory_per_block", 48 * 1024))
            return cls(
                type="cuda",
                name=p.name,
                sm=tuple(torch.cuda.get_device_capability(idx)),
                smem_per_block=smem,
                smem_per_block_optin=int(getattr(p, "shared_memory_per_block_optin", smem)),
                regs_per_block=int(getattr(p, "regs_per_block", 65536) or 65536),
                max_threads_per_block=int(getattr(p, "max_threads_per_block", 1024) or 1024),
                sm_count=int(p.multi_processor_count),
            )
        return cls(type="cpu", name="cpu", triton_interpreter=triton_interpreting())

    def key(self) -> str:
        return f"{self.name}|sm{self.sm}" if self.sm else self.name


def _triton_available() -> bool:
    try:
        import triton  # noqa: F401

        return True
    except Exception:
        return False


def check_requirements(req: Requirements, region: Region, device: DeviceInfo) -> list[str]:
    reasons: list[str] = []
    # -- interface -------------------------------------------------------------------------
    if region.dtype not in req.dtypes:
        reasons.append(f"interface: dtype {region.dtype} not supported (supports {', '.join(req.dtypes)})")
    names = {t.name: t for t in region.inputs}
    for n in req.contiguous:
        if n in names and not names[n].contiguous:
            reasons.append(f"interface: input {n!r} must be contiguous (strides {names[n].stride})")
    for n in req.last_dim_contiguous:
        if n in names and not names[n].last_dim_contiguous:
            reasons.append(f"interface: input {n!r} needs unit stride in its last dimension (strides {names[n].stride})")
    for n in req.same_dtype_inputs:
        if n in names and names[n].dtype != region.dtype:
            reasons.append(f"interface: input {n!r} is {names[n].dtype}, expected {region.dtype}")
    for what, value, div in req.divisible:
        if div <= 0 or value % div != 0:
            reasons.append(f"interface: {what}: {value} is not divisible by {div}")
    for what, value in req.power_of_two:
        if not is_pow2(int(value)):
            reasons.append(f"interface: {what} = {value} must be a power of two")
    for what, value, bound in req.at_most:
        if value > bound:
            reasons.append(f"interface: {what} = {value} exceeds {bound}")
    for what, value, bound in req.at_least:
        if value < bound:
            reasons.append(f"interface: {what} = {value} is below {bound}")
    if req.max_batch is not None and region.batch > req.max_batch:
        reasons.append(f"interface: batch {region.batch} exceeds this variant's maximum {req.max_batch}")
    # -- hardware --------------------------------------------------------------------------
    if req.backend == "cuda" and device.type != "cuda":
        reasons.append(f"hardware: CUDA C++ candidate needs a CUDA device (have {device.type})")
    if req.backend == "triton":
        if not _triton_available():
            reasons.append("hardware: triton is not installed")
        elif device.type != "cuda" and not device.triton_interpreter:
            reasons.append("hardware: Triton candidate needs a CUDA device (or TRITON_INTERPRET=1 for CPU tests)")
    if device.type == "cuda" and req.min_sm is not None and device.sm is not None and tuple(device.sm) < tuple(req.min_sm):
        reasons.append(f"hardware: needs SM {req.min_sm[0]}.{req.min_sm[1]}+ (device is SM {device.sm[0]}.{device.sm[1]})")
    if req.backend in ("cuda", "triton"):
        if req.threads_per_block and req.threads_per_block > device.max_threads_per_block:
            reasons.append(f"hardware: {req.threads_per_block} threads per block exceed {device.max_threads_per_block}")
        limit = device.smem_per_block if req.backend == "cuda" else device.smem_per_block_optin
        if req.smem_bytes > limit:
            reasons.append(f"hardware: shared memory {req.smem_bytes} B per block exceeds {limit} B")
        if req.regs_per_thread is not None:
            if req.regs_per_thread > MAX_REGS_PER_THREAD:
                reasons.append(f"hardware: ~{req.regs_per_thread} registers per thread (estimate) exceed "
                               f"{MAX_REGS_PER_THREAD}: would spill")
            elif req.threads_per_block and req.regs_per_thread * req.threads_per_block > device.regs_per_block:
                reasons.append(f"hardware: ~{req.regs_per_thread * req.threads_per_block} registers per block "
                               f"(estimate) exceed {device.regs_per_block}")
    # -- numerics --------------------------------------------------------------------------
    if req.acc_dtype != "float32":
        reasons.append(f"numerics: accumulation in {req.acc_dtype} is not allowed (fp32 accumulation required)")
    if req.fast_math and region.dtype == "float32":
        reasons.append("numerics: approximate intrinsics (fast exp) on an fp32 model exceed the fp32 tolerance intent")
    if req.uses_tf32 and region.dtype == "float32":
        reasons.append("numerics: TF32 products on an fp32 model are a silent precision downcast")
    return reasons


PDL_MIN_SM = (9, 0)  # griddepcontrol (PTX) and the programmatic-serialisation launch attribute: Hopper+


def _triton_has_gdc() -> bool:
    try:
        from triton.language.extra import cuda

        return hasattr(cuda, "gdc_wait") and hasattr(cuda, "gdc_launch_dependents")
    except Exception:
        return False


def check_launch(template: Template, params: dict, device: DeviceInfo) -> list[str]:
    """Reasons a point's launch mode cannot run here (only PDL so far)."""
    if not params.get("PDL"):
        return []
    if device.type != "cuda":
        where = "the Triton CPU interpreter" if device.triton_interpreter else device.type
        return [f"hardware: programmatic dependent launch (PDL=1) needs a CUDA device of SM "
                f"{PDL_MIN_SM[0]}.{PDL_MIN_SM[1]}+; {where} has no grid dependency control"]
    if device.sm is not None and tuple(device.sm) < PDL_MIN_SM:
        return [f"hardware: programmatic dependent launch (PDL=1) needs SM {PDL_MIN_SM[0]}.{PDL_MIN_SM[1]}+ "
                f"(device is SM {device.sm[0]}.{device.sm[1]})"]
    if template.lang == "triton" and _triton_available() and not _triton_has_gdc():
        return ["hardware: this triton has no tl.extra.cuda.gdc_wait / gdc_launch_dependents (PDL=1)"]
    return []


def check(template: Template, params: dict, region: Region, device: DeviceInfo) -> list[str]:
    """Reasons to reject this parameter point (empty list: it may be built)."""
    try:
        req = template.requirements(params, region)
    except Exception as e:  # a template that cannot state its needs is not built
        return [f"interface: requirements could not be computed: {type(e).__name__}: {e}"]
    return check_requirements(req, region, device) + check_launch(template, params, device)
