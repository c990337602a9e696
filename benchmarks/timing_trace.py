"""Every request of one evaluation as the parent timed it: where the timing stage's figures come
from, request by request.

    python benchmarks/timing_trace.py --problem P.py --candidate C.py [--device cuda] [--ops burst,fresh_burst]

One line per request as it ends: worker, op, what it was for, its size (calls, every call back,
outputs / inputs calibrated), the parent's milliseconds around it and the worker's own seconds
inside it, then the verdict's status, flags, speedup over eager, timing figures and notes. A calibration (``burst`` with ``calls=0``)
is what the parent takes off the matching candidate request.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from hercules.harness.session import Session
from hercules.harness.evaluate import EvalOptions, evaluate
from hercules.problems.loaders import load_source
from hercules.problems.model import Candidate

SIZE_FIELDS = ("calls", "every_call", "outputs_of", "inputs_of", "per_set")
TIMING_FIELDS = ("median_ms", "bounded_by", "event_median_ms", "wall_ms", "judged_ms", "seen_ms")


def traced(original, wanted: set[str] | None):
    def request(self, role, sent, timeout, what, fds=(), idle_s=None):
        started = time.perf_counter()
        reply = original(self, role, sent, timeout, what, fds, idle_s)
        parent_ms = (time.perf_counter() - started) * 1e3
        op, fields = sent.op, sent.message()
        if wanted is None or op in wanted:
            size = " ".join(f"{k}={fields[k]}" for k in SIZE_FIELDS if fields.get(k) not in (None, False))
            if fields.get("layout") is not None and op == "burst" and role == "reference":
                size += " +inputs"
            inside = reply.get("worker_seconds")
            print(f"{role:9s} {op:12s} {what[:28]:28s} {size:34s} parent {parent_ms:9.3f} ms"
                  + (f"  inside {inside * 1e3:9.3f} ms" if inside is not None else ""), flush=True)
        return reply
    return request


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", type=Path, required=True)
    parser.add_argument("--candidate", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--ops", default="burst,fresh_burst", help="ops to print (comma-separated, 'all')")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--budget", type=float, default=EvalOptions.timing_budget_s, help="timing budget, seconds")
    args = parser.parse_args()
    wanted = None if args.ops == "all" else set(args.ops.split(","))
    Session.call = traced(Session.call, wanted)
    problem = load_source(args.problem).problems[0]
    candidate = Candidate(args.candidate.stem, args.candidate.read_text(), "trace")
    cache = Path(tempfile.mkdtemp(prefix="timing-trace-"))
    for _ in range(args.repeat):
        options = EvalOptions(device=args.device, trials=args.trials, baselines=("eager",), cache_dir=cache,
                              timing_budget_s=args.budget)
        verdict = evaluate(problem, candidate, options).to_json()
        timing = verdict.get("timing") or {}
        summary = {"status": verdict.get("status"), "flags": verdict.get("flags"),
                   "speedup_eager": (verdict.get("speedup") or {}).get("eager"),
                   "timing": {k: timing.get(k) for k in TIMING_FIELDS}, "notes": verdict.get("notes"),
                   "error": verdict.get("error")}
        print(json.dumps(summary, indent=1, default=str), flush=True)


if __name__ == "__main__":
    main()
