"""Build-and-evaluate throughput: N distinct load_inline candidates, end to end, builds included.

    python benchmarks/throughput.py [--count 50] [--run-dir /tmp/throughput]

By default an evaluation starts as soon as its own build is done (builds and evaluations overlap).
Each candidate is a CUDA Mish kernel (the suite's mish_fp32 problem) with its own extension name
and block size, so every one has its own content hash and is compiled from scratch into an empty cache.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from hercules.harness.batch import BenchItem, run_bench
from hercules.harness.evaluate import EvalOptions
from hercules.problems.loaders import load_source
from hercules.problems.model import Candidate
from hercules.suite.catalog import suite_dir

PROBLEM = "mish_fp32"


KERNEL = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void mish_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long stride = (long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        float v = x[i];
        float sp = v > 20.f ? v : log1pf(expf(v));
        y[i] = v * tanhf(sp) * SCALE;
    }
}

torch::Tensor mish(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32);
    auto y = torch::empty_like(x);
    long n = x.numel();
    int blocks = (int)std::min<long>((n + BLOCK - 1) / BLOCK, 132L * 16);
    mish_kernel<<<blocks, BLOCK, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

TEMPLATE = """
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(
    name="throughput_mish_{index}",
    cpp_sources="torch::Tensor mish(torch::Tensor x);",
    cuda_sources={kernel!r},
    functions=["mish"],
    extra_cuda_cflags=["-O3", "-DBLOCK={block}", "-DSCALE=1.0f"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.mish(x.contiguous())
"""


def variants(count: int) -> list[Candidate]:
    """Distinct sources (unique extension names, four block sizes): each compiles from scratch."""
    return [
        Candidate(name=f"variant_{i:02d}", code=TEMPLATE.format(index=i, kernel=KERNEL, block=(128, 256, 512, 1024)[i % 4]),
                  source=f"throughput#{i}", problem=PROBLEM)
        for i in range(count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--run-dir", default=None)
    parser.add_argument("--jobs", type=int, default=None, help="Parallel builds (default: CPU count).")
    parser.add_argument("--eval-jobs", type=int, default=None,
                        help="Evaluations in flight (default 2 on a GPU); measurements still run one at a time.")
    parser.add_argument("--no-pipeline", action="store_true",
                        help="Finish every build before the first evaluation (as `hercules bench` does).")
    args = parser.parse_args()
    problem = load_source(suite_dir() / "problems" / f"{PROBLEM}.py").problems[0]
    items = [BenchItem(problem, c) for c in variants(args.count)]
    run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="hercules-throughput-"))
    cache = Path(tempfile.mkdtemp(prefix="hercules-cache-"))  # empty: every build is a real compile
    options = replace(EvalOptions(device="auto", baselines=("eager",)), cache_dir=cache)
    start = time.perf_counter()
    def progress(event, item, verdict):  # partial numbers survive a cut-off run
        status = verdict.status.value if verdict else ""
        stages = ""
        if verdict is not None and event == "evaluated":
            stages = " ".join(f"{k}={v:.1f}" for k, v in verdict.phases.items() if v >= 0.05)
            slow = sorted(verdict.requests.items(), key=lambda kv: -kv[1]["seconds"])[:4]
            if slow:
                stages += " | " + " ".join(f"{k}={v['seconds']:.1f}({v['inside']:.1f})" for k, v in slow)
        print(f"{time.perf_counter() - start:7.1f} s  {event:9s} {item.candidate.name} {status} {stages}", flush=True)

    rows = run_bench(items, run_dir, options, build_jobs=args.jobs, eval_jobs=args.eval_jobs,
                     pipeline=not args.no_pipeline, progress=progress)
    total = time.perf_counter() - start
    builds = []
    for row in rows:
        record = run_dir / PROBLEM / row.item.candidate.name / "prebuild.json"
        if record.exists():
            builds.append(json.loads(record.read_text())["seconds"])
    statuses = {}
    for row in rows:
        statuses[row.verdict.status.value] = statuses.get(row.verdict.status.value, 0) + 1
    print(f"{len(rows)} candidates end to end in {total:.1f} s ({total / 60:.2f} min); statuses {statuses}")
    if builds:
        print(f"per-candidate build (parallel, wall per build): median {statistics.median(builds):.1f} s, "
              f"min {min(builds):.1f} s, max {max(builds):.1f} s")
    steps = ninja_step_seconds(cache)
    if steps:  # which compile dominates a build: the generated main.cpp, the .cu, or the link
        print("build steps (ninja), median s: " + ", ".join(
            f"{name} {statistics.median(v):.1f} (n={len(v)})" for name, v in sorted(steps.items())))
    # Where an evaluation's time goes (lock_wait: queued behind another's measurements), by stage
    # and by worker request (round trip).
    stages = median_by_key([row.verdict.phases for row in rows])
    if stages:
        print("per-evaluation stages, median s: " + ", ".join(f"{k} {m:.2f}" for k, m in stages.items()))
    requests = median_by_key([{k: v["seconds"] for k, v in row.verdict.requests.items()} for row in rows])
    if requests:
        slowest = sorted(requests.items(), key=lambda kv: -kv[1])
        print("per-evaluation requests, median s: " + ", ".join(f"{k} {m:.2f}" for k, m in slowest))


def ninja_step_seconds(cache: Path) -> dict[str, list[float]]:
    """Seconds per build step (main.o, cuda.cuda.o, the .so) from every extension's .ninja_log."""
    steps: dict[str, list[float]] = {}
    for log in cache.rglob(".ninja_log"):
        for line in log.read_text().splitlines():
            fields = line.split("\t")
            if line.startswith("#") or len(fields) < 4:
                continue
            name = "link" if fields[3].endswith(".so") else fields[3]
            steps.setdefault(name, []).append((int(fields[1]) - int(fields[0])) / 1e3)
    return steps


def median_by_key(records: list[dict[str, float]]) -> dict[str, float]:
    """Median of each key over the records that have it, keys in first-seen order."""
    values: dict[str, list[float]] = {}
    for record in records:
        for key, value in record.items():
            values.setdefault(key, []).append(value)
    return {key: statistics.median(v) for key, v in values.items()}

if __name__ == "__main__":
    main()
