"""The ``hercules`` command line."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import click

from hercules.cli_common import evaluation_options, output_console, read_source, writable_folder
from hercules.cli_common import fail as _fail
from hercules.compile.cli import compile_command, generate_command
from hercules.debug.cli import debug_group
from hercules.interrupt import exit_stopped, signal_name, stop_on_signals
from hercules.optimize.cli import optimize_command
from hercules.problems.model import Candidate, Problem, ProblemFormatError
from hercules.serve.cli import serve_command


def _load_one_problem(path: str) -> Problem:
    from hercules.problems.loaders import load_source

    if Path(path).is_dir():
        _fail(f"{path}: is a folder; give one problem file (hercules list {path} shows what it holds)")
    try:
        loaded = load_source(path)
    except ProblemFormatError as exc:
        _fail(str(exc))
    if len(loaded.problems) != 1:
        _fail(f"{path}: expected one problem, found {len(loaded.problems)}")
    return loaded.problems[0]


def _load_candidate(path: str, problem: str) -> Candidate:
    code = read_source(path, "candidate")
    return Candidate(name=Path(path).stem, code=code, source=str(path), problem=problem)


class _OneLineErrors(click.Group):
    """Every unusable input ends with one line on stderr and exit status 2, click's own usage
    errors (a missing option, a bad choice) included, instead of a usage block."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:  # a caller that handles click's exceptions itself
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx else "hercules"
            message = exc.format_message().strip('"')  # a KeyError's text comes quoted
            _fail(f"{message} (see {command} --help)")
        except click.ClickException as exc:
            click.echo(f"hercules: error: {' '.join(exc.format_message().split())}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:  # Ctrl-C outside the commands that stop cleanly (before one started)
            click.echo("hercules: interrupted", err=True)
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="hercules")
def main() -> None:
    """Hercules: trustworthy evaluation and optimisation of LLM-written CUDA kernels.

    Every example in every command's --help runs as written from the project's root, on the
    built-in suite's files (src/hercules/suite).

    \b
    Examples:
      hercules list src/hercules/suite/problems
      hercules eval --problem src/hercules/suite/problems/mish_fp32.py --candidate src/hercules/suite/candidates/mish_fp32/torch_mish.py --json
      hercules bench --filter mish                     # part of the built-in suite, local device
    """


@main.command("list")
@click.argument("source")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array, one object per problem.")
@click.option("--no-sizes", is_flag=True, help="Leave out the bytes and FLOPs (each costs a forward on the "
              "meta device, up to a second; a large checkout lists faster without).")
def list_command(source: str, as_json: bool, no_sizes: bool) -> None:
    """List the problems in SOURCE with what each one costs before anything runs: bytes of its
    inputs, parameters (and buffers) and outputs, and its FLOPs (counted matmuls, convolutions and
    attention), from a forward on the meta device (no memory, no arithmetic).

    SOURCE is a problem file, a folder of them, a KernelBench checkout (or one of its level
    folders), a local Hugging Face dataset in the KernelBench layout, or a CUDA-L1 release file.

    \b
    Examples:
      hercules list src/hercules/suite/problems
      hercules list src/hercules/suite/problems/matmul_fp32.py --json
      hercules list src/hercules/suite/problems --no-sizes
    """
    from hercules.problems.footprint import FORWARD_LIMIT_S, sizes
    from hercules.problems.loaders import load_source, problem_summary
    from hercules.report import formatting as fmt

    try:
        loaded = load_source(source)
    except ProblemFormatError as exc:
        _fail(str(exc))
    summaries = []
    for p in loaded.problems:
        summary = problem_summary(p)
        if not no_sizes:
            summary["sizes"] = sizes(p.code, p.source)
        summaries.append(summary)
    if as_json:
        click.echo(json.dumps(summaries))
        return
    from rich.table import Table

    size_columns = () if no_sizes else ("inputs", "params", "outputs", "FLOPs")
    table = Table(title=f"{len(summaries)} problems ({loaded.kind})")
    for column in ("level", "id", "name", "dtype", *size_columns, "source"):
        table.add_column(column, overflow="fold", justify="right" if column in size_columns else "left")
    for s in summaries:
        row = [str(s.get("level") or ""), str(s.get("problem_id") or ""), s["name"], s.get("dtype", "")]
        if not no_sizes:
            z = s["sizes"]
            row += [fmt.size(z["input_bytes"]), fmt.size(z["param_bytes"]), fmt.size(z["output_bytes"]),
                    fmt.flops(z["flops"])]
        table.add_row(*row, s["source"])
    console = output_console()
    console.print(table)
    if not no_sizes:
        console.print("FLOPs: matmuls, convolutions and attention as torch.utils.flop_counter counts them "
                      "(elementwise and reduction work counts 0); params include buffers")
    unknown = [s["name"] for s in summaries if not no_sizes and s["sizes"]["error"]]
    if unknown:
        console.print(f"sizes n/a for {len(unknown)}: the meta-device forward failed or ran past "
                      f"{FORWARD_LIMIT_S:g} s ({', '.join(unknown[:5])}{', ...' if len(unknown) > 5 else ''})")
    for warning in loaded.warnings:
        console.print(f"[yellow]warning:[/] {warning}")


