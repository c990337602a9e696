"""What returning every call's outputs costs a burst, in one process on the GPU: the same calls
timed as a long burst (last outputs only), with every output kept and packed into a device pack
(what the worker does), and on never-seen input sets made by cloning (the fresh passes) or copied
into buffers made beforehand, warm and with the allocator emptied first; beside the packing of
zeros the trusted calibration takes off.

    python benchmarks/every_call_cost.py [--problem tests/redteam/problem_matmul.py] [--calls 385] [--reps 5]

Prints one line per variant as it finishes: the fastest of ``--reps`` in ms per call.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

from hercules.harness import timing
from hercules.harness.device_pack import write_device_pack


def best_ms(run, reps: int, calls: int) -> float:
    figures = []
    for _ in range(reps):
        torch.cuda.synchronize()
        started = time.perf_counter()
        run()
        torch.cuda.synchronize()
        figures.append((time.perf_counter() - started) * 1e3 / calls)
    return min(figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", type=Path, default=Path("tests/redteam/problem_matmul.py"))
    parser.add_argument("--calls", type=int, default=385)
    parser.add_argument("--sets", type=int, default=16)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    device = torch.device("cuda")
    namespace: dict = {}
    exec(compile(args.problem.read_text(), str(args.problem), "exec"), namespace)
    model = namespace["Model"](*namespace["get_init_inputs"]()).to(device)
    sets = [tuple(v.to(device) for v in namespace["get_inputs"]()) for _ in range(args.sets)]
    calls = args.calls
    torch.set_grad_enabled(False)

    def long_burst():
        timing.burst_outputs(model, sets, device, calls)

    def kept():
        timing.burst_outputs(model, sets, device, calls, every_call=True)

    def kept_and_packed():
        outs = timing.burst_outputs(model, sets, device, calls, every_call=True)[0]
        fd, _ = write_device_pack([o for call in outs for o in call], device)
        os.close(fd)

    zeros = timing.call_outputs(model(*sets[0]))

    def calibration():
        fd, _ = write_device_pack(zeros * calls, device)
        os.close(fd)

    pool = [tuple(v.to(device) for v in namespace["get_inputs"]()) for _ in range(calls)]

    def fresh_cloned():
        fresh = [tuple(v.clone() for v in s) for s in pool]
        timing.burst_outputs(model, fresh, device, calls)

    def clone_only():
        [tuple(v.clone() for v in s) for s in pool]

    buffers = [tuple(torch.empty_like(v) for v in s) for s in pool]

    def fresh_in_buffers():
        for dst, src in zip(buffers, pool):
            for d, s in zip(dst, src):
                d.copy_(s)
        timing.burst_outputs(model, buffers, device, calls)

    def copy_only():
        for dst, src in zip(buffers, pool):
            for d, s in zip(dst, src):
                d.copy_(s)

    variants = {"long burst (last outputs)": long_burst, "every call kept": kept,
                "every call kept and packed": kept_and_packed, "calibration packing (zeros)": calibration, "fresh sets cloned + calls": fresh_cloned,
                "clones alone": clone_only, "fresh sets into buffers + calls": fresh_in_buffers,
                "copies alone": copy_only, "long burst again": long_burst}
    print(f"{args.problem.stem}: {calls} calls, {args.sets} timing sets, fastest of {args.reps}", flush=True)
    for name, run in variants.items():
        run()  # warm the allocator and caches
        print(f"{name:34s} {best_ms(run, args.reps, calls):8.4f} ms per call", flush=True)
    torch.cuda.empty_cache()
    started = time.perf_counter()
    fresh_cloned()
    torch.cuda.synchronize()
    print(f"{'fresh sets cloned, allocator emptied':34s} {(time.perf_counter() - started) * 1e3 / calls:8.4f} ms per call",
          flush=True)


if __name__ == "__main__":
    main()
