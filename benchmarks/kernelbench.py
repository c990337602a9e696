"""KernelBench references evaluated as their own candidates: every one should come out `ok`, no flag.

    python benchmarks/kernelbench.py [--corpus DIR] [--run-dir D] [--device cuda]        # the 60-problem sample
    python benchmarks/kernelbench.py --full                                               # all 250 of levels 1-3
    python benchmarks/kernelbench.py --smallest 3 --device cpu --baselines eager --budget 0.05 --trials 2

The corpus is `--corpus`, else $HERCULES_KERNELBENCH, else /work/shared/corpora/kernelbench.

Each problem file's own `Model` becomes the candidate `ModelNew` (`as_candidate_source`), so the
candidate computes exactly what the reference does: a verdict other than `ok`, a flag, or a
self-speedup far from 1.0 is the harness's doing, not the candidate's.

Sampling rule (`sample`): within each level, files are ordered by their numeric id (the text before
the first `_`, as upstream KernelBench numbers them), and of the N files the ones at positions
floor(i * N / 20) for i = 0..19 are taken. For N = 100 (levels 1 and 2) that is every 5th problem
starting with the first (ids 1, 6, 11, ..., 96); for N = 50 (level 3) the positions 0, 2, 5, 7, 10,
..., 47 spread the 20 over the whole level instead of stopping at id 40 as a fixed step of 2 would.
The rule depends only on the file names, so the same corpus always gives the same sample.

`--smallest N` takes the N problems of the chosen levels with the least work: the FLOPs that
torch.utils.flop_counter counts in one forward, plus the bytes of the tensors `get_inputs()`
returns, of the parameters and buffers of `Model(*get_init_inputs())` and of the outputs. All of
it is made under `torch.device("meta")`: shapes and dtypes only, no memory, no arithmetic
(`--smallest 3`: ~12 s on 2 cores, 8 of them the RNNs' forwards, cut off at one second each).
Input bytes alone would rank badly: level 1's tall-skinny matmul takes 8 MB and returns 4 GB,
level 3's RegNet takes 5 MB and costs 120 GFLOP, and the level-3 networks with the smallest
activations carry 10-550 MB of weights. A file whose work cannot be measured that way (an import that fails, `.item()` on a
meta tensor, a meta forward not done in a second: the RNNs) ranks after every measured one.

The run folder is resumable (finished verdicts are read back, not re-run); caches are cold by
default (`RUN_DIR/cache`), so compiled baselines and device ceilings are measured in this run.
Every verdict is printed, flushed, as it arrives; SIGTERM or SIGINT writes the summary of what
has finished before exiting. At the end: `RUN_DIR/kernelbench_summary.md` and `.json`, plus the
standard bench reports (`summary.md`, `report.html`).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import re
import signal
import statistics
import sys
import time
import tokenize
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from hercules.harness.batch import BenchItem, BenchRow, run_bench
from hercules.harness.evaluate import EvalOptions
from hercules.harness.records import Status, Verdict
from hercules.problems.footprint import FORWARD_LIMIT_S, Footprint
from hercules.problems.footprint import footprint as problem_footprint
from hercules.problems.loaders import load_source
from hercules.problems.model import Candidate

DEFAULT_CORPUS = Path(os.environ.get("HERCULES_KERNELBENCH", "/work/shared/corpora/kernelbench"))
LEVELS = (1, 2, 3)
PER_LEVEL = 20
CUDA_BASELINES = ("eager", "compile", "compile_reduce_overhead", "cudagraph")
CANDIDATE_NAME = "reference"
# A self-speedup counts as "within noise" inside this band (issue 34: at least 95% of ok ones);
# below this eager time the launch overhead and timer resolution dominate and the band says
# nothing about the harness.
SELF_BAND = (0.97, 1.03)
MIN_EAGER_MS = 0.05
ERROR_CHARS = 200

_ID = re.compile(r"^(\d+)_")


# ----------------------------------------------------------------------------- choosing problems


def problem_id(path: Path) -> int:
    m = _ID.match(path.name)
    return int(m.group(1)) if m else sys.maxsize


def level_files(corpus_dir: Path, level: int) -> list[Path]:
    """The problem files of one level, in KernelBench's own numbering (1, 2, ..., not 1, 10, 100)."""
    folder = corpus_dir / f"level{level}"
    return sorted((f for f in folder.glob("*.py") if f.name != "__init__.py"), key=lambda f: (problem_id(f), f.name))