@main.command("eval")
@click.option("--problem", "problem_path", required=True, help="KernelBench-format problem file.")
@click.option("--candidate", "candidate_path", required=True, help="File defining ModelNew.")
@evaluation_options()
@click.option("--artifacts", default=None, help="Keep sources, logs and verdict.json in this folder.")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object on stdout.")
def eval_command(problem_path, candidate_path, evaluation, artifacts, as_json):
    """Evaluate one candidate against one problem.

    Exit status 0 whenever an evaluation happened, whatever the verdict; 2 with one line when the
    inputs cannot be used.

    \b
    Examples:
      hercules eval --problem src/hercules/suite/problems/mish_fp32.py --candidate src/hercules/suite/candidates/mish_fp32/torch_mish.py --json
      hercules eval --problem src/hercules/suite/problems/rmsnorm_fp32.py --candidate src/hercules/suite/candidates/rmsnorm_fp32/triton_rows.py --baselines eager
      hercules eval --problem src/hercules/suite/problems/mish_fp32.py --candidate src/hercules/suite/candidates/mish_fp32/torch_mish.py --tolerance kernelbench --no-timing
    """
    from hercules.harness.evaluate import evaluate

    from hercules.problems.footprint import check_memory

    problem = _load_one_problem(problem_path)
    candidate = _load_candidate(candidate_path, problem.name)
    options = evaluation
    memory = check_memory(problem.code, problem.name, _device_name(options.device))
    if memory.refusal:
        _fail(memory.refusal)
    if memory.warning:
        click.echo(f"hercules eval: warning: {memory.warning}", err=True)
    if artifacts:
        options = replace(options, artifacts_dir=writable_folder(artifacts, "--artifacts"))
    if as_json:
        verdict = evaluate(problem, candidate, options)
        click.echo(json.dumps(verdict.to_json()))
        return
    console = output_console()
    with console.status(f"evaluating {candidate.name} on {problem.name}"):
        verdict = evaluate(problem, candidate, options)
    from hercules.report.console import print_verdict

    print_verdict(console, verdict)


@main.command("bench")
@click.argument("sources", nargs=-1)
@click.option("--candidates", "candidates_dir", default=None,
              help="Folder with one sub-folder of candidate files per problem name.")
@evaluation_options(check_present="ray_address")
@click.option("--run-dir", default=None, help="Resumable run folder (default runs/<timestamp>); rerun to resume.")
@click.option("--jobs", default=None, type=click.IntRange(min=1), help="Parallel builds (default: CPU count).")
@click.option("--eval-jobs", default=None, type=click.IntRange(min=1),
              help="Evaluations in flight (default 2 on a GPU, 1 on the CPU); measurements still take the "
                   "device one at a time. With --ray-address and --device cpu: the number of CPU actors.")
@click.option("--ray-address", default=None, metavar="HOST:PORT|local",
              help="Evaluate on a Ray cluster, one actor per GPU across its machines (two evaluations each, "
                   "one measuring at a time); 'local' starts a private instance here. The run folder, store "
                   "and reports stay with this command.")
@click.option("--pipeline", is_flag=True,
              help="Start each evaluation as soon as its own build is done, instead of after all builds: "
                   "faster for many compiled candidates, but compilers then share the host with timings.")
