"""The CPU check of the debugging benchmark's reproduction stage, measured.

    python benchmarks/debug_cpu_compile_error.py [--corpus corpora/cudabeaver] [--out RUN]
        [--write benchmarks/results/cpu_debug_compile_error.md] [--keep-cache]

Runs, as a subprocess and timed,

    hercules debug run --corpus DIR --fixer null --category compile_error --device cpu --json --out RUN

with an empty reproduction/build cache (a fresh ``HERCULES_CACHE_DIR``, unless ``--keep-cache``),
and reads its JSON: rows, rows with a boolean ``reproduced``, reproduced rows, the fraction of
them classified as a build error, passed rows, non-reproduced rows without a
``not_reproduced_why``, and the non-reproduced rows by status and reason. Prints the markdown
table (and writes it with ``--write``); exits 1 when a criterion fails:

    every row has ``reproduced``; >= 90% of the reproduced rows are classified ``build``;
    no row is passed; every non-reproduced row says why; at most 2 rows are untested for a
    missing header.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(summary: dict) -> dict:
    rows = summary["tasks"]
    reproduced = [r for r in rows if r.get("reproduced") is True]
    build = sum(r["classified_category"] == "build" for r in reproduced)
    not_reproduced = [r for r in rows if r.get("reproduced") is not True]
    return {
        "rows": len(rows),
        "rows_with_boolean_reproduced": sum(isinstance(r.get("reproduced"), bool) for r in rows),
        "reproduced": len(reproduced),
        "reproduced_classified_build": build,
        "build_fraction": build / len(reproduced) if reproduced else None,
        "passed": sum(bool(r["passed"]) for r in rows),
        "not_reproduced_without_why": [r["task_id"] for r in not_reproduced if not r.get("not_reproduced_why")],
        # status -> why_kind -> rows, as the run's JSON counts them (summary.reproduction.counts)
        "not_reproduced_by_reason": {f"{status}: {kind}": n
                                     for by_status in summary["reproduction"]["counts"]["reasons"].values()
                                     for status, kinds in by_status.items() for kind, n in kinds.items()},
        "example_why": {f"{r['reproduction_status']}": r["not_reproduced_why"][:160] for r in not_reproduced},
        # untested because a header cannot be had here (the broken file's or the reference's build):
        # task -> header, as the row's why names it (issue 32 allows at most 2)
        "untested_missing_header": {r["task_id"]: _header(r["not_reproduced_why"]) for r in not_reproduced
                                    if r.get("reproduction_status") == "untested"
                                    and _header(r["not_reproduced_why"] or "")},
    }


def _header(why: str) -> str | None:
    m = re.search(r"fatal error: ([^:\s]+): No such file", why)
    return m.group(1) if m else None


def criteria(m: dict) -> dict[str, bool]:
    return {
        "every row has reproduced (a boolean)": m["rows_with_boolean_reproduced"] == m["rows"],
        ">= 90% of reproduced rows classified build": m["build_fraction"] is not None and m["build_fraction"] >= 0.9,
        "no row passed": m["passed"] == 0,
        "every non-reproduced row says why": not m["not_reproduced_without_why"],
        "at most 2 rows untested for a missing header": len(m["untested_missing_header"]) <= 2,
    }


def markdown(m: dict, seconds: float, corpus: str, commit: str, load: tuple[float, float, float]) -> str:
    frac = "-" if m["build_fraction"] is None else f"{m['build_fraction']:.3f}"
    commit = f"`{commit.split()[0]}`" + commit[len(commit.split()[0]):]
    lines = [
        "# CPU check: `hercules debug run --fixer null --category compile_error --device cpu --json`", "",
        f"Corpus `{corpus}`, code at {commit}, empty reproduction and build caches; measured by "
        "`benchmarks/debug_cpu_compile_error.py`.", "",
        "| rows | rows with boolean `reproduced` | reproduced | reproduced classified `build` | build fraction "
        "| passed | non-reproduced without why | seconds | machine |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {m['rows']} | {m['rows_with_boolean_reproduced']} | {m['reproduced']} | {m['reproduced_classified_build']} "
        f"| {frac} | {m['passed']} | {len(m['not_reproduced_without_why'])} | {seconds:.0f} "
        f"| {platform.machine()}, {os.cpu_count()} CPU cores, no GPU; load average at the start "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min) |",
        "", "| criterion | met |", "|---|---|",
        *(f"| {k} | {'yes' if v else 'NO'} |" for k, v in criteria(m).items()),
        "", "Rows not reproduced (excluded from pass@k), by status and reason:", "",
        "| status: reason | rows |", "|---|---|",
        *(f"| {k} | {v} |" for k, v in sorted(m["not_reproduced_by_reason"].items(), key=lambda kv: -kv[1])),
        "", f"Rows untested for a missing header: {len(m['untested_missing_header'])}", "",
        *(f"- {k}: `{v}`" for k, v in sorted(m["untested_missing_header"].items())),
        "", "One `not_reproduced_why` of each status:", "",
        *(f"- {k}: {v}" for k, v in sorted(m["example_why"].items())),
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="corpora/cudabeaver")
    ap.add_argument("--out", default=None, help="run folder (default: a fresh temporary one)")
    ap.add_argument("--write", default=None, help="write the markdown table to this file")
    ap.add_argument("--keep-cache", action="store_true", help="use the usual cache (reproductions may be cached)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hercules-debug-cpu-"))
    out = Path(args.out) if args.out else work / "run"
    env = dict(os.environ)
    if not args.keep_cache:
        env["HERCULES_CACHE_DIR"] = str(work / "cache")
    cmd = [sys.executable, "-m", "hercules.debug.cli", "run", "--corpus", args.corpus, "--fixer", "null",
           "--category", "compile_error", "--device", "cpu", "--json", "--out", str(out)]
    load = os.getloadavg()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    (work / "stderr.log").write_text(proc.stderr)
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        print(f"exit status {proc.returncode}; log {work / 'stderr.log'}", file=sys.stderr)
        return 2
    m = measure(json.loads(proc.stdout))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "src/hercules/debug"], cwd=ROOT,
                           check=False).returncode != 0
    if dirty:
        commit += " plus uncommitted changes under src/hercules/debug"
    text = markdown(m, seconds, args.corpus, commit, load)
    print(text)
    print(json.dumps(m | {"seconds": round(seconds, 1), "run": str(out)}), file=sys.stderr)
    if args.write:
        Path(args.write).write_text(text)
    return 0 if all(criteria(m).values()) else 1


if __name__ == "__main__":
    sys.exit(main())
