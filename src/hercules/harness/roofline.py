"""Speed of light: the FLOPs and the fewest bytes a problem must move, against ceilings measured
once per device (copy bandwidth, matrix-product rate per dtype) and cached.

sol_fraction = max(FLOPs / peak_rate, bytes / bandwidth) / measured_time: 1.0 means the candidate
runs at the hardware's limit for this problem; datasheet figures are never used.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode


def count_flops(model: Any, values: list[Any]) -> int:
    """Matrix-product, convolution and attention FLOPs of one forward (elementwise work is not
    counted: such problems are judged on bytes, which dominate them)."""
    counter = FlopCounterMode(display=False)
    with counter:
        model(*values)
    return int(counter.get_total_flops())


def _time_ms(fn, device: torch.device, reps: int) -> float:
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(reps):
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    else:
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return min(times)  # a ceiling is the best the device did, not its typical run


def measure_ceilings(device: torch.device) -> dict[str, Any]:
    """Copy bandwidth (bytes read + written per second) and matmul FLOP/s per dtype, TF32 off."""
    gpu = device.type == "cuda"
    copy_bytes = (1 << 30) if gpu else (1 << 27)
    src = torch.randn(copy_bytes // 4, device=device)
    dst = torch.empty_like(src)
    copy_ms = _time_ms(lambda: dst.copy_(src), device, 20 if gpu else 5)
    del src, dst
    ceilings: dict[str, Any] = {
        "device_name": torch.cuda.get_device_name(device) if gpu else "cpu",
        "bandwidth_bytes_per_s": 2 * copy_bytes / (copy_ms / 1e3),
        "matmul_flops_per_s": {},
    }
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        dtypes = ("float32", "bfloat16", "float16") if gpu else ("float32", "bfloat16")
        for name in dtypes:
            dtype = getattr(torch, name)
            n = (8192 if name != "float32" else 4096) if gpu else 1024
            a = torch.randn(n, n, device=device).to(dtype)
            b = torch.randn(n, n, device=device).to(dtype)
            ms = _time_ms(lambda: a @ b, device, 10 if gpu else 5)
            ceilings["matmul_flops_per_s"][name] = 2 * n**3 / (ms / 1e3)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    return ceilings


def sol_figures(flops: int, min_bytes: int, dtype: str, ceilings: dict[str, Any], time_ms: float | None) -> dict[str, Any]:
    rates = ceilings.get("matmul_flops_per_s", {})
    peak = rates.get(dtype) or rates.get("float32")
    bandwidth = ceilings.get("bandwidth_bytes_per_s")
    compute_s = flops / peak if peak and flops else 0.0
    memory_s = min_bytes / bandwidth if bandwidth else 0.0
    floor_ms = max(compute_s, memory_s) * 1e3
    return {
        "flops": flops,
        "min_bytes": min_bytes,
        "floor_ms": floor_ms,
        "bound": "compute" if compute_s > memory_s else "memory",
        "peak_flops_per_s": peak,
        "bandwidth_bytes_per_s": bandwidth,
        "sol_fraction": (floor_ms / time_ms) if time_ms and floor_ms > 0 else None,
    }
