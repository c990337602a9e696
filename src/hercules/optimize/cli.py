"""``hercules optimize``: the loop from the command line, and ``export-failures``."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import click

from hercules.cli_common import (
    check_base_url,
    evaluation_options,
    output_console,
    read_source,
    writable_folder,
)
from hercules.cli_common import fail as _fail
from hercules.interrupt import exit_stopped, run_until_stopped, signal_name, stop_on_signals
from hercules.problems.model import Candidate, Problem, ProblemFormatError




def _problems(paths: tuple[str, ...], sources: tuple[str, ...], name_filter: str | None) -> list[Problem]:
    from hercules.problems.loaders import load_source
    from hercules.suite.catalog import suite_problem_paths

    found: list[Problem] = []
    for source in [*paths, *sources]:
        if source == "suite":  # the built-in problems
            found += [load_source(p).problems[0] for p in suite_problem_paths()]
            continue
        found += load_source(source).problems
    if name_filter:
        found = [p for p in found if name_filter in p.name]
    names = [p.name for p in found]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ProblemFormatError(f"two problems share the name {duplicates[0]!r}")
    return found


def _seeds(folder: str | None, problems: list[Problem]) -> dict[str, list[Candidate]]:
    if not folder:
        return {}
    root = Path(folder)
    if not root.is_dir():
        raise ProblemFormatError(f"{folder}: no such candidates folder")
    return {p.name: [Candidate(f.stem, read_source(f, "seed candidate"), str(f), p.name)
                     for f in sorted((root / p.name).glob("*.py"))]
            for p in problems if (root / p.name).is_dir()}


def _backend(kind: str, replay: str | None, problems: list[Problem], samples: int, llm: dict):
    from hercules.llm.client import ChatClient, LLMError
    from hercules.optimize.backends import (
        OpenAIBackend,
        ReplayBackend,
        Sampling,
        replay_programs,
    )

    if kind == "replay":
        if not replay:
            _fail("--backend replay needs --replay FILE (a CUDA-L1 release file or a folder of programs)")
        return ReplayBackend(replay_programs(replay, problems), samples_per_round=samples, label=f"replay:{Path(replay).name}")
    check_base_url(llm["base_url"])
    try:
        client = ChatClient.from_env(llm["base_url"], llm["model"], llm["api_key"], timeout=llm["timeout"],
                                     retries=llm["retries"])
    except LLMError as exc:
        _fail(f"{exc} (or use --backend replay --replay FILE)")
    sampling = Sampling(temperature=llm["temperature"], max_tokens=llm["max_tokens"], top_p=llm["top_p"])
    return OpenAIBackend(client, sampling, concurrency=llm["concurrency"], requests_per_s=llm["rps"])


def _check_resume(store, problems: list[Problem]) -> None:
    known = store.problem_hashes()
    for p in problems:
        if p.name in known and known[p.name] != p.content_hash:
            _fail(f"{store.run_dir}: problem {p.name!r} changed since this run started; use a new --out")


@click.group("optimize", invoke_without_command=True)
@click.option("--problem", "problem_paths", multiple=True, help="A problem file (repeat for several).")
@click.option("--source", "sources", multiple=True,
              help="Problems from a folder, KernelBench checkout, HF dataset or CUDA-L1 file; 'suite': built-in.")
@click.option("--filter", "name_filter", default=None, help="Only problems whose name contains this text.")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="Only the first N problems (after --filter).")
@click.option("--candidates", "candidates_dir", default=None, help="Seed candidates: DIR/<problem>/*.py.")
@click.option("--backend", type=click.Choice(["openai", "replay"]), default="openai", show_default=True)
@click.option("--replay", default=None,
              help="Recorded programs for --backend replay (CUDA-L1 release file, or DIR/<problem>/*.py).")
@click.option("--base-url", default=None,
              help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 [env HERCULES_LLM_BASE_URL].")
@click.option("--model", default=None, help="Served model name [env HERCULES_LLM_MODEL].")
@click.option("--api-key", default=None, help="Bearer token [env HERCULES_LLM_API_KEY].")
@click.option("--temperature", default=0.7, show_default=True, type=click.FloatRange(min=0),
              help="Sampling temperature of the model.")
@click.option("--top-p", default=None, type=click.FloatRange(0, 1, min_open=True), help="Nucleus sampling.")
@click.option("--max-tokens", default=None, type=click.IntRange(min=1), help="Completion length limit per call.")
@click.option("--concurrency", default=8, show_default=True, type=click.IntRange(min=1),
              help="Model requests in flight at once.")
@click.option("--rps", default=0.0, show_default=True, type=click.FloatRange(min=0),
              help="At most this many requests started per second (0: no limit).")
@click.option("--llm-timeout", default=600.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds per model request.")
@click.option("--llm-retries", default=3, show_default=True, type=click.IntRange(min=0),
              help="Retries per request (transport errors, 429, 5xx; back-off).")
@click.option("--rounds", default=3, show_default=True, help="Rounds per problem.")
@click.option("--samples", default=2, show_default=True, help="Completions per problem and round.")
@click.option("--exemplars", default=4, show_default=True, help="Exemplars per prompt (one per speedup bucket).")
@click.option("--exemplar-temperature", default=1.0, show_default=True,
              help="Softmax temperature over speedup buckets.")
@click.option("--objective", type=click.Choice(["eager", "best"]), default="eager", show_default=True,
              help="Speedup that ranks variants: vs eager, or vs the best baseline.")
@click.option("--token-budget", default=None, type=click.IntRange(min=1),
              help="Stop the run after this many prompt+completion tokens.")
@click.option("--gpu-minutes", default=None, type=click.FloatRange(min=0, min_open=True),
              help="Stop the run after this many minutes of evaluation.")
@click.option("--patience", default=None, type=click.IntRange(min=1),
              help="Stop a problem after this many rounds without a new best.")
@click.option("--seed", default=0, show_default=True, help="Seed of the exemplar sampling.")
# Every evaluation flag but --no-timing: variants are ranked by their measured speedups.
@evaluation_options(exclude=("no_timing",), check_present="ray_address")
@click.option("--workers", default=None, type=click.IntRange(min=1),
              help="Evaluations at once (default: the executor's).")
@click.option("--ray-address", default=None, help="Evaluate on a Ray cluster ('local' starts one).")
@click.option("--out", "out", default=None, help="Run folder (default runs/optimize-<time>); rerun to resume.")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object on stdout.")
@click.pass_context
def optimize_command(ctx, problem_paths, sources, name_filter, limit, candidates_dir, backend, replay, base_url, model, api_key,
                     temperature, top_p, max_tokens, concurrency, rps, llm_timeout, llm_retries, rounds, samples,
                     exemplars, exemplar_temperature, objective, token_budget, gpu_minutes, patience, seed, evaluation,
                     workers, ray_address, out, as_json):
    """Make problems faster with a model: contrastive, score-annotated rounds over a pool of
    evaluated variants. Only an `ok` verdict without flags can be the best.

    Ctrl-C (SIGINT) or SIGTERM stops it within seconds: model calls and evaluations in flight are
    dropped, finished variants kept and reported, exit status 130 (143); the same --out resumes.

    \b
    Examples (the first two need an OpenAI-compatible server; the replay ones run as written):
      hercules optimize --problem src/hercules/suite/problems/mish_fp32.py --base-url http://127.0.0.1:8000/v1 --model M --rounds 3 --json
      hercules optimize --source suite --filter fp32 --base-url http://127.0.0.1:8000/v1 --model M --samples 4 --out runs/opt1
      hercules optimize --source suite --filter mish --backend replay --replay src/hercules/suite/candidates --rounds 2 --samples 1 --out runs/opt-replay
      hercules optimize export-failures runs/opt-replay --corpus runs/debug-corpus
    """
    if ctx.invoked_subcommand is not None:
        return
    from hercules.optimize.budget import Budget

    for name, value in (("--rounds", rounds), ("--samples", samples), ("--exemplars", exemplars)):
        if value < 1:
            _fail(f"{name} must be at least 1")
    if exemplar_temperature <= 0:
        _fail("--exemplar-temperature must be positive")
    try:
        problems = _problems(problem_paths, sources, name_filter)
        if not problems and backend == "replay" and replay:
            from hercules.problems.loaders import load_source

            problems = [p for p in load_source(replay).problems if p.metadata.get("has_candidate", True)
                        and (not name_filter or name_filter in p.name)]
        problems = problems[:limit] if limit else problems
        if not problems:
            _fail("no problem: pass --problem FILE or --source SOURCE")
        seeds = _seeds(candidates_dir, problems)
        llm = {"base_url": base_url, "model": model, "api_key": api_key, "timeout": llm_timeout, "retries": llm_retries,
                   "temperature": temperature, "max_tokens": max_tokens, "top_p": top_p, "concurrency": concurrency, "rps": rps}
        chosen = _backend(backend, replay, problems, samples, llm)
    except ProblemFormatError as exc:
        _fail(str(exc))
    options = evaluation
    budget = Budget(rounds=rounds, max_tokens=token_budget, gpu_minutes=gpu_minutes, patience=patience)
    run_dir = writable_folder(out or Path("runs") / datetime.now().strftime("optimize-%Y%m%d-%H%M%S"), "--out")
    summary = _run(problems, seeds, chosen, options, budget, run_dir, ray_address, workers,
                   {"samples": samples, "exemplars": exemplars, "temperature": exemplar_temperature, "objective": objective,
                        "seed": seed}, as_json)
    if as_json:
        click.echo(json.dumps(summary))


def _run(problems, seeds, backend, options, budget, run_dir, ray_address, workers, loop_args, as_json):
    from hercules.executor import make_executor
    from hercules.optimize.hardware import hardware_facts
    from hercules.optimize.loop import LoopConfig, Optimizer
    from hercules.optimize.report import write_reports
    from hercules.optimize.storage import RunStore

    console = output_console(stderr=True)
    store = RunStore(run_dir)
    _check_resume(store, problems)
    config = LoopConfig(budget=budget, eval_options=options, keep_artifacts=not ray_address, **loop_args)
    try:
        executor = make_executor(ray_address=ray_address, device=options.device, workers=workers)
    except (RuntimeError, ValueError) as exc:
        _fail(str(exc))
    # SIGINT/SIGTERM stops the run within seconds: the loop is cancelled where it waits (model
    # calls, evaluations), so nothing in flight becomes a variant; the workers are killed; what
    # finished is reported; a rerun with the same --out resumes the slots left.
    optimizer = None
    with stop_on_signals() as stop:
        try:
            with console.status("measuring the device for the prompt's hardware facts"):
                # where the evaluations run: on a cluster that is a GPU actor, not this (driver) process
                hardware = executor.run_on_device(hardware_facts, options.cache_dir)
            meta = {"backend": backend.name if backend.name != "replay" else backend.label,
                    "model": getattr(getattr(backend, "client", None), "model", None), "device": hardware.name,
                    "objective": loop_args["objective"], "rounds": budget.rounds, "samples": loop_args["samples"]}
            store.set_meta("last_invocation", meta)
            with _progress(console, problems, budget.rounds * loop_args["samples"], seeds) as progress:
                optimizer = Optimizer(problems, backend, executor, store, hardware, config, seeds, progress)
                states = run_until_stopped(optimizer.run())
        finally:
            _close(executor, wait=not stop.is_set())
        if stop.is_set() and optimizer is None:
            click.echo(f"hercules optimize: stopped by {signal_name()} before the first round", err=True)
            exit_stopped()
        if stop.is_set():
            states = optimizer.states
            for state in states.values():
                state.stop_reason = state.stop_reason or f"interrupted by {signal_name()} (rerun with --out to resume)"
    meta.update(tokens=optimizer.spend.tokens, eval_minutes=round(optimizer.spend.eval_seconds / 60, 2))
    summary = write_reports(run_dir, states, meta)
    store.close()
    if stop.is_set():
        summary["interrupted"] = {"signal": signal_name()}
        click.echo(f"hercules optimize: stopped by {signal_name()}; finished variants kept and reported; "
                   f"rerun with --out {run_dir} to resume", err=True)
    if not as_json:
        _print_table(output_console(), summary)  # the answer goes to stdout; progress stayed on stderr
    if stop.is_set():
        if as_json:
            click.echo(json.dumps(summary))
        exit_stopped()
    return summary


def _close(executor, wait: bool) -> None:
    """Close the executor; after a stop, give its killed evaluations a few seconds, no more."""
    if wait:
        executor.close()
        return
    import threading

    closing = threading.Thread(target=executor.close, daemon=True)
    closing.start()
    closing.join(5.0)


class _progress:
    """A rich progress bar per problem on stderr (one line per variant when not a terminal)."""

    def __init__(self, console, problems, slots, seeds):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.console = console
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("{task.fields[last]}"), console=console)
        self.tasks = {p.name: self.bar.add_task(p.name, total=slots + len(seeds.get(p.name, ())), last="")
                      for p in problems}

    def __enter__(self):
        self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        self.bar.__exit__(*exc)

    def __call__(self, event, slot, variant) -> None:
        task = self.tasks[slot.problem]
        if event in ("variant", "lost"):
            self.bar.advance(task)
            label = f"{slot.name}: {variant.status if variant else 'lost (rerun to resume)'}"
            self.bar.update(task, last=label)
            if not self.console.is_terminal:
                self.console.print(f"{slot.problem}/{label}")


def _print_table(console, summary) -> None:
    from rich.table import Table

    from hercules.report import formatting as fmt

    table = Table(title="Hercules optimize")
    for column in ("problem", "best", "status", "vs eager", "vs best", "rounds", "stopped", "file"):
        table.add_column(column, overflow="fold")
    for p in summary["problems"]:
        s, intervals = p["best_speedups"], p.get("best_intervals", {})
        table.add_row(p["name"], p["best_variant"] or "none", p["best_status"] or "none",
                      *(fmt.speedup_interval(s.get(name), intervals.get(name)) for name in ("eager", "best")),
                      str(p["rounds"]), p["stop_reason"], p["best_code_path"] or "")
    console.print(table)
    console.print(f"reports: {summary['report_md']}  {summary['report_html']}")


@optimize_command.command("export-failures")
@click.argument("run_dir")
@click.option("--corpus", required=True, help="Debugging corpus folder (CUDABeaver layout) to add instances to.")
@click.option("--status", "statuses", multiple=True,
              type=click.Choice(["build_error", "runtime_error", "crash", "timeout", "incorrect", "suspicious"]),
              help="Only these statuses (default: all but suspicious).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the instance folders.")
def export_failures_command(run_dir, corpus, statuses, as_json):
    """Turn the failing variants of an optimisation run into debugging-benchmark instances.

    \b
    Examples (after the replay example of hercules optimize --help):
      hercules optimize export-failures runs/opt-replay --corpus runs/debug-corpus
      hercules optimize export-failures runs/opt-replay --corpus runs/debug-corpus --status incorrect --json
    """
    from hercules.optimize.export import export_failures

    if not (Path(run_dir) / "optimize.sqlite").is_file():
        _fail(f"{run_dir}: not an optimisation run folder (no optimize.sqlite)")
    written = export_failures(Path(run_dir), writable_folder(corpus, "--corpus"), statuses or None)
    if as_json:
        click.echo(json.dumps({"corpus": corpus, "instances": [str(p) for p in written]}))
    else:
        click.echo(f"{len(written)} instances written under {corpus}")
