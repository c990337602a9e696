"""A small KernelBench-like run of real ``Verdict`` records: three levels, every kind of outcome."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hercules.harness.records import CheckResult, Speedups, Status, TimingResult, Verdict
from hercules.harness.roofline import sol_figures
from hercules.report.stats import Row

H200 = {"device_name": "NVIDIA H200", "bandwidth_bytes_per_s": 4.24e12,
        "matmul_flops_per_s": {"float32": 51e12, "bfloat16": 790e12}}


@dataclass(frozen=True)
class KernelBenchCheck(CheckResult):
    """A check carrying ``correct_kernelbench`` whether or not the core's record has it yet."""

    correct_kernelbench: bool | None = None


def check(correct: bool, kernelbench: bool | None) -> CheckResult:
    if "correct_kernelbench" in {f.name for f in dataclasses.fields(CheckResult)}:
        return CheckResult(correct=correct, trials=5, max_abs_err=None, rel_err=None, ref_rel_err=None,
                           correct_kernelbench=kernelbench)  # type: ignore[call-arg]
    return KernelBenchCheck(correct=correct, trials=5, max_abs_err=None, rel_err=None, ref_rel_err=None,
                            correct_kernelbench=kernelbench)


def timing(median_ms: float, iqr_ms: float) -> TimingResult:
    return TimingResult(method="cuda_events", reps=50, median_ms=median_ms, mean_ms=median_ms, min_ms=median_ms * 0.98,
                        max_ms=median_ms * 1.1, iqr_ms=iqr_ms, std_ms=iqr_ms, input_sets=4, l2_flushed=True)


def verdict(status: Status, *, kb: bool | None = None, eager_ms: float | None = None, cand_ms: float | None = None,
            flops: int = 0, min_bytes: int = 0, flags: tuple[str, ...] = (), seconds: float = 0.0,
            error: str | None = None) -> Verdict:
    correct = status in (Status.OK, Status.SUSPICIOUS)
    sol = sol_figures(flops, min_bytes, "float32", H200, cand_ms) if cand_ms else None
    return Verdict(
        status=status, correct=correct, flags=flags, error=error, max_abs_err=None, rel_err=None,
        ref_ms=eager_ms, cand_ms=cand_ms,
        speedup=Speedups(eager=eager_ms / cand_ms, best=eager_ms / cand_ms) if eager_ms and cand_ms else Speedups(),
        sol_fraction=(sol or {}).get("sol_fraction"), device="cuda:0", baselines_ms={"eager": eager_ms},
        check=None if status in (Status.BUILD_ERROR, Status.CRASH) else check(correct, kb),
        timing=timing(cand_ms, cand_ms * 0.01) if cand_ms else None, sol=sol, seconds=seconds,
    )


MB = 1 << 20

# By hand. Level 1 (4): ok x3 with speedups 2.0, 1.0, 0.5 (median 1.0x, IQR 0.75x-1.50x) and an
# incorrect row that KernelBench's looser tolerance accepts; the 4096^3 fp32 products take 2.05 ms
# at the 66.9 TFLOP/s SIMT peak on the reference's FLOPs, which the triangular one, skipping zeros,
# beats (1.2 ms: 171% of that work's floor, 4.2% of its bytes' floor at 4.8 TB/s). Level 2 (3): ok 4.0x, suspicious
# (correct outputs, flagged), build error. Level 3 (2): ok 1.25x, crash. Strict correct outputs:
# 3 + 2 + 1 = 6 of 9; KernelBench: 4 + 2 + 1 = 7 of 9 (no-output rows are known incorrect).
ROWS: list[Row] = [
    ("level1_1_Square_matmul", 1, "tiled", verdict(Status.OK, kb=True, eager_ms=5.0, cand_ms=2.5,
                                                   flops=2 * 4096**3, min_bytes=192 * MB, seconds=12.0)),
    ("level1_14_Matmul_upper_triangular", 1, "skip_zeros",
     verdict(Status.OK, kb=True, eager_ms=1.2, cand_ms=1.2, flops=2 * 4096**3, min_bytes=192 * MB, seconds=14.0)),
    ("level1_19_ReLU", 1, "vectorised", verdict(Status.OK, kb=True, eager_ms=0.1, cand_ms=0.2,
                                                min_bytes=512 * MB, seconds=8.0)),
    ("level1_23_Softmax", 1, "fp16_accum", verdict(Status.INCORRECT, kb=True, seconds=9.0,
                                                   error="max abs error 3.1e-3 above atol 1e-5")),
    ("level2_17_Conv2d_InstanceNorm", 2, "fused", verdict(Status.OK, kb=True, eager_ms=4.0, cand_ms=1.0,
                                                          flops=10**11, min_bytes=64 * MB, seconds=30.0)),
    ("level2_40_Matmul_Scaling", 2, "cached", verdict(Status.SUSPICIOUS, kb=True, eager_ms=1.0, cand_ms=0.01,
                                                      min_bytes=64 * MB, flags=("result_cache",), seconds=20.0)),
    ("level2_76_Gemm_Add_ReLU", 2, "broken", verdict(Status.BUILD_ERROR, seconds=70.0, error="nvcc: error")),
    ("level3_1_MLP", 3, "fused_mlp", verdict(Status.OK, kb=True, eager_ms=0.5, cand_ms=0.4,
                                             flops=2 * 10**9, min_bytes=8 * MB, seconds=25.0)),
    ("level3_4_LeNet5", 3, "oob", verdict(Status.CRASH, seconds=6.0, error="an illegal memory access")),
]
