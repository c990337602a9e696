"""Where a candidate's parent-clock time exceeds its own events: KernelBench references evaluated
as their own candidates under a few settings, one line each as it finishes.

    python benchmarks/wall_excess.py [--corpus DIR] [--problems level1/51_Argmax_over_a_dimension.py ...]

Per variant (default; no sandbox; host memory files instead of device packs) it prints the
in-process event median, the parent's wall figure per call, their ratio, which figure bounded the
time, and the candidate's burst requests as the parent timed them against the seconds the worker
reported inside them: an excess inside the worker is in its own process, one outside it is on the
reply path or in the parent.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelbench import as_candidate_source  # noqa: E402

from hercules.harness.evaluate import EvalOptions, evaluate  # noqa: E402
from hercules.problems.loaders import load_source  # noqa: E402
from hercules.problems.model import Candidate  # noqa: E402

DEFAULT = ["level1/51_Argmax_over_a_dimension.py", "level1/96_HuberLoss.py", "level1/66_conv_standard_3D__asymmetric_input__asymmetric_kernel.py"]
VARIANTS = {"default": {}, "no_sandbox": {"sandbox": False}, "host_files": {"device_packs": False}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("runs/kernelbench-corpus"))
    parser.add_argument("--problems", nargs="*", default=DEFAULT)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="wall-excess-"))
    print("problem | variant | status | flags | events ms | wall ms | wall/events | bounded_by | "
          "burst s (parent) | burst s (inside) | fresh s (parent) | fresh s (inside)", flush=True)
    for rel in args.problems:
        path = args.corpus / rel
        if not path.exists():
            print(f"{rel}: not in the corpus", flush=True)
            continue
        problem = load_source(path).problems[0]
        candidate = Candidate("reference", as_candidate_source(path.read_text()), "kernelbench")
        for variant in args.variants.split(","):
            options = EvalOptions(device="cuda", trials=2, baselines=("eager",), cache_dir=cache, **VARIANTS[variant])
            verdict = evaluate(problem, candidate, options).to_json()
            timing = verdict.get("timing") or {}
            requests = verdict.get("requests") or {}
            burst, fresh = requests.get("candidate.burst", {}), requests.get("candidate.fresh_burst", {})
            events, wall = timing.get("event_median_ms"), timing.get("wall_ms")
            ratio = f"{wall / events:.3f}" if events and wall else "-"
            print(f"{path.stem} | {variant} | {verdict['status']} | {','.join(verdict['flags']) or '-'} | "
                  f"{events} | {wall} | {ratio} | {timing.get('bounded_by')} | {burst.get('seconds')} | "
                  f"{burst.get('inside')} | {fresh.get('seconds')} | {fresh.get('inside')}"
                  + (f" | {verdict.get('error', '')[:200]}" if verdict["status"] != "ok" else ""), flush=True)


if __name__ == "__main__":
    main()
