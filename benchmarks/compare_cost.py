"""What one output comparison costs in the reference worker, side by side with the float64 way.

    python benchmarks/compare_cost.py [--elements 524288] [--repeats 30]

Re-executes itself once with the workers' allocator and OpenMP settings (ipc.HOST_ALLOCATOR_ENV,
ipc.WORKER_OPENMP_ENV) and one compute thread, as the reference worker runs, then prints the
median milliseconds of: a light comparison (candidate against the problem-dtype reference, every
call of a burst but the ones drawn for strict judging) in its own work dtype and forced to float64;
a strict comparison against a float64 truth; upstream KernelBench's allclose through the shortcut
and through torch.allclose. Each pair is timed interleaved, repeat after repeat, in one process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def _reexec_as_worker() -> None:
    from hercules.harness.ipc import HOST_ALLOCATOR_ENV, WORKER_OPENMP_ENV

    wanted = {**HOST_ALLOCATOR_ENV, **WORKER_OPENMP_ENV, "OMP_NUM_THREADS": "1"}
    if any(os.environ.get(k) != v for k, v in wanted.items()):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **wanted})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--elements", type=int, default=512 * 1024)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    _reexec_as_worker()

    import torch

    from hercules.harness import checks

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    reference = torch.randn(args.elements, generator=g)
    candidate = reference + 1e-6 * torch.randn(args.elements, generator=g)
    truth = reference.double()
    tol = checks.DEFAULT_TOLERANCES["float32"]
    spec = [{"shape": [args.elements], "dtype": "float32"}]
    upstream = checks.KERNELBENCH_TOLERANCE

    def light() -> object:
        return checks.compare_outputs([candidate], ["torch.Tensor"], [reference], spec, tol, None, [reference])

    def light_float64() -> object:
        work = checks._work_dtype
        checks._work_dtype = lambda *tensors: torch.float64
        try:
            return light()
        finally:
            checks._work_dtype = work

    def strict() -> object:
        return checks.compare_outputs([candidate], ["torch.Tensor"], [truth], spec, tol, [1e-7], [reference])

    def allclose_shortcut() -> object:
        return checks._allclose(candidate, reference, upstream)

    def allclose_torch() -> object:
        return torch.allclose(candidate, reference, atol=upstream.atol, rtol=upstream.rtol)

    def allclose_float64() -> object:
        return torch.allclose(candidate.double(), reference.double(), atol=upstream.atol, rtol=upstream.rtol)

    cases = {"light comparison, float32 work": light, "light comparison, float64 work": light_float64,
             "strict comparison (float64 truth)": strict, "allclose, shortcut": allclose_shortcut,
             "allclose, torch.allclose": allclose_torch, "allclose, float64 upcast": allclose_float64}
    times: dict[str, list[float]] = {name: [] for name in cases}
    for fn in cases.values():
        fn()  # first touch of every temporary's memory out of the figures
    for _ in range(args.repeats):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1e3)
    print(f"{args.elements} float32 values, {args.repeats} interleaved repeats, one thread, the workers' allocator")
    print("| comparison | median ms | min ms |\n|---|---:|---:|")
    for name, figures in times.items():
        print(f"| {name} | {statistics.median(figures):.3f} | {min(figures):.3f} |")


if __name__ == "__main__":
    main()
