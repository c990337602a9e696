"""Why the same host-bound call reads differently in two processes: bursts of one problem's
reference, timed alternately in two processes (A, B, A, B, ...), for several pairs.

The honest red-team control computes exactly what eager computes, yet on the H200 its speedup
ranged 0.50-1.38x across evaluations (`results/h200_timing_trace_65f9abc.log`): the candidate's
worker read 0.107-0.208 ms per call, the reference's 0.122-0.166. This separates the suspects:

- ``plain/plain``: two processes that only import torch (process-to-process spread alone);
- ``plain/like_candidate``: B also does what the candidate worker does before any candidate code
  (dynamo, the profiler and Triton imported, dynamo's generation tagging installed);
- ``pinned``: both pinned to the same one CPU (``os.sched_setaffinity``), where placement on
  the host's cores is the suspect.

    python benchmarks/process_spread.py [--problem tests/redteam/problem_matmul.py] [--device cuda]
        [--rounds 12] [--burst-ms 50]

Prints every burst as it is timed, then per pair: the median ms per call of A and B, and the
per-round ratio B/A (median, least, most). A ratio that stays near 1 while each process drifts
means the comparison is fair if measured side by side; a ratio away from 1 names the process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, os, sys, time
import torch
spec = json.loads(sys.argv[1])
if spec["cpus"]:
    os.sched_setaffinity(0, spec["cpus"])
    torch.set_num_threads(len(spec["cpus"]))  # an intra-op pool wider than its CPUs fights itself
if spec["like_candidate"]:
    import torch._dynamo, torch._dynamo.mutation_guard as guard, torch.profiler
    guard.install_generation_tagging_init()
    try:
        import triton, triton.language
    except Exception:
        pass
namespace = {}
exec(compile(open(spec["problem"]).read(), spec["problem"], "exec"), namespace)
device = torch.device(spec["device"])
torch.manual_seed(0)
with torch.device(device):
    model = namespace["Model"](*namespace["get_init_inputs"]()).to(device).eval()
    inputs = [v.to(device) if isinstance(v, torch.Tensor) else v for v in namespace["get_inputs"]()]
sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
print("ready", flush=True)
for line in sys.stdin:
    calls = int(line)
    with torch.no_grad():
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            model(*inputs)
        sync()
    print((time.perf_counter() - start) * 1e3 / calls, flush=True)
"""


class Child:
    def __init__(self, problem: Path, device: str, like_candidate: bool, cpus: list[int] | None):
        spec = {"problem": str(problem), "device": device, "like_candidate": like_candidate, "cpus": cpus}
        self.process = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(spec)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError("a timing process failed to start")

    def burst(self, calls: int) -> float:
        self.process.stdin.write(f"{calls}\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def pairs(pin_cpu: int) -> list[tuple[str, bool, list[int] | None]]:
    """(name, B like the candidate worker, CPUs both are pinned to)."""
    return [("plain/plain", False, None), ("plain/like_candidate", True, None),
            ("plain/plain pinned", False, [pin_cpu]), ("plain/like_candidate pinned", True, [pin_cpu])]


def measure(problem: Path, device: str, name: str, like_candidate: bool, cpus: list[int] | None,
            rounds: int, burst_ms: float) -> dict:
    a, b = Child(problem, device, False, cpus), Child(problem, device, like_candidate, cpus)
    try:
        per_call = min(a.burst(20), b.burst(20), a.burst(20), b.burst(20))  # warm, and the burst's length
        calls = max(10, int(burst_ms / max(per_call, 1e-4)))
        figures = []
        for r in range(rounds):
            fa, fb = a.burst(calls), b.burst(calls)
            figures.append((fa, fb))
            print(f"{name:30s} round {r:2d}  A {fa:.4f}  B {fb:.4f} ms per call  B/A {fb / fa:.3f}", flush=True)
    finally:
        a.close()
        b.close()
    ratios = [fb / fa for fa, fb in figures]
    return {"pair": name, "calls": calls, "a_median_ms": statistics.median(f[0] for f in figures),
            "b_median_ms": statistics.median(f[1] for f in figures), "ratio_median": statistics.median(ratios),
            "ratio_min": min(ratios), "ratio_max": max(ratios),
            "a_spread": max(f[0] for f in figures) / min(f[0] for f in figures)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", type=Path, default=Path("tests/redteam/problem_matmul.py"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--burst-ms", type=float, default=50.0)
    parser.add_argument("--out", type=Path, default=None, help="write the summary as JSON here")
    args = parser.parse_args()
    if not args.problem.is_file():
        parser.error(f"no problem file {args.problem}")
    pin_cpu = sorted(os.sched_getaffinity(0))[-1]
    summary = []
    for name, like_candidate, cpus in pairs(pin_cpu):
        result = measure(args.problem, args.device, name, like_candidate, cpus, args.rounds, args.burst_ms)
        summary.append(result)
        print(json.dumps(result), flush=True)
    print(f"\n{'pair':30s} {'A ms':>8s} {'B ms':>8s} {'B/A med':>8s} {'B/A min':>8s} {'B/A max':>8s} {'A max/min':>9s}")
    for s in summary:
        print(f"{s['pair']:30s} {s['a_median_ms']:8.4f} {s['b_median_ms']:8.4f} {s['ratio_median']:8.3f} "
              f"{s['ratio_min']:8.3f} {s['ratio_max']:8.3f} {s['a_spread']:9.3f}")
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
