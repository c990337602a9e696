"""The ``hercules`` command line."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import click

from hercules.cli_common import eval_options as _eval_options
from hercules.cli_common import fail as _fail
from hercules.compile.cli import compile_command, generate_command
from hercules.debug.cli import debug_group
from hercules.interrupt import exit_stopped, signal_name, stop_on_signals
from hercules.optimize.cli import optimize_command
from hercules.problems.model import Candidate, Problem, ProblemFormatError
from hercules.serve.cli import serve_command


def _load_one_problem(path: str) -> Problem:
    from hercules.problems.loaders import load_source

    try:
        loaded = load_source(path)
    except ProblemFormatError as exc:
        _fail(str(exc))
    if len(loaded.problems) != 1:
        _fail(f"{path}: expected one problem, found {len(loaded.problems)}")
    return loaded.problems[0]


def _load_candidate(path: str, problem: str) -> Candidate:
    file = Path(path)
    if not file.is_file():
        _fail(f"{path}: no such candidate file")
    return Candidate(name=file.stem, code=file.read_text(), source=str(file), problem=problem)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="hercules")
def main() -> None:
    """Hercules: trustworthy evaluation and optimisation of LLM-written CUDA kernels.

    \b
    Examples:
      hercules bench                                   # built-in suite, local device
      hercules list path/to/KernelBench/level1 --json
      hercules eval --problem P.py --candidate C.py --device cpu --json
    """


@main.command("list")
@click.argument("source")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array, one object per problem.")
def list_command(source: str, as_json: bool) -> None:
    """List the problems in SOURCE.

    SOURCE is a problem file, a folder of them, a KernelBench checkout (or one of its level
    folders), a local Hugging Face dataset in the KernelBench layout, or a CUDA-L1 release file.

    \b
    Examples:
      hercules list KernelBench/KernelBench --json
      hercules list cuda_l1/h100.json --json
    """
    from hercules.problems.loaders import load_source, problem_summary

    try:
        loaded = load_source(source)
    except ProblemFormatError as exc:
        _fail(str(exc))
    summaries = [problem_summary(p) for p in loaded.problems]
    if as_json:
        click.echo(json.dumps(summaries))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(summaries)} problems ({loaded.kind})")
    for column in ("level", "id", "name", "dtype", "source"):
        table.add_column(column)
    for s in summaries:
        table.add_row(str(s.get("level") or ""), str(s.get("problem_id") or ""), s["name"], s.get("dtype", ""), s["source"])
    console = Console()
    console.print(table)
    for warning in loaded.warnings:
        console.print(f"[yellow]warning:[/] {warning}")


_device_option = click.option("--device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto", show_default=True,
                              help="Where to run; auto picks cuda when a GPU is present.")
_trials_option = click.option("--trials", default=5, show_default=True, help="Correctness trials on fresh inputs.")
_budget_option = click.option("--budget", default=0.3, show_default=True, help="Seconds of timed repetitions per measurement.")
_baselines_option = click.option("--baselines", default=None,
                                 help="Comma list of eager,compile,compile_reduce_overhead,cudagraph,expert (default: all the device supports; expert where the problem names its operation).")
_no_timing_option = click.option("--no-timing", is_flag=True, help="Check correctness only.")
_cache_option = click.option("--cache-dir", default=None, help="Build and baseline cache (default ~/.cache/hercules).")
_tolerance_option = click.option(
    "--tolerance", type=click.Choice(["strict", "kernelbench"]), default="strict", show_default=True,
    help="strict: Hercules' tolerances against the float64 truth, precision below the problem's dtype flagged; "
         "kernelbench: upstream KernelBench's atol = rtol = 1e-2 decides correctness, to reproduce published "
         "results (every verdict reports both).")


@main.command("eval")
@click.option("--problem", "problem_path", required=True, help="KernelBench-format problem file.")
@click.option("--candidate", "candidate_path", required=True, help="File defining ModelNew.")
@_device_option
@_trials_option
@_budget_option
@_baselines_option
@_no_timing_option
@_cache_option
@_tolerance_option
@click.option("--artifacts", default=None, help="Keep sources, logs and verdict.json in this folder.")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object on stdout.")
def eval_command(problem_path, candidate_path, device, trials, budget, baselines, no_timing, cache_dir, tolerance,
                 artifacts, as_json):
    """Evaluate one candidate against one problem.

    Exit status 0 whenever an evaluation happened, whatever the verdict.

    \b
    Examples:
      hercules eval --problem relu.py --candidate relu_cuda.py --json
      hercules eval --problem relu.py --candidate relu_triton.py --device cpu --baselines eager
    """
    from hercules.harness.evaluate import evaluate

    problem = _load_one_problem(problem_path)
    candidate = _load_candidate(candidate_path, problem.name)
    options = _eval_options(device, trials, budget, baselines, no_timing, cache_dir, tolerance)
    if artifacts:
        options = replace(options, artifacts_dir=Path(artifacts))
    if as_json:
        verdict = evaluate(problem, candidate, options)
        click.echo(json.dumps(verdict.to_json()))
        return
    from rich.console import Console

    console = Console(stderr=False)
    with console.status(f"evaluating {candidate.name} on {problem.name}"):
        verdict = evaluate(problem, candidate, options)
    from hercules.report.console import print_verdict

    print_verdict(console, verdict)


@main.command("bench")
@click.argument("sources", nargs=-1)
@click.option("--candidates", "candidates_dir", default=None,
              help="Folder with one sub-folder of candidate files per problem name.")
@_device_option
@_trials_option
@_budget_option
@_baselines_option
@_no_timing_option
@_cache_option
@_tolerance_option
@click.option("--run-dir", default=None, help="Resumable run folder (default runs/<timestamp>); rerun to resume.")
@click.option("--jobs", default=None, type=click.IntRange(min=1), help="Parallel builds (default: CPU count).")
@click.option("--eval-jobs", default=None, type=click.IntRange(min=1),
              help="Evaluations in flight (default 2 on a GPU, 1 on the CPU); measurements still take the "
                   "device one at a time.")
@click.option("--pipeline", is_flag=True,
              help="Start each evaluation as soon as its own build is done, instead of after all builds: "
                   "faster for many compiled candidates, but compilers then share the host with timings.")
@click.option("--filter", "name_filter", default=None, help="Only problems whose name contains this text.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
def bench_command(sources, candidates_dir, device, trials, budget, baselines, no_timing, cache_dir, tolerance, run_dir,
                  jobs, eval_jobs, pipeline, name_filter, as_json):
    """Evaluate problems x candidates into a run folder, a SQLite store and reports.

    With no SOURCES: the built-in suite with its example candidates on the local device.

    \b
    Examples:
      hercules bench
      hercules bench --run-dir runs/nightly            # resume after a kill
      hercules bench KernelBench/level1 --candidates my_kernels/ --device cuda
      hercules bench cuda_l1/h100.json                 # CUDA-L1 records carry their candidates
      hercules bench my_problems/ --candidates gen/ --pipeline --eval-jobs 3   # many load_inline builds
    """
    from hercules.harness.batch import run_bench
    from hercules.report.bench import collect_items, print_summary, write_reports

    try:
        items = collect_items(sources, candidates_dir, name_filter)
    except ProblemFormatError as exc:
        _fail(str(exc))
    if not items:
        _fail("no problem has a candidate to evaluate")
    options = _eval_options(device, trials, budget, baselines, no_timing, cache_dir, tolerance)
    folder = Path(run_dir or Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S"))

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # A wide table when written to a file or pipe (CI logs, the GPU machine); the terminal's otherwise.
    console = Console(stderr=as_json, width=None if sys.stdout.isatty() else 180)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[last]}"), console=console, transient=False) as bar:
        builds = bar.add_task("build", total=len(items), last="")
        evals = bar.add_task("evaluate", total=len(items), last="")

        def progress(event: str, item, verdict) -> None:
            label = f"{item.problem.name}/{item.candidate.name}"
            if not console.is_terminal:  # no live bar in a log file: one line per finished step
                console.print(f"{event:9s} {label}" + (f": {verdict.status.value}" if verdict else ""))
            if event == "built":
                bar.advance(builds)
                bar.update(builds, last=label)
            else:
                if event == "resumed":
                    bar.advance(builds)
                bar.advance(evals)
                bar.update(evals, last=f"{label}: {verdict.status.value}")

        # SIGINT/SIGTERM (Ctrl-C, a time guard) stops the run within seconds: evaluations in flight
        # are cancelled and recorded as nothing, the finished ones are reported, and a rerun with
        # the same --run-dir evaluates the rest.
        with stop_on_signals() as stop:
            rows = run_bench(items, folder, options, build_jobs=jobs, eval_jobs=eval_jobs, pipeline=pipeline,
                             progress=progress)
            if not stop.is_set():
                bar.update(builds, completed=len(items))
    summary = write_reports(rows, folder)
    if stop.is_set():
        summary["interrupted"] = {"signal": signal_name(), "finished": len(rows), "left": len(items) - len(rows)}
        click.echo(f"hercules bench: stopped by {signal_name()}: {len(rows)} of {len(items)} evaluations finished "
                   f"and reported; rerun with --run-dir {folder} to evaluate the other {len(items) - len(rows)}",
                   err=True)
    if as_json:
        click.echo(json.dumps(summary))
    else:
        print_summary(console, rows, folder)
    if stop.is_set():
        exit_stopped()


# The compiler's commands (hercules generate / hercules compile) live with the compiler.
main.add_command(generate_command, "generate")
main.add_command(compile_command, "compile")
main.add_command(debug_group, "debug")
main.add_command(optimize_command, "optimize")
main.add_command(serve_command, "serve")

if __name__ == "__main__":
    main()