def spread(files: Sequence[Path], count: int) -> list[Path]:
    """COUNT files at positions floor(i * len / COUNT): evenly over the whole list, first one included."""
    if count >= len(files):
        return list(files)
    return [files[i * len(files) // count] for i in range(count)]


def sample(corpus_dir: Path, per_level: int = PER_LEVEL, levels: Sequence[int] = LEVELS) -> list[Path]:
    """The stratified sample of the module docstring: PER_LEVEL files of each level."""
    return [f for level in levels for f in spread(level_files(Path(corpus_dir), level), per_level)]


def every_problem(corpus_dir: Path, levels: Sequence[int] = LEVELS) -> list[Path]:
    return [f for level in levels for f in level_files(Path(corpus_dir), level)]


def footprint(path: Path, forward: bool = False, limit_s: float = FORWARD_LIMIT_S) -> Footprint:
    """The footprint of one corpus file (see hercules.problems.footprint); ``.path`` says which."""
    found = problem_footprint(path.read_text(), str(path), forward, limit_s)
    return _WithPath(**vars(found), path=path)


@dataclass(frozen=True)
class _WithPath(Footprint):
    path: Path = Path()


def smallest(corpus_dir: Path, n: int, levels: Sequence[int] = LEVELS) -> list[Footprint]:
    """The N problems with the least work (FLOPs + bytes of inputs, weights and outputs), ascending.

    Best-first: files are visited in order of inputs + weights, a lower bound of their work, and
    forward runs only until that bound exceeds the N-th smallest work found: large problems are
    never run forward, and the RNNs (small weights and inputs, slow meta forwards) are cut off at
    FORWARD_LIMIT_S. Files whose work cannot be measured come last.
    """
    bounded = [footprint(f) for f in every_problem(corpus_dir, levels)]
    bounded.sort(key=lambda s: (s.known_bytes is None, s.known_bytes or 0, _order(s.path)))
    measured: list[Footprint] = []
    unmeasurable: list[Footprint] = []
    for s in bounded:
        if s.known_bytes is None:
            unmeasurable.append(s)
            continue
        works = sorted(m.work for m in measured)
        if len(works) >= n and s.known_bytes > works[n - 1]:
            continue  # its work exceeds the N-th smallest already, whatever its outputs and FLOPs
        full = footprint(s.path, forward=True)
        (measured if full.work is not None else unmeasurable).append(full)
    measured.sort(key=lambda s: (s.work, _order(s.path)))
    return (measured + unmeasurable)[:n]


def _order(path: Path) -> tuple[str, int]:
    return path.parent.name, problem_id(path)


def choose(args: argparse.Namespace) -> list[Path]:
    if args.smallest:
        chosen = smallest(args.corpus, args.smallest, args.levels)
        for s in chosen:
            print(f"footprint {s.path.parent.name}/{s.path.name}: work {s.work}, inputs {_mb(s.input_bytes)}, "
                  f"weights {_mb(s.weight_bytes)}, outputs {_mb(s.output_bytes)}, "
                  f"{_fmt(s.flops and s.flops / 1e9, '.3f')} GFLOP" + (f" ({s.error})" if s.error else ""),
                  flush=True)
        files = [s.path for s in chosen]
    elif args.full:
        files = every_problem(args.corpus, args.levels)
    else:
        files = sample(args.corpus, args.per_level, args.levels)
    if args.filter:
        files = [f for f in files if any(text in f.name for text in args.filter)]
    return files[: args.limit] if args.limit else files


def _mb(n: int | None) -> str:
    return "?" if n is None else f"{n / 1e6:.2f} MB"


# ----------------------------------------------------------------------------- reference as candidate


def as_candidate_source(code: str, old: str = "Model", new: str = "ModelNew") -> str:
    """The problem source with every use of the name OLD (the class, `super(Model, self)`, calls)
    renamed to NEW. Only NAME tokens change: docstrings and comments that say "Model" stay as
    they are, and names such as `CumulativeProductModel` are other tokens."""
    lines = io.StringIO(code).readlines()  # split as tokenize splits (not on form feeds)
    hits = [tok.start for tok in tokenize.generate_tokens(io.StringIO(code).readline)
            if tok.type == tokenize.NAME and tok.string == old]
    for row, col in reversed(hits):  # from the end, so earlier positions stay valid
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[col + len(old):]
    return "".join(lines)


def bench_item(path: Path) -> BenchItem:
    # A single file inside levelN/ keeps its level and id (load_source reads the folder's name).
    problem = load_source(path).problems[0]
    candidate = Candidate(name=CANDIDATE_NAME, code=as_candidate_source(problem.code), source=str(path),
                          problem=problem.name)
    return BenchItem(problem=problem, candidate=candidate)


# ----------------------------------------------------------------------------- summary


def _level(row: BenchRow) -> int:
    return row.item.problem.level or 0


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def verdict_line(event: str, item: BenchItem, verdict: Verdict) -> str:
    return (f"L{item.problem.level} {item.problem.name:60.60s} {verdict.status.value:13s} "
            f"flags={','.join(verdict.flags) or '-'} self_vs_eager={_fmt(verdict.speedup.eager)} "
            f"cand_ms={_fmt(verdict.cand_ms, '.4f')} seconds={verdict.seconds:.1f}"
            + (" (resumed)" if event == "resumed" else ""))


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _counts(values: Sequence[str]) -> dict[str, int]:
    return dict(Counter(values).most_common())


def _correct_kernelbench(v: Verdict) -> bool:
    return bool(v.check is not None and getattr(v.check, "correct_kernelbench", None))


def level_summary(rows: Sequence[BenchRow]) -> dict[str, Any]:
    verdicts = [r.verdict for r in rows]
    speedups = [v.speedup.eager for v in verdicts if v.speedup.eager is not None and math.isfinite(v.speedup.eager)]
    # The noise band is judged only where eager is long enough for a timer to resolve it.
    banded = [v.speedup.eager for v in verdicts
              if v.speedup.eager is not None and v.ref_ms is not None and v.ref_ms >= MIN_EAGER_MS]
    inside = [s for s in banded if SELF_BAND[0] <= s <= SELF_BAND[1]]
    sols = [v.sol_fraction for v in verdicts if v.sol_fraction is not None]
    # Eager timed beside the candidate: how often the interval holds 1.0 (it should, at 95%) and
    # how wide it is.
    intervals = [v.speedup.interval("eager") for v in verdicts if v.speedup.interval("eager")]
    return {
        "problems": len(verdicts),
        "statuses": _counts([v.status.value for v in verdicts]),
        "flags": _counts([f for v in verdicts for f in v.flags]),
        "ok_no_flag": sum(v.status is Status.OK and not v.flags for v in verdicts),
        "self_speedup_eager": {
            "median": _median(speedups),
            "min": min(speedups, default=None),
            "max": max(speedups, default=None),
            "n": len(speedups),
            "within_band": len(inside),
            "band_eligible": len(banded),
            "share_within_band": len(inside) / len(banded) if banded else None,
            "intervals": len(intervals),
            "interval_holds_one": sum(low <= 1.0 <= high for low, high in intervals),
            "interval_width_median": _median([high - low for low, high in intervals]),
        },
        "seconds_median": _median([v.seconds for v in verdicts]),
        "correct_strict": sum(bool(v.correct) for v in verdicts),
        "correct_kernelbench": sum(_correct_kernelbench(v) for v in verdicts),
        "sol_fraction_max": max(sols, default=None),
    }


def phase_medians(verdicts: Sequence[Verdict]) -> dict[str, dict[str, float]]:
    by_phase: dict[str, list[float]] = {}
    for v in verdicts:
        for phase, seconds in (v.phases or {}).items():
            by_phase.setdefault(phase, []).append(float(seconds))
    return {phase: {"median_s": statistics.median(s), "n": len(s)} for phase, s in sorted(by_phase.items())}


def not_clean(rows: Sequence[BenchRow]) -> list[dict[str, Any]]:
    """Every problem whose own reference was not `ok` or carried a flag: each one is a harness question."""
    return [{
        "level": _level(r), "problem": r.item.problem.name, "status": r.verdict.status.value,
        "flags": list(r.verdict.flags), "cause": r.verdict.cause.value,
        "error": (r.verdict.error or "")[:ERROR_CHARS], "notes": list(r.verdict.notes),
    } for r in rows if r.verdict.status is not Status.OK or r.verdict.flags]


def summarise(rows: Sequence[BenchRow], wall_s: float, options: EvalOptions, complete: bool) -> dict[str, Any]:
    levels = sorted({_level(r) for r in rows})
    return {
        "complete": complete,
        "device": options.device,
        "baselines": list(options.baselines or ()),
        "trials": options.trials,
        "timing_budget_s": options.timing_budget_s,
        "problems": len(rows),
        "resumed": sum(r.resumed for r in rows),
        "wall_s": wall_s,
        "levels": {str(lvl): level_summary([r for r in rows if _level(r) == lvl]) for lvl in levels},
        "all": level_summary(rows),
        "phases": phase_medians([r.verdict for r in rows if not r.resumed]),
        "not_clean": not_clean(rows),
        "verdicts": [{
            "level": _level(r), "problem": r.item.problem.name, "status": r.verdict.status.value,
            "flags": list(r.verdict.flags), "self_speedup_eager": r.verdict.speedup.eager,
            "self_interval_eager": r.verdict.speedup.interval("eager"),
            "cand_ms": r.verdict.cand_ms, "ref_ms": r.verdict.ref_ms, "seconds": r.verdict.seconds,
            "correct": r.verdict.correct, "correct_kernelbench": _correct_kernelbench(r.verdict),
            "sol_fraction": r.verdict.sol_fraction, "cause": r.verdict.cause.value, "resumed": r.resumed,
        } for r in rows],
    }


def _cell_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {n}" for k, n in counts.items()) or "-"


def render_markdown(summary: dict[str, Any]) -> str:
    out = [f"# KernelBench references as their own candidates ({summary['device']})", "",
           f"{summary['problems']} problems ({summary['resumed']} resumed), baselines "
           f"{', '.join(summary['baselines']) or 'all'}, trials {summary['trials']}, timing budget "
           f"{summary['timing_budget_s']} s; wall {summary['wall_s']:.1f} s"
           + ("" if summary["complete"] else " (interrupted: partial)"), "",
           "| level | problems | verdicts | flags | ok, no flag | self vs eager median [min, max] "
           f"| within {SELF_BAND[0]}-{SELF_BAND[1]} (eager >= {MIN_EAGER_MS} ms) | interval holds 1 "
           "| interval width median | s/eval median | strict correct | KB-tol correct | max SOL |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    named = [(f"level {k}", v) for k, v in summary["levels"].items()] + [("all", summary["all"])]
    for name, s in named:
        sp = s["self_speedup_eager"]
        share = "-" if sp["share_within_band"] is None else f"{sp['within_band']}/{sp['band_eligible']}"
        out.append(f"| {name} | {s['problems']} | {_cell_counts(s['statuses'])} | {_cell_counts(s['flags'])} "
                   f"| {s['ok_no_flag']} | {_fmt(sp['median'])} [{_fmt(sp['min'])}, {_fmt(sp['max'])}] | {share} "
                   f"| {sp['interval_holds_one']}/{sp['intervals']} | {_fmt(sp['interval_width_median'])} "
                   f"| {_fmt(s['seconds_median'], '.1f')} | {s['correct_strict']} | {s['correct_kernelbench']} "
                   f"| {_fmt(s['sol_fraction_max'])} |")
    out += ["", "## Phases (median seconds over this run's evaluations)", "", "| phase | median s | n |", "|---|---|---|"]
    out += [f"| {p} | {d['median_s']:.2f} | {d['n']} |" for p, d in summary["phases"].items()]
    out += ["", "## Not ok, or flagged", ""]
    if not summary["not_clean"]:
        out.append("none")
    for p in summary["not_clean"]:
        error = p["error"].replace("\n", " ").replace("|", "/")
        out.append(f"- L{p['level']} {p['problem']}: {p['status']}, flags {', '.join(p['flags']) or '-'}, "
                   f"cause {p['cause']}: {error}")
    return "\n".join(out) + "\n"


def write_summary(rows: Sequence[BenchRow], run_dir: Path, wall_s: float, options: EvalOptions,
                  complete: bool) -> dict[str, Any]:
    summary = summarise(rows, wall_s, options, complete)
    text = render_markdown(summary)
    (run_dir / "kernelbench_summary.md").write_text(text)
    (run_dir / "kernelbench_summary.json").write_text(json.dumps(summary, indent=1))
    print(text, flush=True)
    return summary


# ----------------------------------------------------------------------------- command line


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="folder with level1/ level2/ level3/")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--full", action="store_true", help="every problem of the chosen levels")
    which.add_argument("--smallest", type=int, default=0, metavar="N",
                       help="the N problems with the least work: FLOPs + bytes moved (for CPU runs)")
    p.add_argument("--levels", type=int, nargs="+", default=list(LEVELS))
    p.add_argument("--per-level", type=int, default=PER_LEVEL)
    p.add_argument("--filter", action="append", default=None,
                   help="only files whose name contains this text (of those chosen); repeat for several")
    p.add_argument("--limit", type=int, default=0, help="at most this many problems (after --filter)")
    p.add_argument("--device", default="auto")
    p.add_argument("--baselines", default=None,
                   help=f"comma-separated; default {','.join(CUDA_BASELINES)} on CUDA, eager on CPU")
    p.add_argument("--trials", type=int, default=EvalOptions.trials)
    p.add_argument("--budget", type=float, default=EvalOptions.timing_budget_s, help="timing budget, seconds")
    p.add_argument("--tolerance", choices=("strict", "kernelbench"), default="strict",
                   help="what decides correctness: Hercules' strict checks or upstream's atol = rtol = 1e-2")
    p.add_argument("--run-dir", type=Path, default=None, help="resumable; default runs/kernelbench-<time>")
    p.add_argument("--cache-dir", type=Path, default=None, help="default: a fresh RUN_DIR/cache (cold)")
    p.add_argument("--pipeline", action="store_true")
    p.add_argument("--eval-jobs", type=int, default=None)
    return p.parse_args(argv)


def eval_options(args: argparse.Namespace, run_dir: Path) -> EvalOptions:
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.baselines:
        baselines = tuple(b.strip() for b in args.baselines.split(",") if b.strip())
    else:
        baselines = CUDA_BASELINES if device.startswith("cuda") else ("eager",)
    return EvalOptions(device=device, baselines=baselines, trials=args.trials, timing_budget_s=args.budget,
                       tolerance=args.tolerance,
                       cache_dir=args.cache_dir or run_dir / "cache")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not (args.corpus / "level1").is_dir():
        print(f"{args.corpus}: no KernelBench levels here", file=sys.stderr)
        return 2
    run_dir = args.run_dir or Path("runs") / time.strftime("kernelbench-%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    options = eval_options(args, run_dir)
    started = time.perf_counter()
    files = choose(args)
    items = [bench_item(f) for f in files]
    print(f"{len(items)} problems, device {options.device}, baselines {','.join(options.baselines or ())}, "
          f"run dir {run_dir}, cache {options.cache_dir}", flush=True)
    finished: list[BenchRow] = []

    def progress(event: str, item: BenchItem, verdict: Verdict | None) -> None:
        if verdict is None:
            return
        finished.append(BenchRow(item, verdict, resumed=event == "resumed"))
        print(verdict_line(event, item, verdict), flush=True)

    def interrupted(signum: int, _frame: Any) -> None:
        # The GPU machine's call limit ends the process: leave the summary of what did finish.
        print(f"signal {signum}: writing the summary of {len(finished)} finished evaluations", flush=True)
        write_summary(list(finished), run_dir, time.perf_counter() - started, options, complete=False)
        os._exit(128 + signum)

    previous = {s: signal.signal(s, interrupted) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        rows = run_bench(items, run_dir, options, eval_jobs=args.eval_jobs, pipeline=args.pipeline,
                         progress=progress)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    write_summary(rows, run_dir, time.perf_counter() - started, options, complete=True)

    from hercules.report.bench import write_reports

    write_reports(rows, run_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
