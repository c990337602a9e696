"""``hercules debug``: the CUDA debugging benchmark.

    hercules debug list --corpus corpora/cudabeaver --category compile_error --json
    hercules debug run --corpus DIR --fixer null --category compile_error --device cpu --out RUN --json
    hercules debug run --fixer replay --fixer degenerate --protocol n=1,iter=1 --protocol n=2,iter=2,fb=evidence
    hercules debug run --fixer http --base-url http://127.0.0.1:8000/v1 --model M --protocol n=4,T=0.8
    hercules debug validate --corpus DIR --category compile_error --device cpu --json
    hercules debug report RUN [--rescore] [--reproduce-from-rounds --corpus DIR]

With ``--json`` exactly one JSON object goes to stdout; progress goes to stderr. A run resumes
where it stopped when given the same ``--out``. SIGINT or SIGTERM stops ``run`` and ``validate``
within seconds (builds, tests and evaluation workers in flight killed and not recorded); ``run``
then writes a partial summary whose ``progress`` says what is done and what is left, and exits
with status 130 (SIGINT) or 143 (SIGTERM).

``run`` first reproduces every instance (``reproduce``: the broken file and the reference through
the instance's own commands, cached per instance and toolchain) and scores pass@k over the
reproduced instances only; ``--all`` scores every instance. An attempt of exactly what the
reproduction ran (``null``: the broken file, ``replay``: the reference) under the same conditions
takes the reproduction's recorded outcome (``reuse``; the row says ``reused_from``); ``--no-reuse``
runs every attempt.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

import click

from hercules.cli_common import check_base_url, evaluation_options, writable_folder
from hercules.debug.corpus import CorpusError, default_corpus_dir, load_corpus
from hercules.debug.interrupt import exit_stopped, stop_on_signals
from hercules.interrupt import signal_name


# The evaluation group (hercules.cli_common) less what the benchmark fixes for every attempt so
# that attempts, reproductions and their cache compare alike: eager as the one baseline, the
# strict tolerance, timing on, the core's default trials.
_evaluation_flags = evaluation_options(exclude=("trials", "baselines", "no_timing", "tolerance"))


def _corpus_option(f):
    return click.option("--corpus", "corpus_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                        help="corpus folder (default: the vendored corpora/cudabeaver, or shared/ beside the repo)")(f)


def _filters(f):
    for opt in (
        click.option("--family", multiple=True, help="only these task families (repeatable)"),
        click.option("--category", multiple=True, help="only these labelled error categories (repeatable)"),
        click.option("--difficulty", multiple=True, help="only these difficulties (repeatable)"),
        click.option("--task", multiple=True, help="only these task ids (repeatable)"),
        click.option("--limit", type=click.IntRange(min=1), default=None,
                     help="at most this many instances (after filters)"),
    ):
        f = opt(f)
    return f


def _check_filters(load, **wanted) -> None:
    """A filter value that names nothing in the whole corpus is a typo, not an empty selection
    (``--task no_such`` listed 0 instances and exited 0)."""
    for option, values in wanted.items():
        known = load.known["task_id" if option == "task" else option]
        unknown = [v for v in values if v not in known]
        if unknown:
            hint = ("`hercules debug list` names them" if option == "task"
                    else "it has " + ", ".join(sorted(known)))
            raise click.UsageError(f"--{option} {', '.join(unknown)}: not in the corpus ({hint})")


def _load(corpus_dir, family, category, difficulty, task, limit):
    corpus_dir = corpus_dir or default_corpus_dir()
    if corpus_dir is None:
        raise click.UsageError("no corpus found: give --corpus DIR")
    try:
        load = load_corpus(corpus_dir, families=tuple(family), categories=tuple(category),
                           difficulties=tuple(difficulty), task_ids=tuple(task))
        _check_filters(load, family=family, category=category, difficulty=difficulty, task=task)
    except CorpusError as exc:
        raise click.UsageError(str(exc)) from None
    for problem in load.problems:
        click.echo(f"skipping malformed instance {problem.path.name}: {problem.message}", err=True)
    instances = load.instances[:limit] if limit else load.instances
    return load, instances


@click.group("debug")
def debug_group():
    """CUDA debugging benchmark: real failing workspaces, native build/test, classifier, pass@k(M,C,A).

    The corpus defaults to the vendored corpora/cudabeaver (or shared/ beside the project).

    \b
    Examples:
      hercules debug list --category compile_error
      hercules debug validate --category compile_error --device cpu --limit 2
      hercules debug run --fixer null --category compile_error --device cpu --limit 2 --out runs/debug1 --json
      hercules debug report runs/debug1
    """


@debug_group.command("list")
@_corpus_option
@_filters
@click.option("--json", "as_json", is_flag=True)
def list_command(corpus_dir, family, category, difficulty, task, limit, as_json):
    """List (and validate) the corpus instances.

    \b
    Examples:
      hercules debug list --category compile_error
      hercules debug list --limit 5 --json
    """
    load, instances = _load(corpus_dir, family, category, difficulty, task, limit)
    rows = [{"task_id": i.task_id, "family": i.family, "category": i.category, "difficulty": i.difficulty,
             "kind": i.kind, "solution_file": i.solution_file} for i in instances]
    if as_json:
        click.echo(json.dumps({"corpus": str(load.root), "instances": rows,
                               "malformed": [{"path": str(p.path), "error": p.message} for p in load.problems]}))
        return
    for r in rows:
        click.echo(f"{r['task_id']:70s} {r['kind']:12s} {r['difficulty']}")
    click.echo(f"{len(rows)} instances, {len(load.problems)} malformed", err=True)


def _fixers(names, base_url, model, api_key):
    from hercules.debug.fixers import SCRIPTED, HttpFixer

    fixers = {}
    for name in names:
        if name == "http":
            from hercules.llm.client import ChatClient, LLMError

            check_base_url(base_url)
            try:
                client = ChatClient.from_env(base_url, model, api_key)
            except (LLMError, ValueError) as exc:
                raise click.UsageError(f"--fixer http: {exc}") from None
            fixer = HttpFixer(client)
        elif name in SCRIPTED:
            fixer = SCRIPTED[name]()
        else:
            raise click.UsageError(f"unknown fixer {name!r} (replay, null, degenerate, http)")
        fixers[fixer.name] = fixer
    return fixers


def write_reports(run_dir: Path, summary: dict) -> str:
    """summary.json, report.md and report.html of a run; returns the markdown."""
    from hercules.debug.report import html_report, markdown
    from hercules.debug.store import write_json_atomic
    from hercules.fileio import write_text_atomic

    write_json_atomic(run_dir / "summary.json", summary)
    text = markdown(summary)
    write_text_atomic(run_dir / "report.md", text)
    write_text_atomic(run_dir / "report.html", html_report(text))
    return text


def _reproduction_cache(opts):
    from hercules.debug.reproduce import ReproductionCache, default_cache_root

    return ReproductionCache(default_cache_root(opts.cache_dir))


def _reproductions(instances, tc, opts, jobs, gpu_lock=None):
    """Every instance's reproduction (cached under the cache dir), progress on stderr; a stopped
    run returns the ones finished."""
    from hercules.debug.reproduce import cached_count, progress_line, reproduce_all, toolchain_identity

    cache = _reproduction_cache(opts)
    identity, device, _ = toolchain_identity(tc)
    click.echo(f"reproduce: {cached_count(instances, tc, opts, cache)} of {len(instances)} instances cached for this "
               f"toolchain, device and these options ({identity}; {device})", err=True)

    def progress(done, total, rep):
        click.echo("reproduce " + progress_line(done, total, rep), err=True)

    return reproduce_all(instances, tc, opts, cache, jobs, progress, gpu_lock)


def _toolchain_and_options(evaluation, build_timeout, test_timeout):
    from hercules.debug.attempt import RunOptions
    from hercules.debug.toolchain import toolchain

    device, cache = evaluation.device, evaluation.cache_dir
    if device not in ("auto", "cpu", "cuda"):
        raise click.UsageError(f"--device {device}: the debugging benchmark takes auto, cpu or cuda")
    tc = toolchain(device, cache)
    if device == "cuda" and not tc.gpu_present:
        raise click.UsageError("--device cuda: no GPU found")
    return tc, RunOptions(device=device, build_timeout_s=build_timeout, test_timeout_s=test_timeout,
                          timing_budget_s=evaluation.timing_budget_s, cache_dir=cache)


def validation_summary(load, reproductions, tc) -> dict:
    from hercules.debug.reproduce import counts, toolchain_identity

    identity, device, _ = toolchain_identity(tc)
    return {"corpus": str(load.root), "toolchain": identity, "device": device,
            "instances": [r.row() for r in reproductions], "counts": counts(reproductions),
            "malformed": [{"path": str(p.path), "error": p.message} for p in load.problems]}


@debug_group.command("validate")
@_corpus_option
@_filters
@_evaluation_flags
@click.option("--jobs", type=int, default=2, show_default=True, help="instances validated in parallel")
@click.option("--build-timeout", type=float, default=300.0, show_default=True)
@click.option("--test-timeout", type=float, default=180.0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print one JSON object on stdout")
def validate_command(corpus_dir, family, category, difficulty, task, limit, evaluation, jobs, build_timeout,
                     test_timeout, as_json):
    """Reproduce each instance: its broken file and its reference through the instance's own build
    and test commands on this device, compared with its label (cached per instance and toolchain).

    \b
    Examples:
      hercules debug validate --category compile_error --device cpu --limit 2 --json
      hercules debug validate --task cuda_104__compile_error__f8160fc8 --device cpu
    """
    if jobs < 1 or build_timeout <= 0 or test_timeout <= 0:
        raise click.UsageError("--jobs, --build-timeout and --test-timeout must be positive")
    load, instances = _load(corpus_dir, family, category, difficulty, task, limit)
    if not instances:
        raise click.UsageError("no instance matches the filters")
    tc, opts = _toolchain_and_options(evaluation, build_timeout, test_timeout)
    with stop_on_signals() as stop:  # a stop keeps the finished (cached) ones and reports them
        summary = validation_summary(load, _reproductions(instances, tc, opts, jobs), tc)
        if as_json:
            click.echo(json.dumps(summary, default=str))
        else:
            for row in summary["instances"]:
                click.echo(f"{row['task_id']:60s} {row['status']:15s} {row['not_reproduced_why'] or ''}")
            for cat, c in summary["counts"]["by_category"].items():
                click.echo(f"{cat}: " + ", ".join(f"{k} {v}" for k, v in c.items()))
        if stop.is_set():
            click.echo(f"validate: stopped by {signal_name()} after {len(summary['instances'])} of {len(instances)}",
                       err=True)
            _exit_stopped()


@debug_group.command("run")
@_corpus_option
@_filters
@click.option("--fixer", "fixer_names", multiple=True, default=("null",), show_default=True,
              help="replay | null | degenerate | http (repeatable)")
@click.option("--protocol", "protocol_specs", multiple=True, default=("n=1,iter=1,fb=log,p=0.7",),
              show_default=True, help="n=,iter=,fb=none|code|log|evidence|profile,hist=,T=,seed=,p= (repeatable)")
@click.option("--k", "ks", multiple=True, type=int, default=(1,), show_default=True, help="pass@k for these k")
@_evaluation_flags
@click.option("--out", "run_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="run directory (default runs/debug-<timestamp>); the same one resumes")
@click.option("--jobs", type=int, default=2, show_default=True, help="trajectories (builds) in parallel")
@click.option("--build-timeout", type=float, default=300.0, show_default=True)
@click.option("--test-timeout", type=float, default=180.0, show_default=True)
@click.option("--base-url", default=None, help="http fixer: OpenAI-compatible base URL (or HERCULES_LLM_BASE_URL)")
@click.option("--model", default=None, help="http fixer: model name (or HERCULES_LLM_MODEL)")
@click.option("--api-key", default=None, help="http fixer: API key (or HERCULES_LLM_API_KEY)")
@click.option("--all", "score_all", is_flag=True,
              help="score pass@k over every instance (default: only the instances reproduced here)")
@click.option("--no-reuse", "no_reuse", is_flag=True,
              help="run every attempt, even one that is exactly a run the reproduction made (same file, "
                   "instance, toolchain, device and options), whose outcome is otherwise taken")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object (summary) on stdout")
def run_command(corpus_dir, family, category, difficulty, task, limit, fixer_names, protocol_specs, ks, evaluation,
                run_dir, jobs, build_timeout, test_timeout, base_url, model, api_key, score_all, no_reuse,
                as_json):
    """Run fixers over the corpus under one or more protocols; write RUN/summary.json and reports.

    Ctrl-C (SIGINT) or SIGTERM stops it within seconds (exit status 130 or 143); the same --out
    resumes.

    \b
    Examples:
      hercules debug run --fixer null --category compile_error --device cpu --limit 2 --out runs/debug1 --json
      hercules debug run --fixer replay --fixer null --protocol n=1,iter=1 --device cpu --limit 2
      hercules debug report runs/debug1
    """
    device = evaluation.device
    from hercules.debug.protocol import Protocol
    from hercules.debug.report import summarise
    from hercules.debug.runner import Benchmark
    from hercules.debug.store import DebugStore, write_json_atomic
    from hercules.debug.toolchain import toolchain_identity

    try:
        protocols = [Protocol.parse(s) for s in protocol_specs]
    except ValueError as exc:
        raise click.UsageError(f"--protocol: {exc}") from None
    if any(k < 1 for k in ks):
        raise click.UsageError("--k must be >= 1")
    if jobs < 1 or build_timeout <= 0 or test_timeout <= 0:
        raise click.UsageError("--jobs, --build-timeout and --test-timeout must be positive")
    load, instances = _load(corpus_dir, family, category, difficulty, task, limit)
    if not instances:
        raise click.UsageError("no instance matches the filters")
    fixers = _fixers(fixer_names, base_url, model, api_key)
    run_dir = writable_folder(run_dir or Path("runs") / f"debug-{datetime.now():%Y%m%d-%H%M%S}", "--out")
    tc, opts = _toolchain_and_options(evaluation, build_timeout, test_timeout)
    machine = toolchain_identity(tc)[1]
    _same_machine(run_dir, machine)
    store = DebugStore(run_dir)
    write_json_atomic(run_dir / "run.json", {
        "corpus": str(load.root), "fixers": list(fixers), "protocols": [p.describe() for p in protocols],
        "device": device, "gpu_present": tc.gpu_present, "arch": f"sm_{tc.arch}", "machine": machine,
        "tasks": [i.task_id for i in instances], "scored": "all" if score_all else "reproduced",
        "reuse": not no_reuse})
    bench = Benchmark(store, tc, opts, fixers, protocols, jobs, reuse=not no_reuse)
    total = len(fixers) * sum(p.attempts for p in protocols) * len(instances)
    # SIGINT/SIGTERM (a time guard's ``timeout --signal=INT``) stops the run within seconds: the
    # builds and tests in flight are killed and dropped, everything finished is already kept (the
    # reproduction cache, the rounds' result.json files), and a partial summary is written.
    with stop_on_signals() as stop:
        # Reproduction first (cached): its runs of the broken file and the reference are the runs
        # of a fixer that returns either of them under the same conditions (``reuse``).
        reproductions = _reproductions(instances, tc, opts, jobs, bench.gpu_lock)
        write_json_atomic(run_dir / "reproduction.json", validation_summary(load, reproductions, tc))
        trajectories = [] if stop.is_set() else _score(bench, instances, reproductions, total)
        interrupted = stop.is_set()
        if interrupted:
            click.echo(f"debug run: stopped by {signal_name()}; summarising what finished", err=True)
            summary = _summary_from_store(run_dir, load.root, ks)
        else:
            store.close()
            summary = summarise(trajectories, load.root.name, ks, reproductions, score_all)
            summary["run_dir"] = str(run_dir)
            summary["device"] = {"requested": device, "gpu_present": tc.gpu_present, "arch": f"sm_{tc.arch}"}
        summary["reuse"] |= {"enabled": not no_reuse, "refused": bench.refused}
        finished = summary["partial"]["finished_trajectories"] if interrupted else len(trajectories)
        summary["progress"] = _progress(instances, tc, opts, total, finished, interrupted)
        write_reports(run_dir, summary)
        click.echo(progress_text(summary["progress"]), err=True)
        if as_json:
            click.echo(json.dumps(summary, default=str))
        else:
            for m in summary["pass_at_k"]:
                click.echo(f"{m['label']} = {m['value']:.3f}")
            click.echo(f"report: {run_dir / 'report.md'}")
        if interrupted:
            _exit_stopped()


def _same_machine(run_dir: Path, machine: str) -> None:
    """Refuse to go on with a run folder whose rounds another device made: a resumed run reads its
    stored rounds back as they are, and one table would mix two cards' speedups (an H100's rounds
    under an H200's heading). A folder from before run.json named its machine is taken as it is."""
    meta_path = run_dir / "run.json"
    if not meta_path.is_file():
        return
    try:
        before = json.loads(meta_path.read_text()).get("machine")
    except (OSError, ValueError, AttributeError):
        return
    if before and before != machine:
        raise click.UsageError(f"--out {run_dir}: its rounds were made on {before}, this machine is {machine}; "
                               "a run is resumed only on the device that made it (give a new --out)")


