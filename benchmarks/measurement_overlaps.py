"""What ran beside each measurement of a bench run: for every evaluation whose self-speedup (a
reference submitted as its own candidate) falls outside a band, the phases of the other
evaluations that overlapped its ``measuring`` spans (the device held alone), from the verdicts'
``spans``.

    python benchmarks/measurement_overlaps.py RUN_DIR [--low 0.95 --high 1.05]

A measurement holds the device lock, so neighbours' trials and timing cannot overlap it; what can is
their work outside any section (worker setup, candidate builds, compiling a torch.compile baseline,
which runs the model and autotunes). Reading the overlaps tells which of those inflates figures.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def load(run_dir: Path) -> dict[str, dict]:
    verdicts = {}
    for path in sorted(run_dir.rglob("verdict.json")):
        verdict = json.loads(path.read_text())
        verdicts[str(path.parent.relative_to(run_dir))] = verdict
    return verdicts


def self_speedup(verdict: dict) -> float | None:
    eager = (verdict.get("baselines_ms") or {}).get("eager")
    cand = verdict.get("cand_ms")
    return eager / cand if eager and cand else None


def overlaps(verdicts: dict[str, dict], name: str) -> list[tuple[float, float, list[str]]]:
    """(start, end, neighbour phases) per measuring span of ``name``, times from the run's start."""
    spans = [(n, phase, a, b) for n, v in verdicts.items() for phase, a, b in v.get("spans") or ()]
    if not spans:
        return []
    origin = min(a for _, _, a, _ in spans)
    found = []
    for n, phase, a, b in spans:
        if n != name or phase != "measuring":
            continue
        beside = sorted({f"{other}:{p}" for other, p, c, d in spans
                         if other != name and c < b and d > a and p not in ("lock_wait", "measuring")})
        found.append((a - origin, b - origin, beside))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--low", type=float, default=0.95)
    parser.add_argument("--high", type=float, default=1.05)
    args = parser.parse_args()
    verdicts = load(args.run_dir)
    if not any(v.get("spans") for v in verdicts.values()):
        raise SystemExit(f"no verdict under {args.run_dir} carries spans (written since 99909e5)")
    counts: dict[str, int] = {}
    outside = 0
    for name, verdict in verdicts.items():
        ratio = self_speedup(verdict)
        if ratio is None or args.low <= ratio <= args.high:
            continue
        outside += 1
        timing = verdict.get("timing") or {}
        print(f"{name}: self-speedup {ratio:.3f} (events {timing.get('event_median_ms', 0):.3f}, "
              f"wall {timing.get('wall_ms') or 0:.3f}, eager {verdict['baselines_ms']['eager']:.3f} ms)")
        for start, end, beside in overlaps(verdicts, name):
            print(f"  measuring {start:7.1f}-{end:7.1f} s beside: {', '.join(beside) or 'nothing'}")
            for entry in beside:
                phase = entry.rsplit(":", 1)[1]
                counts[phase] = counts.get(phase, 0) + 1
    print(f"\n{outside} of {len(verdicts)} evaluations outside [{args.low}, {args.high}]; neighbour phases "
          "beside their measurements: " + ", ".join(f"{p} {c}" for p, c in sorted(counts.items(), key=lambda x: -x[1])))


if __name__ == "__main__":
    main()
