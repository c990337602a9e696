"""The hardware facts a prompt carries: device name, SM count, measured bandwidth and peak rates.

The figures are the evaluation core's own device ceilings (``harness.roofline``), read from the
same cache the core writes (``<cache>/devices/<device key>-v<format>.json``); when absent they are
measured once here and written there, so the core reuses them for its SOL fractions. Datasheet
numbers are never used: the model is told what this machine actually did.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class HardwareFacts:
    device: str  # "cuda" or "cpu"
    name: str
    sm_count: int | None = None
    memory_gib: float | None = None
    l2_mib: float | None = None
    capability: str | None = None
    cpu_cores: int | None = None
    bandwidth_gbs: float | None = None  # measured copy rate (bytes read + written per second)
    matmul_tflops: dict[str, float] = field(default_factory=dict)  # measured, per dtype

    def lines(self) -> list[str]:
        out = [f"- device: {self.name} ({self.device})"]
        if self.sm_count:
            out.append(f"- streaming multiprocessors: {self.sm_count}" + (f", compute capability {self.capability}" if self.capability else ""))
        if self.memory_gib:
            out.append(f"- device memory: {self.memory_gib:.0f} GiB" + (f", L2 cache {self.l2_mib:.0f} MiB" if self.l2_mib else ""))
        if self.cpu_cores:
            out.append(f"- CPU cores available: {self.cpu_cores}")
        if self.bandwidth_gbs:
            out.append(f"- measured memory bandwidth (device copy): {self.bandwidth_gbs:,.0f} GB/s")
        for dtype, rate in self.matmul_tflops.items():
            out.append(f"- measured {dtype} matrix-product rate: {rate:,.1f} TFLOP/s")
        return out


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _ceilings(device: Any, cache_dir: Path) -> dict[str, Any] | None:
    from hercules.harness.evaluate import cached_ceilings
    from hercules.harness.roofline import measure_ceilings

    try:
        return cached_ceilings(cache_dir, device, lambda: measure_ceilings(device))
    except (RuntimeError, OSError):  # a busy or odd device: the prompt goes without measured figures
        return None


def hardware_facts(device_name: str, cache_dir: Path) -> HardwareFacts:
    import torch

    from hercules.harness.evaluate import resolve_device

    device = resolve_device(device_name)
    ceilings = _ceilings(device, cache_dir)
    measured: dict[str, Any] = {}
    if ceilings:
        measured["bandwidth_gbs"] = ceilings.get("bandwidth_bytes_per_s", 0) / 1e9 or None
        measured["matmul_tflops"] = {k: v / 1e12 for k, v in (ceilings.get("matmul_flops_per_s") or {}).items()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        l2 = getattr(props, "L2_cache_size", 0) or 0
        facts = HardwareFacts(device="cuda", name=props.name, sm_count=props.multi_processor_count,
                              memory_gib=props.total_memory / 2**30, l2_mib=l2 / 2**20 or None,
                              capability=f"{props.major}.{props.minor}", **measured)
        torch.cuda.empty_cache()  # the parent keeps no measuring buffers beside the evaluations
        return facts
    from hercules.harness.build import usable_cpus

    return HardwareFacts(device="cpu", name=_cpu_name(), cpu_cores=usable_cpus(), **measured)