def _score(bench, instances, reproductions, total):
    """The fixers' trajectories over the instances, a progress line on stderr as each finishes."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    bench.refused = bench.use_reproductions(instances, reproductions)
    if bench.reuse:
        admitted = sum(1 for r in reproductions if r.broken is not None) - len(bench.refused)
        click.echo(f"reuse: the reproduction's runs of {admitted} instances may stand for attempts of the same "
                   f"file; {len(bench.refused)} refused", err=True)
        for task_id, why in sorted(bench.refused.items()):
            click.echo(f"reuse: {task_id}: not reused: {why[:300]}", err=True)
    console = Console(stderr=True)
    count = 0
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False, disable=not console.is_terminal) as bar:
        job = bar.add_task("debug run", total=total)

        def tick(traj):
            nonlocal count
            count += 1
            bar.advance(job)
            if not console.is_terminal:
                final = traj.final
                reused = f" (reused: {final['reused_from']})" if final.get("reused_from") else ""
                click.echo(f"attempt [{count}/{total}] [{traj.fixer}] {traj.instance.task_id}: {final['category']}"
                           f"{' (stored)' if traj.stored else ''}{reused} ({final['reason'][:100]})", err=True)

        return bench.run(instances, tick)


def _progress(instances, tc, opts, total, finished, interrupted) -> dict:
    """How much of the run is done and what is left: reproductions cached for these conditions,
    trajectories stored in the run folder."""
    from hercules.debug.reproduce import cached_count

    cached = cached_count(instances, tc, opts, _reproduction_cache(opts))
    return {"interrupted": interrupted,
            "reproductions": {"instances": len(instances), "cached": cached, "to_do": len(instances) - cached},
            "attempts": {"trajectories": total, "finished": finished, "to_do": total - finished}}


def progress_text(progress: dict) -> str:
    r, a = progress["reproductions"], progress["attempts"]
    state = ("interrupted: run again with the run folder and the reproduction cache to go on"
             if progress["interrupted"] else "complete" if not (r["to_do"] or a["to_do"]) else "finished")
    return (f"debug run progress: reproductions {r['cached']}/{r['instances']} cached ({r['to_do']} to do); "
            f"attempts {a['finished']}/{a['trajectories']} finished ({a['to_do']} to do); {state}")


def _exit_stopped() -> None:
    """Leave at once after a stop (130 for SIGINT, 143 for SIGTERM): see ``interrupt.exit_stopped``."""
    exit_stopped()


@debug_group.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--corpus", "corpus_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="the run's corpus, where the folder named in RUN/run.json has moved (partial runs only)")
@click.option("--k", "ks", multiple=True, type=int, default=(1,), show_default=True,
              help="pass@k for these k (partial runs only)")
@click.option("--rescore", is_flag=True, help="summarise from the stored rounds even where summary.json is complete "
              "(pass@k, the p-sweep and the gate re-applied to the stored records; nothing runs)")
@click.option("--reproduce-from-rounds", "from_rounds", is_flag=True,
              help="for a run made without the reproduction stage: judge each instance from its stored rounds of "
                   "the broken file (null fixer) and the reference (replay fixer), write RUN/reproduction.json, "
                   "and score the reproduced instances (implies --rescore)")
@click.option("--all", "score_all", is_flag=True, help="with --reproduce-from-rounds: score every instance")
@click.option("--json", "as_json", is_flag=True)
def report_command(run_dir, corpus_dir, ks, rescore, from_rounds, score_all, as_json):
    """Print (and rewrite) the report of an existing run directory. A run cut short (no summary, or
    a partial one) is summarised from the rounds it stored; the report says how many trajectories
    were not finished.

    \b
    Examples (after the debug run example):
      hercules debug report runs/debug1
      hercules debug report runs/debug1 --rescore --json
    """
    path = run_dir / "summary.json"
    summary = json.loads(path.read_text()) if path.is_file() else None
    if from_rounds:
        _reproduction_from_rounds(run_dir, corpus_dir, score_all)
    if summary is None or summary.get("partial") or rescore or from_rounds:
        summary = _summary_from_store(run_dir, corpus_dir, ks)
    text = write_reports(run_dir, summary)
    if as_json:
        click.echo(json.dumps(summary, default=str))
    else:
        sys.stdout.write(text)


def _run_meta_and_corpus(run_dir: Path, corpus_dir: Path | None, lacking: str):
    """A debug run folder's run.json and its instances, from --corpus or the corpus the run named."""
    meta_path = run_dir / "run.json"
    if not meta_path.is_file():
        raise click.UsageError(f"{run_dir} {lacking}: not a debug run folder")
    meta = json.loads(meta_path.read_text())
    root = corpus_dir or Path(meta["corpus"])
    if not root.is_dir():
        raise click.UsageError(f"the run's corpus {root} is not here; give its folder with --corpus")
    return meta, load_corpus(root, task_ids=tuple(meta["tasks"]))


