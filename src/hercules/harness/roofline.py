"""Speed of light: the FLOPs and the fewest bytes a problem must move, against ceilings measured
once per device (copy bandwidth, matrix-product rate per dtype) and cached.

sol_fraction = max(FLOPs / peak_rate, bytes / bandwidth) / measured_time: 1.0 means the candidate
runs at the hardware's limit for this problem; datasheet figures are never used.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode


def count_flops(model: Any, values: list[Any]) -> tuple[int, Any]:
    """Matrix-product, convolution and attention FLOPs of one forward (elementwise work is not
    counted: such problems are judged on bytes, which dominate them), and that forward's output."""
    counter = FlopCounterMode(display=False)
    with counter:
        out = model(*values)
    return int(counter.get_total_flops()), out


def _best_ms(fn, device: torch.device) -> float:
    """A ceiling is the best the device did, not its typical run: the fastest repetition."""
    from hercules.harness.timing import time_callable

    return time_callable(fn, [()], device=device, budget_s=0.2, warmup_s=0.02, flush_l2=False,
                         wall_check=False).min_ms


def _copy_ms(nbytes: int, device: torch.device) -> float:
    source = torch.randn(nbytes // 4, device=device)
    target = torch.empty_like(source)
    return _best_ms(lambda: target.copy_(source), device)  # both buffers are freed on return


def measure_ceilings(device: torch.device) -> dict[str, Any]:
    """Copy bandwidth (bytes read + written per second) and matmul FLOP/s per dtype, TF32 off."""
    gpu = device.type == "cuda"
    copy_bytes = (1 << 30) if gpu else (1 << 27)
    copy_ms = _copy_ms(copy_bytes, device)
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
            ms = _best_ms(lambda a=a, b=b: a @ b, device)
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
