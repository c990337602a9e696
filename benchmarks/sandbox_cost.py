"""What the sandbox and the parent-verified timing cost an evaluation, side by side in one run.

Evaluates one problem/candidate pair several times with the sandbox on and off (interleaved, so
load drifts hit both alike) and prints the median wall seconds of each and of its stages.
``--old-src DIR`` adds the same evaluation run by another checkout's ``src`` (e.g. the commit
before the hostile-process core) in a subprocess.

    python benchmarks/sandbox_cost.py --device cpu --repeats 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from hercules.harness.evaluate import EvalOptions, evaluate  # noqa: E402
from hercules.problems.loaders import load_source  # noqa: E402
from hercules.problems.model import Candidate  # noqa: E402

OLD = """
import json, sys, time
from pathlib import Path
from hercules.harness.evaluate import EvalOptions, evaluate
from hercules.problems.loaders import load_source
from hercules.problems.model import Candidate
problem = load_source(Path(sys.argv[1])).problems[0]
candidate = Candidate("c", Path(sys.argv[2]).read_text(), "bench")
start = time.perf_counter()
v = evaluate(problem, candidate, EvalOptions(device=sys.argv[3], baselines=("eager",), cache_dir=Path(sys.argv[4])))
print(json.dumps({"seconds": time.perf_counter() - start, "status": v.status.value}))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problem", default=str(ROOT / "tests/redteam/problem_matmul.py"))
    parser.add_argument("--candidate", default=str(ROOT / "tests/redteam/honest.py"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--old-src", default=None)
    args = parser.parse_args()
    problem = load_source(Path(args.problem)).problems[0]
    candidate = Candidate("c", Path(args.candidate).read_text(), "bench")
    cache = Path(tempfile.mkdtemp(prefix="hercules-cost-"))
    base = EvalOptions(device=args.device, baselines=("eager",), cache_dir=cache)
    runs: dict[str, list[float]] = {"sandboxed": [], "unsandboxed": [], "old": []}
    phases: dict[str, list[dict]] = {"sandboxed": [], "unsandboxed": []}
    evaluate(problem, candidate, base)  # warm the caches (FLOP count, ceilings) for every variant alike
    for i in range(args.repeats):
        for name, sandbox in (("sandboxed", True), ("unsandboxed", False)):
            start = time.perf_counter()
            verdict = evaluate(problem, candidate, replace(base, sandbox=sandbox))
            runs[name].append(time.perf_counter() - start)
            phases[name].append(verdict.phases)
            print(f"{i} {name:11s} {runs[name][-1]:6.2f} s {verdict.status.value}", flush=True)
        if args.old_src:
            out = subprocess.run([sys.executable, "-c", OLD, args.problem, args.candidate, args.device,
                                  str(cache / "old")], capture_output=True, text=True,
                                 env={"PYTHONPATH": args.old_src, "PATH": "/usr/bin:/bin"})
            if out.returncode == 0:
                record = json.loads(out.stdout.strip().splitlines()[-1])
                runs["old"].append(record["seconds"])
                print(f"{i} old         {record['seconds']:6.2f} s {record['status']}", flush=True)
            else:
                print("old checkout failed:", out.stderr[-500:], flush=True)
    print("\n| variant | median s | runs |\n|---|---|---|")
    for name, values in runs.items():
        if values:
            print(f"| {name} | {statistics.median(values):.2f} | {len(values)} |")
    stages = sorted({k for p in phases["sandboxed"] for k in p})
    print("\n| stage | sandboxed median s | unsandboxed median s |\n|---|---|---|")
    for stage in stages:
        a = statistics.median(p.get(stage, 0.0) for p in phases["sandboxed"])
        b = statistics.median(p.get(stage, 0.0) for p in phases["unsandboxed"])
        print(f"| {stage} | {a:.3f} | {b:.3f} |")


if __name__ == "__main__":
    main()
