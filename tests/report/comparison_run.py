"""A small run folder as ``hercules bench`` leaves it: verdicts made by ``decide`` from stage records
(baselines with and without the speedup's interval, a flagged candidate, failures), written as
``<problem>/<candidate>/verdict.json`` and read back the way a resumed run reads them."""

from __future__ import annotations

import json
from pathlib import Path

from hercules.harness.decide import (
    BaselineOutcome,
    CheckOutcome,
    Context,
    Failure,
    Finding,
    IntegrityOutcome,
    MeasureOutcome,
    ScanOutcome,
    decide,
)
from hercules.harness.records import Cause, CheckResult, Status, TimingResult, Verdict, verdict_from_json
from hercules.report.stats import Row

GOOD = CheckOutcome(CheckResult(correct=True, trials=5, max_abs_err=1e-6, rel_err=1e-6, ref_rel_err=1e-6,
                                correct_kernelbench=True))
WRONG = CheckOutcome(CheckResult(correct=False, trials=5, max_abs_err=0.3, rel_err=0.1, ref_rel_err=1e-6,
                                 error="trial 0: values differ", correct_kernelbench=False))


def timing(ms: float) -> TimingResult:
    return TimingResult(method="cuda_events", reps=200, median_ms=ms, mean_ms=ms, min_ms=ms * 0.97,
                        max_ms=ms * 1.2, iqr_ms=ms * 0.02, std_ms=ms * 0.02, input_sets=4, l2_flushed=True,
                        wall_ms=ms)


def sol(fraction: float, bound: str) -> dict:
    return {"sol_fraction": fraction, "bound": bound, "floor_ms": 0.01, "note": f"{bound}-bound floor"}


def timed(problem: str, candidate: str, cand_ms: float, times: dict[str, float | None],
          intervals: dict[str, tuple[float, float]] | None = None, fraction: float = 0.5, bound: str = "memory",
          flagged: str | None = None) -> Verdict:
    integrity = IntegrityOutcome(findings=(Finding(flagged, f"{flagged}: seen"),)) if flagged else None
    return decide(Context(problem, candidate, "cuda:0"), ScanOutcome(), check=GOOD,
                  measure=MeasureOutcome(timing(cand_ms)), integrity=integrity,
                  baselines=BaselineOutcome(times, intervals=intervals or {}), sol=sol(fraction, bound))


# (problem, level, candidate, verdict). By hand: ReLU's vectorised candidate takes 0.0500 ms against
# eager 0.0510 (1.02x [0.98-1.05]), compile 0.0400 (0.80x, best) and cudagraph 0.0450 (0.90x);
# MLP has two candidates, one 1.25x eager and the fastest baseline its expert; Softmax is wrong,
# Conv crashed (no times at all), Matmul_Scaling is flagged but keeps its times.
VERDICTS: list[tuple[str, int, str, Verdict]] = [
    ("level1_19_ReLU", 1, "vectorised", timed(
        "level1_19_ReLU", "vectorised", 0.05, {"eager": 0.051, "compile": 0.04, "compile_reduce_overhead": None,
                                               "cudagraph": 0.045},
        {"eager": (0.98, 1.05), "compile": (0.77, 0.83), "cudagraph": (0.88, 0.93)}, fraction=0.61)),
    ("level1_23_Softmax", 1, "fp16_accum", decide(
        Context("level1_23_Softmax", "fp16_accum", "cuda:0"), ScanOutcome(), check=WRONG,
        baselines=BaselineOutcome({"eager": 0.2}))),
    ("level2_40_Matmul_Scaling", 2, "cached", timed(
        "level2_40_Matmul_Scaling", "cached", 0.01, {"eager": 1.0, "compile": 0.8}, {"eager": (95.0, 105.0)},
        fraction=0.9, flagged="result_cache")),
    ("level2_54_Conv2d_Multiply", 2, "oob", decide(
        Context("level2_54_Conv2d_Multiply", "oob", "cuda:0"), ScanOutcome(), check=GOOD,
        failure=Failure(Status.CRASH, Cause.CANDIDATE_CRASH, "an illegal memory access"))),
    ("level3_1_MLP", 3, "fused_mlp", timed(
        "level3_1_MLP", "fused_mlp", 0.4, {"eager": 0.5, "compile": 0.45, "cudagraph": 0.42, "expert": 0.38},
        {"eager": (1.21, 1.29), "expert": (0.92, 0.98)}, fraction=0.33, bound="compute")),
    ("level3_1_MLP", 3, "split_k", timed(
        "level3_1_MLP", "split_k", 0.6, {"eager": 0.5, "compile": 0.45, "cudagraph": 0.42, "expert": 0.38},
        fraction=0.22, bound="compute")),
]


def write_run(run_dir: Path) -> list[Row]:
    """Write the verdicts as a bench run's folder, then read that folder back into report rows."""
    for problem, _level, candidate, verdict in VERDICTS:
        folder = run_dir / problem / candidate
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "verdict.json").write_text(json.dumps(verdict.to_json(), indent=1))
    levels = {problem: level for problem, level, _, _ in VERDICTS}
    return [(path.parent.parent.name, levels[path.parent.parent.name], path.parent.name,
             verdict_from_json(json.loads(path.read_text()))) for path in sorted(run_dir.glob("*/*/verdict.json"))]
