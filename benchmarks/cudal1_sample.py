"""A sample of CUDA-L1 release records, spread over levels, written as a release file of its own.

    python benchmarks/cudal1_sample.py ../shared/corpora/cudal1/a100.json --per-level 12 --seed 1 \
        --out runs/cudal1/a100_sample.json

Records without a kernel (``custom_code`` null) are left out. The same seed gives the same sample.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("release", type=Path)
    parser.add_argument("--per-level", type=int, default=12)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip", type=Path, nargs="*", default=[], help="sample files whose records to leave out")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    taken = {(r["level_id"], r["task_id"]) for f in args.skip for r in map(json.loads, f.read_text().splitlines())}
    records = [json.loads(line) for line in args.release.read_text().splitlines() if line.strip()]
    rng = random.Random(args.seed)
    chosen = []
    for level in sorted({r["level_id"] for r in records}):
        pool = [r for r in records if r["level_id"] == level
                and str(r.get("custom_code") or "").strip() not in ("", "None", "null")
                and (r["level_id"], r["task_id"]) not in taken]
        chosen += rng.sample(pool, min(args.per_level, len(pool)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in chosen))
    print(f"{len(chosen)} records -> {args.out}")


if __name__ == "__main__":
    main()
