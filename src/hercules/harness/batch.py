"""Many evaluations: a resumable run directory, parallel builds, serial GPU measurement.

Layout (SWE-bench style): ``RUN_DIR/<problem>/<candidate>/`` holds ``candidate.py``, ``problem.py``,
``build.log``, ``reference.log`` and ``verdict.json``; a rerun skips every pair whose verdict file
exists, so a killed run loses at most the evaluations in flight. Every verdict also goes into
``RUN_DIR/results.sqlite``.

A run stopped by SIGINT/SIGTERM (``hercules.interrupt``) starts nothing new, has its workers
killed, and drops the evaluations that were in flight: their verdict files are set aside as
``verdict_interrupted.json`` and nothing of them reaches the store, so a rerun evaluates them
again instead of resuming a crash the stop caused. ``run_bench`` then returns the rows finished.

Given an executor (``hercules.executor``: Ray actors, one per GPU across machines), the evaluations
run there instead, each actor building its own candidates (the cluster's machines have their own
compilers and caches) and timing under its own device's lock. The actors write nothing of the run
folder, which may not even exist on their machines: this process writes each finished item's
``problem.py``, ``candidate.py`` and ``verdict.json``, the store and the reports, so the folder
resumes the same way. An evaluation whose actor died under it is run again by the executor on a
live one and recorded once, with a note; one lost for good is not recorded, and a rerun evaluates it.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from hercules import interrupt
from hercules.harness import build as build_mod
from hercules.harness import device_memory
from hercules.harness.classify import out_of_memory_alone
from hercules.harness.device_lock import DeviceLock
from hercules.harness.evaluate import EvalOptions, evaluate, resolve_device, start_candidate_worker
from hercules.harness.ipc import WorkerDied, WorkerTimeout, private_dir
from hercules.fileio import write_text_atomic
from hercules.harness.records import Cause, Verdict, verdict_from_json
from hercules.problems.model import Candidate, Problem
from hercules.store import ResultStore

if TYPE_CHECKING:
    from hercules.executor import EvalExecutor

Progress = Callable[[str, "BenchItem", Verdict | None], None]


@dataclass(frozen=True)
class BenchItem:
    problem: Problem
    candidate: Candidate


@dataclass(frozen=True)
class BenchRow:
    item: BenchItem
    verdict: Verdict
    resumed: bool


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:120] or "unnamed"


def item_dir(run_dir: Path, item: BenchItem) -> Path:
    return run_dir / slug(item.problem.name) / slug(item.candidate.name)


def load_done(path: Path) -> Verdict | None:
    try:
        return verdict_from_json(json.loads((path / "verdict.json").read_text()))
    except (OSError, ValueError, KeyError):
        return None


def build_one(item: BenchItem, options: EvalOptions) -> str | None:
    """Compile one candidate's native code into the content-keyed cache; the error, if any.

    Importing the candidate module is what triggers its load_inline / load calls; the later
    evaluation finds the built module in the cache and only loads it. Nothing to build (Python,
    Triton, already cached, no device for it): None at once. A stopped run builds nothing.
    """
    if interrupt.STOP.is_set():
        return None
    device = resolve_device(options.device)
    plan = build_mod.plan_build(item.candidate.code, device, options.cache_dir, build_mod.gpu_arch(device))
    if plan.language not in ("cuda", "cpp") or plan.cached or build_mod.needs_missing_device(plan.language, device):
        return None
    folder = item_dir(options.artifacts_dir, item) if options.artifacts_dir else options.cache_dir
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with private_dir("hercules-prebuild-") as private:
        # Building runs the candidate's module code: in its sandbox, like every other run of it.
        worker, _info = start_candidate_worker(folder / "prebuild.log", plan, private, device, options,
                                               hidden=tuple(p for p in (options.artifacts_dir,) if p))
        try:
            reply = worker.request("import", options.build_timeout_s, code=item.candidate.code,
                                   path=str(private / "candidate.py"), device=str(device))
            error = None if reply.get("ok") else reply.get("error")
        except (WorkerDied, WorkerTimeout) as exc:
            error = str(exc)
        finally:
            worker.close()
    if interrupt.abandoned():  # the stop killed the build: not a build error of the candidate
        return None
    # Wall time of the whole build (worker start, import, compile); kept for throughput reports.
    record = {"seconds": time.perf_counter() - started, "error": error, "cache_key": plan.cache_key}
    (folder / "prebuild.json").write_text(json.dumps(record))
    return error


def prebuild(items: Sequence[BenchItem], options: EvalOptions, jobs: int,
             on_done: Callable[[BenchItem, str | None], None] | None = None) -> None:
    """Compile every candidate that builds native code, in parallel, into the content-keyed cache.
    A stop ends it at once: builds not started are skipped, the ones running are killed."""
    for index, error in interrupt.map_until_stopped(lambda item: build_one(item, options), items, jobs):
        if on_done and not interrupt.STOP.is_set():
            on_done(items[index], error)


def run_bench(items: Sequence[BenchItem], run_dir: Path, options: EvalOptions, *, build_jobs: int | None = None,
              eval_jobs: int | None = None, pipeline: bool = False, progress: Progress | None = None,
              executor: EvalExecutor | None = None) -> list[BenchRow]:
    """Evaluate every pending item; with ``pipeline`` an evaluation starts as soon as its own build
    is done (builds share the host with measurements), otherwise all builds finish first. With
    ``executor`` (a Ray cluster's actors) the evaluations run there, as many at once as it takes,
    each building its own candidate: ``build_jobs``, ``eval_jobs`` and ``pipeline`` do not apply."""
    run_dir.mkdir(parents=True, exist_ok=True)
    store = ResultStore(run_dir / "results.sqlite")
    run_id = _start_run(store, len(items), options, executor)
    rows: list[BenchRow] = []
    pending: list[BenchItem] = []
    for item in items:
        done = load_done(item_dir(run_dir, item))
        if done is not None:
            rows.append(BenchRow(item, done, resumed=True))
            _record(store, run_id, item, done)
            if progress:
                progress("resumed", item, done)
        else:
            pending.append(item)

    def finished(item: BenchItem, verdict: Verdict) -> None:
        _record(store, run_id, item, verdict)
        rows.append(BenchRow(item, verdict, resumed=False))
        if progress:
            progress("evaluated", item, verdict)

    if executor is not None:
        _bench_on_executor(pending, run_dir, options, executor, finished, progress)
    else:
        _bench_here(pending, run_dir, options, build_jobs, eval_jobs, pipeline, finished, progress)
    if not interrupt.STOP.is_set():  # a stopped run stays unfinished in the store
        store.finish_run(run_id)
    store.close()
    order = {id(item): i for i, item in enumerate(items)}
    rows.sort(key=lambda r: order.get(id(r.item), 0))
    return rows


def _start_run(store: ResultStore, count: int, options: EvalOptions, executor: EvalExecutor | None) -> int:
    """The store's run record: the device and software that evaluate, which with an executor are
    its actors' (asked of one of them), not this process's (a Ray driver may have no GPU)."""
    args = {"items": count, "trials": options.trials, "budget_s": options.timing_budget_s}
    if executor is None:
        return store.start_run(str(resolve_device(options.device)), build_mod.software_versions(), args)
    args["placements"] = executor.placements()
    versions = executor.run_on_device(_software_versions)
    return store.start_run(f"{executor.devices[0]} x{len(executor.devices)}", versions, args)


def _software_versions(_device: str) -> dict[str, str]:
    """``software_versions`` where an executor evaluates (a module-level function: Ray imports it)."""
    return build_mod.software_versions()


def _bench_here(pending: Sequence[BenchItem], run_dir: Path, options: EvalOptions, build_jobs: int | None,
                eval_jobs: int | None, pipeline: bool, finished: Callable[[BenchItem, Verdict], None],
                progress: Progress | None) -> None:
    """Builds and evaluations in this process's threads, on this machine's device."""
    device = resolve_device(options.device)
    cpus = build_mod.usable_cpus()
    build_options = replace(options, artifacts_dir=run_dir)
    # Measurements (timing, baselines, roofline) hold the device lock exclusively; correctness
    # trials share it, and a second evaluation may start its workers and load its build meanwhile.
    gpu_lock = DeviceLock()
    jobs = eval_jobs or (2 if device.type == "cuda" else 1)
    alone: list[BenchItem] = []
    if jobs > 1:
        # Evaluations in flight share this process: a thread reading the parent's clock when a
        # reply arrives first waits for the interpreter lock, up to the switch interval (5 ms by
        # default) per busy neighbour. 1 ms keeps that wait small against a burst's 60 ms.
        sys.setswitchinterval(min(sys.getswitchinterval(), 0.001))

    def one(item: BenchItem) -> BenchRow | None:
        if interrupt.STOP.is_set():
            return None
        folder = item_dir(run_dir, item)
        try:
            verdict = evaluate(item.problem, item.candidate, replace(options, artifacts_dir=folder),
                               gpu_lock=gpu_lock)
        except Exception:
            if interrupt.STOP.is_set():  # the stop killed a trusted worker under it
                _set_aside(folder, "verdict_interrupted.json")
                return None
            raise
        if interrupt.abandoned(verdict):
            # Cancelled, not judged: the stop killed its workers (or a terminal's Ctrl-C reached
            # them with this process). Kept for a look, out of the way of a resumed run.
            _set_aside(folder, "verdict_interrupted.json")
            return None
        if jobs > 1 and verdict.cause is Cause.OUT_OF_MEMORY:
            # Out of device memory beside other evaluations (KernelBench 36_RMSNorm_'s reference,
            # 14 GiB asked with 12 free beside two others on the H200): judged again alone, once
            # the others are done. Its verdict file is set aside so that a resumed run does so too.
            _set_aside(folder, "verdict_beside_others.json")
            alone.append(item)
            return None
        return BenchRow(item, verdict, resumed=False)

    def built(item: BenchItem) -> None:
        if progress:
            progress("built", item, None)

    def done(row: BenchRow) -> None:
        finished(row.item, row.verdict)

    if pipeline:
        _pipelined(pending, build_options, build_jobs or max(1, cpus - 2 * jobs), jobs, one, built, done)
    else:
        prebuild(pending, build_options, build_jobs or cpus, on_done=lambda item, _err: built(item))
        for _index, row in interrupt.map_until_stopped(one, pending, jobs):
            if row is not None:
                done(row)
    for item in alone:
        if interrupt.STOP.is_set():
            break
        folder = item_dir(run_dir, item)
        before = device_memory.read(device.index or 0) if device.type == "cuda" else None
        verdict = evaluate(item.problem, item.candidate, replace(options, artifacts_dir=folder), gpu_lock=gpu_lock)
        if interrupt.abandoned(verdict):
            _set_aside(folder, "verdict_interrupted.json")
            break
        verdict = _noted(verdict, _alone_note(f"{jobs - 1} other evaluation(s)"))
        if verdict.cause is Cause.OUT_OF_MEMORY:
            verdict = _held_device(verdict, before)
        write_text_atomic(folder / "verdict.json", json.dumps(verdict.to_json(), indent=1))
        finished(item, verdict)


def _bench_on_executor(pending: Sequence[BenchItem], run_dir: Path, options: EvalOptions, executor: EvalExecutor,
                       finished: Callable[[BenchItem, Verdict], None], progress: Progress | None) -> None:
    """Evaluations on the executor's actors; this process writes each item's folder as its verdict
    comes back. One that ran out of device memory beside others on its actor is judged again
    once the rest are done, one at a time, as on one machine."""
    remote = replace(options, artifacts_dir=None)  # the actors keep their files in private folders
    alone: list[BenchItem] = []

    def settle(item: BenchItem, future: Future, first: bool) -> None:
        verdict = _tracked_verdict(item, future, progress)
        if verdict is None or interrupt.abandoned(verdict):
            return  # lost, or cancelled by a stop: nothing written, a rerun evaluates it
        if first and executor.capacity > 1 and verdict.cause is Cause.OUT_OF_MEMORY:
            _write_item(run_dir, item, verdict, "verdict_beside_others.json")
            alone.append(item)
            return
        if not first:
            verdict = _noted(verdict, _alone_note("other evaluations on its device"))
        _write_item(run_dir, item, verdict, "verdict.json")
        finished(item, verdict)

    _drain(executor, pending, remote, executor.capacity, lambda item, future: settle(item, future, True))
    _drain(executor, alone, remote, 1, lambda item, future: settle(item, future, False))


def _drain(executor: EvalExecutor, items: Sequence[BenchItem], options: EvalOptions, limit: int,
           settle: Callable[[BenchItem, Future], None]) -> None:
    """At most ``limit`` evaluations in flight; the rest wait here rather than in one actor's
    queue, so each goes to whichever actor is least busy when a slot frees. A stop submits nothing
    more and leaves those in flight to be killed (the executor's close ends its actors)."""
    queue = deque(items)
    flying: dict[Future, BenchItem] = {}
    while (queue or flying) and not interrupt.STOP.is_set():
        while queue and len(flying) < limit:
            item = queue.popleft()
            flying[executor.submit_tracked(item.problem, item.candidate, options)] = item
        done, _ = wait(flying, timeout=0.5, return_when=FIRST_COMPLETED)
        for future in done:
            settle(flying.pop(future), future)


def _tracked_verdict(item: BenchItem, future: Future, progress: Progress | None) -> Verdict | None:
    """The verdict of an executor's evaluation, noting the attempts its infrastructure cost; None
    when it was lost (every attempt's actor died) or cut by a stop."""
    from hercules.executor import EvaluationLost

    try:
        tracked = future.result()
    except EvaluationLost:
        if progress and not interrupt.STOP.is_set():
            progress("lost", item, None)
        return None
    except Exception:
        if interrupt.STOP.is_set():
            return None
        raise
    if tracked.attempts == 1:
        return tracked.verdict
    return _noted(tracked.verdict, f"evaluated {tracked.attempts} times: the process evaluating it died under "
                                   f"the first {tracked.attempts - 1} (the infrastructure, not the candidate)")


def _held_device(verdict: Verdict, before: device_memory.DeviceMemory | None) -> Verdict:
    """An evaluation out of device memory again when judged alone: what held the device before it
    began, and the machine's fault (harness_error) where that was more than the problem's share."""
    if before is None:
        return _noted(verdict, "out of device memory judged alone; what held the device is unknown (no nvidia-smi)")
    status = out_of_memory_alone(verdict.status, verdict.cause, before.used_fraction)
    return replace(_noted(verdict, f"out of device memory judged alone; before it began: {before.describe()}"),
                   status=status)


def _alone_note(others: str) -> str:
    return f"evaluated alone: out of device memory beside {others} at first"


def _noted(verdict: Verdict, note: str) -> Verdict:
    return replace(verdict, notes=verdict.notes + (note,))


def _write_item(run_dir: Path, item: BenchItem, verdict: Verdict, name: str) -> None:
    """An item's folder as a local evaluation leaves it, less the logs (kept where it ran)."""
    folder = item_dir(run_dir, item)
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(folder / "problem.py", item.problem.code)
    write_text_atomic(folder / "candidate.py", item.candidate.code)
    write_text_atomic(folder / name, json.dumps(verdict.to_json(), indent=1))


def _pipelined(pending: Sequence[BenchItem], build_options: EvalOptions, builders: int, jobs: int,
               one: Callable[[BenchItem], BenchRow | None], built: Callable[[BenchItem], None],
               finished: Callable[[BenchRow], None]) -> None:
    """Each evaluation starts as soon as its own build is done. A stop starts nothing new and
    leaves the pools without waiting on them (their workers are killed; late results dropped)."""
    pool = ThreadPoolExecutor(max_workers=jobs)
    build_pool = ThreadPoolExecutor(max_workers=builders)
    try:
        building = {build_pool.submit(build_one, item, build_options): item for item in pending}
        evaluating: set[Future] = set()
        while (building or evaluating) and not interrupt.STOP.is_set():
            done, _ = wait(set(building) | evaluating, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in done:
                if interrupt.STOP.is_set():
                    break
                if future in building:
                    future.result()  # a failed build is the evaluation's to report, with its log
                    item = building.pop(future)
                    built(item)
                    evaluating.add(pool.submit(one, item))
                else:
                    evaluating.discard(future)
                    if (row := future.result()) is not None:
                        finished(row)
        if interrupt.STOP.is_set():  # let the killed evaluations set their verdict files aside
            wait(evaluating, timeout=5.0)
    finally:
        stopped = interrupt.STOP.is_set()
        build_pool.shutdown(wait=not stopped, cancel_futures=True)
        pool.shutdown(wait=not stopped, cancel_futures=True)


def _set_aside(folder: Path, name: str) -> None:
    verdict = folder / "verdict.json"
    if verdict.exists():
        verdict.replace(folder / name)


def _record(store: ResultStore, run_id: int, item: BenchItem, verdict: Verdict) -> None:
    problem_id = store.upsert_problem(item.problem)
    language = verdict.build.language if verdict.build else build_mod.detect_language(item.candidate.code)
    candidate_id = store.upsert_candidate(problem_id, item.candidate, language)
    store.record_verdict(run_id, candidate_id, verdict)

