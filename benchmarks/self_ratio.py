"""Problems evaluated as their own candidates under harness variants, one evaluation at a time:
the speedup against eager from the side-by-side rounds, its interval, and both sides' own reports.
The same code on both sides should read 1.0; a variant that moves it names the cost that differs.

    python benchmarks/self_ratio.py --device cuda FILE.py [...] [--variant sandbox=0 --variant device_packs=0]

A variant is ``name=value[,name=value]`` over EvalOptions' fields ("default" for none); each result
is printed as it comes and appended to ``--out`` as one JSON line.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from hercules.harness.evaluate import EvalOptions, evaluate
from hercules.problems.loaders import load_source
from hercules.problems.model import Candidate

sys.path.insert(0, str(Path(__file__).parent))
from kernelbench import as_candidate_source  # noqa: E402


def variant_options(text: str, base: EvalOptions) -> EvalOptions:
    if text == "default":
        return base
    fields = {f.name: f.type for f in dataclasses.fields(EvalOptions)}
    changes = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        if name not in fields:
            raise SystemExit(f"unknown EvalOptions field {name!r}")
        current = getattr(base, name)
        changes[name] = (value not in ("0", "false", "False")) if isinstance(current, bool) else type(current)(value)
    return dataclasses.replace(base, **changes)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("problems", nargs="+", type=Path)
    p.add_argument("--device", default="auto")
    p.add_argument("--variant", action="append", default=None)
    p.add_argument("--baselines", default="eager")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    base = EvalOptions(device=args.device, baselines=tuple(args.baselines.split(",")))
    for path in args.problems:
        problem = load_source(path).problems[0]
        candidate = Candidate("itself", as_candidate_source(problem.code), str(path))
        for text in args.variant or ["default"]:
            for _ in range(args.repeat):
                started = time.perf_counter()
                verdict = evaluate(problem, candidate, variant_options(text, base))
                interval = verdict.speedup.interval("eager") if verdict.speedup else None
                row = {"problem": path.stem, "variant": text, "status": verdict.status.value,
                       "error": (verdict.error or "")[:600],
                       "flags": list(verdict.flags), "eager": verdict.speedup.eager if verdict.speedup else None,
                       "interval": interval, "seconds": round(time.perf_counter() - started, 1),
                       "timing": ({k: getattr(verdict.timing, k) for k in
                                   ("event_median_ms", "wall_ms", "median_ms", "bounded_by", "judged_ms", "seen_ms")}
                                  if verdict.timing else None),
                       "baselines_ms": verdict.baselines_ms,
                       "notes": [n for n in verdict.notes if "side by side" in n or "packing" in n],
                       # per worker request: count, seconds from send to answer, seconds in the handler
                       "requests": {k: v for k, v in verdict.requests.items() if "burst" in k or "single" in k}}
                print(json.dumps(row), flush=True)
                if args.out:
                    with args.out.open("a") as out:
                        out.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
