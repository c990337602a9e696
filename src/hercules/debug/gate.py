"""Performance gate and degeneration detector.

A repair passes at threshold p only if it is correct and speedup = reference time / candidate time
is at least p (p = 0: correctness alone). The detector names the ways a "repair" can trade speed
for safety: the custom kernel dropped, library or PyTorch fallbacks, serialised work (one-thread
launches, busy waits, repeated synchronising passes), and -- from the timing -- slower than the gate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

P_SWEEP = (0.0, 0.3, 0.5, 0.7, 0.9, 1.0, 1.5, 2.0)
HEADLINE_P = (0.0, 0.5, 0.7, 0.9, 1.0)  # the report's first table: how much the gate moves the score

_CUSTOM_KERNEL = re.compile(r"__global__|load_inline\s*\(|cpp_extension\.load\s*\(|@\s*triton\.jit|"
                            r"cuda_sources\s*=")
_LIBRARY = re.compile(r"\b(cublas\w+|cufft(Exec|Plan)\w*|cusparse\w+|cusolver\w+|thrust::(sort|reduce|transform)\w*|"
                      r"at::(matmul|mm|bmm|conv\w+|linear|softmax|native_\w+)|torch::(matmul|mm|bmm|conv\w+|"
                      r"linear|softmax))\s*\(")
_TORCH_FORWARD_OP = re.compile(r"\b(torch\.(matmul|mm|bmm|conv\w*|einsum|nn\.functional\.\w+)|F\.\w+|"
                               r"super\(\)\.forward|self\.(conv\w*|linear\w*|bn\w*|norm\w*)\()")
_SERIAL_LAUNCH = re.compile(r"<<<\s*1\s*,\s*1\s*[,>]")
_BUSY_WAIT = re.compile(r"clock64\s*\(\s*\)\s*-|__nanosleep\s*\(|hercules_degenerate_spin")
_HOST_DELAY = re.compile(r"\b(usleep|nanosleep|sleep_for|sleep_until)\s*\(|hercules_degenerate_host_delay")
_REPEAT_SYNC = re.compile(r"for\s+\w+\s+in\s+range\([^)]*\)\s*:[^\n]*\n(?:[^\n]*\n){0,3}?[^\n]*synchronize\(")


@dataclass(frozen=True)
class GateResult:
    correct: bool
    speedup: float | None  # reference time / candidate time, same timing method for both
    ref_ms: float | None
    cand_ms: float | None
    method: str  # "core:eager" | "test_wall" | "task_output" | "defpy_events" | "none"

    def passes(self, p: float) -> bool:
        if not self.correct:
            return False
        if p <= 0:
            return True
        return self.speedup is not None and self.speedup >= p


def degeneration_signs(code: str, reference_code: str | None, speedup: float | None, p: float) -> tuple[str, ...]:
    """Named signs of repair-by-degeneration, from the code (against the reference) and the timing."""
    signs: list[str] = []
    ref = reference_code or ""
    if _CUSTOM_KERNEL.search(ref) and not _CUSTOM_KERNEL.search(code):
        signs.append("custom_kernel_dropped")
    elif not _CUSTOM_KERNEL.search(code) and _TORCH_FORWARD_OP.search(code):
        signs.append("pytorch_fallback")
    lib_new = {m.group(1) for m in _LIBRARY.finditer(code)} - {m.group(1) for m in _LIBRARY.finditer(ref)}
    if lib_new:
        signs.append("library_fallback:" + ",".join(sorted(lib_new))[:120])
    if _SERIAL_LAUNCH.search(code) and not _SERIAL_LAUNCH.search(ref):
        signs.append("serialised_launch")
    if _BUSY_WAIT.search(code) and not _BUSY_WAIT.search(ref):
        signs.append("busy_wait")
    if _HOST_DELAY.search(code) and not _HOST_DELAY.search(ref):
        signs.append("host_delay")
    if _REPEAT_SYNC.search(code) and not _REPEAT_SYNC.search(ref):
        signs.append("repeated_synchronised_passes")
    if speedup is not None and p > 0 and speedup < p:
        signs.append(f"slower_than_gate:{speedup:.2f}<{p}")
    return tuple(signs)


_TIME_LINE = re.compile(r"(?:time|elapsed|latency|duration)[^0-9\n]{0,40}?([0-9]+(?:\.[0-9]+)?)\s*(ms|us|µs|s)\b",
                        re.IGNORECASE)
_SCALE = {"ms": 1.0, "us": 1e-3, "µs": 1e-3, "s": 1e3}


def parse_task_timing(text: str) -> float | None:
    """Milliseconds a task's own benchmark printed (the sum of its timing lines), if any."""
    values = [float(v) * _SCALE[u] for v, u in _TIME_LINE.findall(text)]
    return sum(values) if values else None
