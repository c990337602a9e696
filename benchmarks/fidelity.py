"""Timing fidelity: one candidate evaluated in N separate processes; medians should agree.

    python benchmarks/fidelity.py --problem P.py --candidate C.py [--runs 5] [--device cuda]

Prints each process's median and the largest deviation from the median of medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", required=True)
    parser.add_argument("--candidate", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    medians = []
    for run in range(args.runs):
        out = subprocess.run([sys.executable, "-m", "hercules.cli", "eval", "--problem", args.problem,
                              "--candidate", args.candidate, "--device", args.device, "--baselines", "eager",
                              "--json"], capture_output=True, text=True, check=True)
        verdict = json.loads(out.stdout)
        timing = verdict["timing"] or {}
        medians.append(verdict["cand_ms"])
        print(f"process {run}: status {verdict['status']}, median {verdict['cand_ms']:.5f} ms, "
              f"IQR {timing.get('iqr_ms', 0):.5f} ms, reps {timing.get('reps')}, wall {timing.get('wall_ms'):.5f} ms")
    centre = statistics.median(medians)
    spread = max(abs(m - centre) / centre for m in medians)
    print(f"median of medians {centre:.5f} ms; max deviation {100 * spread:.2f}%; "
          f"max/min {max(medians) / min(medians):.4f}")


if __name__ == "__main__":
    main()
