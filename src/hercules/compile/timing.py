"""Timing of region candidates, behind one function (``time_region``) so the method can change.

* CUDA: the candidate is captured in a CUDA graph that calls it once per arg set (arg set i holds
  layer i's weights, so consecutive calls read different weights as a decode step does and L2
  does not stay warm), the graph is replayed with CUDA events around each replay after warm-up,
  and the median replay time divided by the calls per replay is the per-call time. This is how
  the runtime runs kernels (inside a graph: no launch overhead), and a candidate that cannot be
  captured is reported as such -- the graph runtime could not use it.
* CPU: the evaluation core's ``hercules.harness.timing.time_callable`` (perf_counter, median)
  when it is importable, else a local median-of-perf_counter loop.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch


class NotCapturable(RuntimeError):
    pass


@dataclass(frozen=True)
class RegionTiming:
    median_ms: float
    method: str
    reps: int


def _local_time(fn: Callable, arg_sets: Sequence[tuple], budget_s: float, min_reps: int = 5,
                max_reps: int = 2000) -> RegionTiming:
    for a in arg_sets[:2]:
        fn(*a)
    samples: list[float] = []
    t_end = time.perf_counter() + budget_s
    i = 0
    while (len(samples) < min_reps or time.perf_counter() < t_end) and len(samples) < max_reps:
        a = arg_sets[i % len(arg_sets)]
        t0 = time.perf_counter()
        fn(*a)
        samples.append((time.perf_counter() - t0) * 1e3)
        i += 1
    return RegionTiming(statistics.median(samples), "perf_counter(local)", len(samples))


def _cpu_warmup(fn, arg_sets, calls: int = 10, max_s: float = 0.3) -> None:
    """First calls of some CPU kernels run ~100x slower (thread pools, lazy init); the harness sizes
    its warm-up from a 3-call estimate that would still be cold, so warm up here first."""
    t_end = time.perf_counter() + max_s
    for i in range(calls):
        fn(*arg_sets[i % len(arg_sets)])
        if time.perf_counter() > t_end:
            break


def _cpu_time(fn, arg_sets, budget_s) -> RegionTiming:
    _cpu_warmup(fn, arg_sets)
    try:
        from hercules.harness.timing import time_callable
    except Exception:  # the evaluation core is not there (or broken): same method, local copy
        return _local_time(fn, arg_sets, budget_s)
    r = time_callable(fn, list(arg_sets), device="cpu", budget_s=budget_s, warmup_s=min(0.02, budget_s / 4),
                      min_reps=5, max_reps=2000, flush_l2=False, wall_check=False)
    return RegionTiming(r.median_ms, r.method, r.reps)


def _cuda_graph_time(fn, arg_sets, budget_s, device) -> RegionTiming:
    dev = torch.device(device)
    stream = torch.cuda.Stream(device=dev)
    stream.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(stream):  # warm-up outside capture: compiles, autotunes, allocates
        for _ in range(2):
            for a in arg_sets:
                fn(*a)
    torch.cuda.current_stream(dev).wait_stream(stream)
    torch.cuda.synchronize(dev)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for a in arg_sets:
                fn(*a)
    except Exception as e:
        torch.cuda.synchronize(dev)
        raise NotCapturable(f"not CUDA-graph capturable: {type(e).__name__}: {str(e)[:200]}") from None
    graph.replay()
    torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    graph.replay()
    torch.cuda.synchronize(dev)
    est = max(time.perf_counter() - t0, 1e-6)
    reps = int(min(200, max(10, budget_s / est)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        starts[i].record()
        graph.replay()
        ends[i].record()
    torch.cuda.synchronize(dev)
    per_call = [s.elapsed_time(e) / len(arg_sets) for s, e in zip(starts, ends)]
    del graph
    return RegionTiming(statistics.median(per_call), "cuda_graph_events", reps)


def _harness_cuda_time(fn, arg_sets, budget_s, device) -> RegionTiming:
    from hercules.harness.timing import time_callable

    r = time_callable(fn, list(arg_sets), device=device, budget_s=budget_s, warmup_s=0.02, min_reps=10,
                      max_reps=2000, flush_l2=True, wall_check=False)
    return RegionTiming(r.median_ms, r.method, r.reps)


def time_region(fn: Callable, arg_sets: Sequence[tuple], *, device: Any, budget_s: float = 0.1,
                method: str = "graph") -> RegionTiming:
    """Median per-call time of ``fn`` over ``arg_sets`` (see the module docstring for the method).

    ``method="harness"`` on CUDA uses the evaluation core's ``time_callable`` instead (eager
    launches, CUDA events, L2 flushed): launch overhead then counts, which the graph-replayed
    runtime does not pay, so small kernels look slower than they run in the decode step."""
    dev = torch.device(device)
    with torch.no_grad():
        if dev.type == "cuda":
            if method == "harness":
                return _harness_cuda_time(fn, arg_sets, budget_s, dev)
            return _cuda_graph_time(fn, arg_sets, budget_s, dev)
        return _cpu_time(fn, arg_sets, budget_s)
