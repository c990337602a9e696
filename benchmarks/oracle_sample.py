"""KernelBench references as their own candidates through the oracle beyond one input distribution
(harness/oracle.py): every one must come out ``ok`` with no flag, whatever transforms it admits.

    python benchmarks/oracle_sample.py --smallest 24 --device cpu [--also level2/83_...py] [--out benchmarks/results]

The problems: the N with the least work (``kernelbench.smallest``: FLOPs and bytes counted on the
meta device) plus any named with ``--also``. Correctness only by default (trials and the oracle:
transformed inputs and perturbed parameters, and the input-dependence test); ``--timed`` also
times them, for the speed-of-light floor. Per problem: status, flags, each transform's outcome
(passed / failed / skipped, with why), the degenerate-problem finding, and the seconds of the
trials against the oracle's. Results: OUT/oracle_kernelbench_<device>.json and .md, one line per
problem appended to the .jsonl as it finishes (a rerun skips what is there).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelbench import DEFAULT_CORPUS, as_candidate_source, sample, smallest  # noqa: E402

from hercules.harness.evaluate import EvalOptions, evaluate  # noqa: E402
from hercules.harness.records import to_jsonable  # noqa: E402
from hercules.problems.loaders import load_source  # noqa: E402
from hercules.problems.model import Candidate  # noqa: E402


def row(path: Path, options: EvalOptions) -> dict[str, Any]:
    problem = load_source(path).problems[0]
    candidate = Candidate(name="reference_as_candidate", code=as_candidate_source(problem.code), source=str(path))
    started = time.perf_counter()
    v = evaluate(problem, candidate, options)
    transforms = list(v.check.transforms) if v.check else []
    return {
        "problem": f"{path.parent.name}/{path.name}",
        "status": v.status.value, "flags": list(v.flags), "error": (v.error or "")[:300] or None,
        "transforms": transforms,
        "skipped": [n for n in v.notes if n.startswith("transforms not meaningful")],
        "degenerate_problem": to_jsonable(v.degenerate_problem),
        "sol_fraction": v.sol_fraction, "floor_beaten": (v.sol or {}).get("floor_beaten"),
        "min_bytes": (v.sol or {}).get("min_bytes"),
        "trials_s": round(v.phases.get("trials", 0.0), 2), "oracle_s": round(v.phases.get("oracle", 0.0), 2),
        "seconds": round(time.perf_counter() - started, 1),
    }


def render(rows: list[dict[str, Any]], device: str) -> str:
    outcomes = Counter(t for r in rows for t in r["transforms"])
    clean = sum(1 for r in rows if r["status"] == "ok" and not r["flags"])
    lines = [f"# KernelBench references as their own candidates through the oracle ({device})", "",
             f"{clean} of {len(rows)} ok with no flag; fragile_inputs on "
             f"{sum('fragile_inputs' in r['flags'] for r in rows)}; degenerate: "
             f"{sum(bool(r['degenerate_problem']) for r in rows)}.", "",
             "Transform outcomes over all problems: " + ", ".join(f"{k} {n}" for k, n in sorted(outcomes.items())), "",
             "| problem | status | flags | transforms | degenerate | trials s | oracle s |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        short = ", ".join(t.replace(": passed", " ok").replace(": skipped", " skip").replace(": failed", " FAIL")
                          for t in r["transforms"])
        found = r["degenerate_problem"]
        degenerate = "" if not found else ("constant output" if found["constant_output"] else
                                           "ignores " + ", ".join(found["ignored_inputs"]))
        lines.append(f"| {r['problem']} | {r['status']} | {', '.join(r['flags'])} | {short} | {degenerate} | "
                     f"{r['trials_s']} | {r['oracle_s']} |")
    skipped = [(r["problem"], s) for r in rows for s in r["skipped"]]
    if skipped:
        lines += ["", "## Transforms left out, and why", ""] + [f"- {p}: {s}" for p, s in skipped]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    p.add_argument("--smallest", type=int, default=24)
    p.add_argument("--per-level", type=int, default=0, help="instead of --smallest: kernelbench.py's spread sample")
    p.add_argument("--also", nargs="*", default=[], help="more corpus files, relative to the corpus (levelN/file.py)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--timed", action="store_true", help="also time (eager baseline), for the floor")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = p.parse_args(argv)

    chosen = sample(args.corpus, args.per_level) if args.per_level else [
        s.path for s in smallest(args.corpus, args.smallest)] if args.smallest else []
    files = chosen + [args.corpus / a for a in args.also]
    options = EvalOptions(device=args.device, trials=args.trials, baselines=("eager",), timing_budget_s=0.05,
                          warmup_s=0.01, time_candidate=args.timed, run_timeout_s=300)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"oracle_kernelbench_{args.device}"
    done = {}
    if stem.with_suffix(".jsonl").exists():
        done = {r["problem"]: r for r in map(json.loads, stem.with_suffix(".jsonl").read_text().splitlines())}
    rows = []
    for path in files:
        key = f"{path.parent.name}/{path.name}"
        if key not in done:
            done[key] = row(path, options)
            with stem.with_suffix(".jsonl").open("a") as out:
                out.write(json.dumps(done[key]) + "\n")
        r = done[key]
        rows.append(r)
        print(f"{key:70s} {r['status']:10s} flags={','.join(r['flags']) or '-'} "
              f"transforms={sum(t.endswith('passed') for t in r['transforms'])} passed/"
              f"{sum(t.endswith('skipped') for t in r['transforms'])} skipped/"
              f"{sum(t.endswith('failed') for t in r['transforms'])} failed "
              f"degenerate={'yes' if r['degenerate_problem'] else 'no'} {r['seconds']} s", flush=True)
        # Written after every problem: a run stopped at its time limit keeps what finished.
        stem.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
        stem.with_suffix(".md").write_text(render(rows, args.device))
    return 0


if __name__ == "__main__":
    sys.exit(main())