def _reproduction_from_rounds(run_dir: Path, corpus_dir: Path | None, score_all: bool) -> None:
    from hercules.debug.reproduce import counts, reproductions_from_rounds
    from hercules.debug.store import DebugStore, write_json_atomic

    meta_path = run_dir / "run.json"
    meta, load = _run_meta_and_corpus(run_dir, corpus_dir, "has no run.json")
    store = DebugStore(run_dir)
    try:
        records = store.rows()
    finally:
        store.close()
    device = (f"the GPU of that run, {meta.get('arch')}" if meta.get("gpu_present")
              else f"no GPU in that run, compile-only for {meta.get('arch')}")
    note = f"the toolchain of run {run_dir.name}"
    reps = reproductions_from_rounds(records, load.instances, bool(meta.get("gpu_present")), note, device)
    write_json_atomic(run_dir / "reproduction.json", {
        "corpus": str(load.root), "toolchain": note, "device": device,
        "source": "judged from the run's stored rounds of the broken files and the references",
        "instances": [r.row() for r in reps], "counts": counts(reps)})
    write_json_atomic(meta_path, meta | {"scored": "all" if score_all else "reproduced"})


def _summary_from_store(run_dir: Path, corpus_dir: Path | None, ks) -> dict:
    from hercules.debug.protocol import Protocol
    from hercules.debug.report import summarise
    from hercules.debug.runner import stored_trajectories
    from hercules.debug.store import DebugStore

    meta, load = _run_meta_and_corpus(run_dir, corpus_dir, "has neither summary.json nor run.json")
    missing = sorted(set(meta["tasks"]) - {i.task_id for i in load.instances})
    if missing:
        raise click.UsageError(f"{len(missing)} of the run's tasks are not in {load.root} (e.g. {missing[0]})")
    store = DebugStore(run_dir)
    try:
        trajectories, unfinished = stored_trajectories(store, load.instances, meta["fixers"],
                                                       [Protocol.parse(p) for p in meta["protocols"]])
    finally:
        store.close()
    reproductions = None
    if (run_dir / "reproduction.json").is_file():
        from hercules.debug.reproduce import Reproduction

        reproductions = [Reproduction.from_json(r) for r in
                         json.loads((run_dir / "reproduction.json").read_text())["instances"]]
    summary = summarise(trajectories, load.root.name, ks, reproductions, meta.get("scored") == "all")
    summary["run_dir"] = str(run_dir)
    summary["device"] = {"requested": meta.get("device"), "gpu_present": meta.get("gpu_present"),
                         "arch": meta.get("arch")}
    summary["partial"] = {"finished_trajectories": len(trajectories), "unfinished_trajectories": unfinished}
    summary["reuse"] |= {"enabled": meta.get("reuse")}
    return summary


if __name__ == "__main__":  # ``python -m hercules.debug.cli run ...`` (no other subcommand imported)
    debug_group()