@click.option("--filter", "name_filter", default=None, help="Only problems whose name contains this text.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
def bench_command(sources, candidates_dir, evaluation, run_dir, jobs, eval_jobs, ray_address, pipeline, name_filter,
                  as_json):
    """Evaluate problems x candidates into a run folder, a SQLite store and reports.

    With no SOURCES: the built-in suite with its example candidates on the local device.

    Ctrl-C (SIGINT) or SIGTERM stops it within seconds: the evaluations in flight are dropped (never
    recorded as the candidate's failure), the finished ones reported, exit status 130 (143); the
    same --run-dir resumes. The whole suite takes about 5 minutes alone on a 2-core CPU machine
    (several times that beside other work); --filter picks a few problems.

    \b
    Examples:
      hercules bench                                   # the built-in suite with its example candidates
      hercules bench --filter mish --run-dir runs/mish # rerun the same command to resume after a stop
      hercules bench src/hercules/suite/problems --candidates src/hercules/suite/candidates --filter fp32
      hercules bench src/hercules/suite/problems --candidates src/hercules/suite/candidates --filter rmsnorm --pipeline --eval-jobs 2
      hercules bench KernelBench/level1 --ray-address HEAD:6379 --run-dir runs/l1  # a Ray cluster's GPUs
    """
    from hercules.harness.batch import run_bench
    from hercules.report.bench import collect_items, print_summary, write_reports

    try:
        items = collect_items(sources, candidates_dir, name_filter)
    except ProblemFormatError as exc:
        _fail(str(exc))
    if not items:
        _fail("no problem has a candidate to evaluate" + (f" (none matches --filter {name_filter})" if name_filter
                                                          else ""))
    if ray_address and (jobs is not None or pipeline):
        _fail("--jobs and --pipeline do not apply with --ray-address: each actor builds the candidates it "
              "evaluates (the cluster's machines have their own compilers and caches)")
    options = evaluation
    if not ray_address:  # a cluster's memory is its machines', not known here
        _warn_too_large(items, options.device)
    folder = writable_folder(run_dir or Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S"), "--run-dir")
    executor = _bench_cluster(ray_address, options.device, eval_jobs)

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # A wide table when written to a file or pipe (CI logs, the GPU machine); the terminal's otherwise.
    console = output_console(stderr=as_json, piped_width=180)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[last]}"), console=console, transient=False) as bar:
        builds = bar.add_task("build", total=len(items), last="")
        evals = bar.add_task("evaluate", total=len(items), last="")

        def progress(event: str, item, verdict) -> None:
            label = f"{item.problem.name}/{item.candidate.name}"
            if event == "lost":  # not recorded: a rerun with the same --run-dir evaluates it
                console.print(f"lost      {label}: its Ray actor died on every attempt")
                return
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
            try:
                rows = run_bench(items, folder, options, build_jobs=jobs, eval_jobs=eval_jobs, pipeline=pipeline,
                                 progress=progress, executor=executor)
            finally:
                _release(executor, stop.is_set())
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


def _bench_cluster(ray_address: str | None, device: str, eval_jobs: int | None):
    """The Ray executor for ``--ray-address`` (None without), its actors listed on stderr: one line
    each, with host and GPU, so that a user sees every GPU got its own."""
    if not ray_address:
        return None
    from hercules.executor import make_executor

    try:
        executor = make_executor(ray_address=ray_address, device=device, workers=eval_jobs)
    except (ValueError, RuntimeError, ConnectionError) as exc:
        _fail(f"--ray-address {ray_address}: {exc}")
    placements = executor.placements()
    click.echo(f"hercules bench: {len(placements)} Ray actor(s), {executor.capacity} evaluations at once", err=True)
    for line in placements:
        click.echo(f"  actor: {line}", err=True)
    return executor


def _release(executor, stopped: bool) -> None:
    """Close the executor; after a stop, abandon it: its actors are killed (their evaluations must
    end, wherever they run) and nothing waits for Ray to wind down."""
    if executor is None:
        return
    if stopped:
        executor.abandon()
    else:
        executor.close()


def _device_name(device: str) -> str:
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _warn_too_large(items, device: str) -> None:
    """Say up front, with the numbers, which problems cannot fit where they will run (their
    evaluations would end as an out-of-memory or killed worker, minutes later)."""
    from hercules.problems.footprint import check_memory

    seen: set[str] = set()
    for item in items:
        if item.problem.name not in seen:
            seen.add(item.problem.name)
            memory = check_memory(item.problem.code, item.problem.name, _device_name(device))
            if said := memory.refusal or memory.warning:
                click.echo(f"hercules bench: warning: {said}", err=True)


# The compiler's commands (hercules generate / hercules compile) live with the compiler.
main.add_command(generate_command, "generate")
main.add_command(compile_command, "compile")
main.add_command(debug_group, "debug")
main.add_command(optimize_command, "optimize")
main.add_command(serve_command, "serve")

if __name__ == "__main__":
    main()
