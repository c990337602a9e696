"""The optimiser's replay backend on the GPU: the recorded programs of a CUDA-L1 release-format
file, evaluated through ``hercules optimize --backend replay`` (the whole pipeline, no model),
and a table of speedups against every baseline (eager, torch.compile, reduce-overhead, CUDA graph).

    python benchmarks/optimize_replay_h200.py                          # the small file beside this script
    python benchmarks/optimize_replay_h200.py cuda_l1/h200.json --limit 8   # the real release (first 8 tasks)
    python benchmarks/optimize_replay_h200.py --check-build            # CPU machine with nvcc: compile only

``optimize_replay_h200.jsonl`` holds four honest ``load_inline`` kernels written for Hercules (not
by CUDA-L1) in the release's record format: fused Mish, a block-per-row sum, a row softmax, and a
fused ReLU-and-scale epilogue after cuBLAS's addmm; plus one task with ``custom_code: null`` (the
release's "nothing faster found"), which is left out. Its ``score_*`` fields are null: nobody
published figures for these kernels. For a real release file the table shows CUDA-L1's published
``score_default`` beside our measurement.

Writes three files under $OUT (else ./runs): ``optimize_replay_h200.md`` (the table),
``optimize_replay_h200.json`` (rows and the optimiser's summary) and ``optimize_replay_run.tgz``
(the run folder without build products: SQLite, prompts, verdicts, logs, report.md/html, best/).
The run folder itself is ``--run-dir`` (default runs/optimize-replay-h200, kept between calls
on a warm machine, as is the build cache .hercules/cache unless HERCULES_CACHE_DIR is set).
The run stops itself after ``--time-limit`` seconds (default 320) and the table is made from
what finished; rerunning the same command resumes the run without redoing finished evaluations.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_RELEASE = HERE / "optimize_replay_h200.jsonl"
BASELINES = ("eager", "compile", "compile_reduce_overhead", "cudagraph", "best")


def _speedup(value) -> str:
    return f"{value:.2f}x" if isinstance(value, (int, float)) else "-"


def run_optimize(release: Path, run_dir: Path, args: argparse.Namespace) -> dict | None:
    cmd = [sys.executable, "-m", "hercules.cli", "optimize", "--backend", "replay", "--replay", str(release),
           "--rounds", "1", "--samples", "1", "--device", args.device, "--workers", str(args.workers),
           "--budget", str(args.budget), "--out", str(run_dir), "--json"]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    if args.filter:
        cmd += ["--filter", args.filter]
    if args.baselines:
        cmd += ["--baselines", args.baselines]
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    # stderr (one progress line per evaluation) goes straight to the console; stdout is the JSON.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])),
           "PYTHONUNBUFFERED": "1"}
    env.setdefault("HERCULES_CACHE_DIR", str(ROOT / ".hercules" / "cache"))
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True, env=env)
    try:
        out, _ = proc.communicate(timeout=args.time_limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # the run folder keeps every finished evaluation; rerun to resume
        proc.communicate()
        print(f"stopped after {args.time_limit} s; the table holds what finished", file=sys.stderr)
        return None
    if proc.returncode != 0:
        print(f"hercules optimize exited with {proc.returncode}", file=sys.stderr)
        return None
    return json.loads(out)


def published_scores(release: Path) -> dict[str, float | None]:
    sys.path.insert(0, str(ROOT / "src"))
    from hercules.problems.loaders import load_source

    return {c.problem: c.score.get("score_default") for c in load_source(release).candidates}


def table_rows(run_dir: Path, scores: dict[str, float | None]) -> list[dict]:
    db = run_dir / "optimize.sqlite"
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = []
    for problem, status, verdict in conn.execute(
            "SELECT problem, status, verdict FROM variants WHERE origin = 'replay' ORDER BY problem, round, sample"):
        v = json.loads(verdict) if verdict else {}
        speedup = v.get("speedup") or {}
        rows.append({"problem": problem, "status": status, "flags": v.get("flags") or [],
                     "cand_ms": v.get("cand_ms"), "baselines_ms": v.get("baselines_ms") or {},
                     **{f"vs_{b}": speedup.get(b) for b in BASELINES}, "sol_fraction": v.get("sol_fraction"),
                     "published_score_default": scores.get(problem),
                     "error": (v.get("error") or "")[:200] if status != "ok" else ""})
    conn.close()
    return rows


def markdown(rows: list[dict], release: Path, seconds: float) -> str:
    head = ["problem", "status", "cand ms", "eager ms", *(f"vs {b}" for b in BASELINES), "SOL", "CUDA-L1 score", "flags / error"]
    lines = [f"# Replay of {release.name} ({len(rows)} programs, {seconds:.0f} s)", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        eager = r["baselines_ms"].get("eager")
        lines.append("| " + " | ".join([
            r["problem"], r["status"], f"{r['cand_ms']:.4f}" if r["cand_ms"] else "-",
            f"{eager:.4f}" if eager else "-", *(_speedup(r[f"vs_{b}"]) for b in BASELINES),
            f"{r['sol_fraction']:.2f}" if r["sol_fraction"] else "-", _speedup(r["published_score_default"]),
            (", ".join(r["flags"]) + " " + r["error"]).strip().replace("|", "/")]) + " |")
    return "\n".join(lines) + "\n"


def check_build(release: Path) -> int:
    """Compile every custom_code's CUDA source for sm_90 with nvcc (no GPU needed), through the
    built-in suite's compile check (one translation unit, stub headers for a CPU torch wheel)."""
    import importlib.util

    sys.path.insert(0, str(ROOT / "src"))
    spec = importlib.util.spec_from_file_location("suite_compile", ROOT / "tests" / "suite" / "test_suite_reference.py")
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for line in release.read_text().splitlines():
            record = json.loads(line) if line.strip() else {}
            if record.get("custom_code"):
                path = Path(tmp) / f"level{record['level_id']}_task{record['task_id']}.py"
                path.write_text(record["custom_code"])
                paths.append(path)
        started = time.perf_counter()
        rc, log = suite._compile_cuda(paths, Path(tmp))
    print(log[-6000:] if rc else f"{len(paths)} CUDA sources compile for sm_90 ({time.perf_counter() - started:.0f} s)")
    return rc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("release", nargs="?", default=str(DEFAULT_RELEASE), help="CUDA-L1 release-format file")
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks with a program")
    parser.add_argument("--filter", default=None, help="only tasks whose name contains this (e.g. level1_)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--workers", type=int, default=4, help="evaluations at once (builds overlap; timing is serial per GPU)")
    parser.add_argument("--budget", type=float, default=0.3, help="seconds of timed repetitions per measurement")
    parser.add_argument("--baselines", default=None, help="default: every baseline the device has")
    parser.add_argument("--time-limit", type=float, default=320.0, help="stop the run after this many seconds")
    parser.add_argument("--run-dir", default=str(ROOT / "runs" / "optimize-replay-h200"), help="the run folder (rerun to resume)")
    parser.add_argument("--check-build", action="store_true", help="only compile the CUDA sources with nvcc")
    args = parser.parse_args()
    release = Path(args.release).resolve()
    if not release.is_file():
        print(f"{release}: no such file", file=sys.stderr)
        return 2
    if args.check_build:
        return check_build(release)
    out = Path(os.environ.get("OUT") or ROOT / "runs")
    out.mkdir(parents=True, exist_ok=True)
    run_dir = Path(args.run_dir)
    started = time.perf_counter()
    summary = run_optimize(release, run_dir, args)
    seconds = time.perf_counter() - started
    rows = table_rows(run_dir, published_scores(release))
    text = markdown(rows, release, seconds)
    print(text)
    (out / "optimize_replay_h200.md").write_text(text)
    (out / "optimize_replay_h200.json").write_text(json.dumps({"release": str(release), "seconds": seconds, "rows": rows,
                                                                 "summary": summary}, indent=1, default=str))
    if run_dir.is_dir():
        with tarfile.open(out / "optimize_replay_run.tgz", "w:gz") as tar:
            tar.add(run_dir, arcname=run_dir.name, filter=lambda m: None if m.name.endswith((".so", ".o", ".ninja_deps")) else m)
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
