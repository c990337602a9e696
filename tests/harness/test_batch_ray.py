"""``bench`` on a Ray cluster: a real local Ray instance with two CPU actors, real worker processes,
an actor killed by its pid mid-evaluation. The run must give the statuses a local run gives, write
every item once (only this process writes the run folder and the store) and resume.

Starting Ray takes ~7-10 s on two cores, so one instance serves the in-process cases (~41 s in all);
the command-line case starts its own twice and runs with scripts/slow-tests. The built-in suite's
problems take ~85 s an evaluation on the CPU: a small fixture problem stands in for most items.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from test_batch import FIXTURES, GOOD  # the small problem and candidate of the local batch tests

from hercules.harness.batch import BenchItem, item_dir, run_bench
from hercules.harness.evaluate import EvalOptions
from hercules.harness.records import Status
from hercules.problems.loaders import load_source
from hercules.problems.model import Candidate
from hercules.suite.catalog import suite_candidate_paths, suite_problem_paths

pytest.importorskip("ray")

KILL_WAIT_S = 120.0  # an actor starts its workers within seconds; the bound only ends a broken run


def small_items() -> list[BenchItem]:
    """Three candidates of a small problem (seconds each on the CPU) and one built-in suite item
    (a CUDA candidate: skipped on the CPU, a status of its own to compare)."""
    problem = load_source(FIXTURES / "scale_relu.py").problems[0]
    items = [BenchItem(problem, Candidate(name, GOOD.replace("* 2", factor), "test"))
             for name, factor in (("good", "* 2"), ("wrong", "* 3"), ("also_good", "+ torch.relu(self.lin(x))"))]
    suite = load_source(next(p for p in suite_problem_paths() if p.stem == "row_sum_fp32")).problems[0]
    file = suite_candidate_paths(suite.name)[0]
    return [*items, BenchItem(suite, Candidate(file.stem, file.read_text(), str(file), suite.name))]


def cpu_options(tmp_path: Path) -> EvalOptions:
    return EvalOptions(device="cpu", baselines=("eager",), timing_budget_s=0.05, warmup_s=0.01, trials=2,
                       revalidation_sets=1, cache_dir=tmp_path / "cache")


@pytest.fixture(scope="module")
def cluster():
    from hercules.executor import make_executor

    started = time.perf_counter()
    with make_executor(ray_address="local", device="cpu", workers=2, retries=2) as executor:
        print(f"local Ray instance and 2 actors up in {time.perf_counter() - started:.1f} s")
        yield executor


class ActorKiller(threading.Thread):
    """Kills the first actor seen running an evaluation worker (so an evaluation is surely in
    flight on it), by its pid, with SIGKILL."""

    def __init__(self, pids: list[int]):
        super().__init__(daemon=True)
        self.pids = pids
        self.killed: int | None = None
        self.done = threading.Event()

    def run(self) -> None:
        from hercules.executor import evaluation_worker_pids

        deadline = time.monotonic() + KILL_WAIT_S
        while self.killed is None and not self.done.is_set() and time.monotonic() < deadline:
            busy = [pid for pid in self.pids if evaluation_worker_pids(pid)]
            if busy:
                os.kill(busy[0], signal.SIGKILL)
                self.killed = busy[0]
            time.sleep(0.05)


def verdict_rows(run_dir: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        return sorted(db.execute(
            "select r.device, c.name, v.status from verdicts v join candidates c on c.id = v.candidate_id "
            "join runs r on r.id = v.run_id"))


@pytest.mark.ondemand  # ~56 s on the CI machine (a Ray start, a local run, the Ray run, a rerun)
def test_ray_bench_matches_a_local_run_loses_nothing_to_a_killed_actor_and_resumes(cluster, tmp_path):
    """On demand (scripts/slow-tests). CI's representatives: tests/serve/test_executor.py's Ray
    tests (the same Ray executor: two CPU actors, one killed mid-evaluation, its evaluation retried
    and nothing lost) and tests/harness/test_batch.py's local bench (statuses, folder store, resume)."""
    items = small_items()
    options = cpu_options(tmp_path)
    started = time.perf_counter()
    local = run_bench(items, tmp_path / "local", options)
    local_s = time.perf_counter() - started
    assert [r.verdict.status for r in local] == [Status.OK, Status.INCORRECT, Status.OK, Status.SKIPPED]

    run_dir = tmp_path / "ray"
    killer = ActorKiller(cluster.actor_pids())
    killer.start()
    events: list[tuple[str, str]] = []
    started = time.perf_counter()
    rows = run_bench(items, run_dir, options, executor=cluster,
                     progress=lambda event, item, _verdict: events.append((event, item.candidate.name)))
    ray_s = time.perf_counter() - started
    killer.done.set()
    print(f"local run {local_s:.1f} s, Ray run with an actor killed {ray_s:.1f} s")
    assert killer.killed is not None, "no actor was seen evaluating"

    # The same statuses, every item evaluated and written once, one of them twice attempted.
    assert [r.verdict.status for r in rows] == [r.verdict.status for r in local]
    assert not any(r.resumed for r in rows)
    assert sorted(events) == sorted(("evaluated", item.candidate.name) for item in items)
    retried = [r for r in rows if any("died under" in note for note in r.verdict.notes)]
    assert retried, [r.verdict.notes for r in rows]
    for item, row in zip(items, rows):
        folder = item_dir(run_dir, item)
        written = json.loads((folder / "verdict.json").read_text())
        assert written["status"] == row.verdict.status.value
        assert (folder / "candidate.py").read_text() == item.candidate.code
        assert (folder / "problem.py").read_text() == item.problem.code
    assert [(device, status) for device, _, status in verdict_rows(run_dir)].count(("ray:cpu x2", "ok")) == 2
    assert len(verdict_rows(run_dir)) == len(items)
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        (args,) = db.execute("select args from runs").fetchone()
    assert len(json.loads(args)["placements"]) == 2  # where each actor ran, for the record

    # The actor came back (Ray restarts it); a rerun reads every verdict back and evaluates nothing.
    stamps = {item.candidate.name: (item_dir(run_dir, item) / "verdict.json").stat().st_mtime_ns for item in items}
    again = run_bench(items, run_dir, options, executor=cluster)
    assert all(r.resumed for r in again)
    assert [r.verdict.status for r in again] == [r.verdict.status for r in local]
    assert stamps == {item.candidate.name: (item_dir(run_dir, item) / "verdict.json").stat().st_mtime_ns
                      for item in items}
    assert len(verdict_rows(run_dir)) == 2 * len(items)  # two runs in the store, each item once per run


@pytest.mark.ondemand  # ~37 s (two Ray starts): the stop of a Ray run, from the command line
def test_cli_ray_bench_stops_on_sigint_records_nothing_in_flight_and_resumes(tmp_path):
    """``hercules bench --ray-address local`` as a user runs it: SIGINT while an actor evaluates
    (its evaluation worker is seen running) ends it with status 130 and nothing of the evaluations
    in flight written; the same command then evaluates everything."""
    import subprocess
    import sys

    from hercules.executor import evaluation_worker_pids

    problems, candidates = tmp_path / "problems", tmp_path / "candidates" / "scale_relu"
    problems.mkdir()
    candidates.mkdir(parents=True)
    (problems / "scale_relu.py").write_text((FIXTURES / "scale_relu.py").read_text())
    for name, factor in (("good", "* 2"), ("wrong", "* 3")):
        (candidates / f"{name}.py").write_text(GOOD.replace("* 2", factor))
    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "hercules.cli", "bench", str(problems), "--candidates", str(candidates.parent),
               "--device", "cpu", "--baselines", "eager", "--trials", "2", "--budget", "0.05", "--cache-dir",
               str(tmp_path / "cache"), "--run-dir", str(tmp_path / "run"), "--ray-address", "local", "--json"]
    env = dict(os.environ, PYTHONPATH=str(root / "src"))

    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + KILL_WAIT_S
    while not evaluation_worker_pids(run.pid) and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run.poll() is None, "the run ended before an evaluation was seen"
    run.send_signal(signal.SIGINT)
    sent = time.perf_counter()
    _out, err = run.communicate(timeout=120)
    print(f"stopped {time.perf_counter() - sent:.1f} s after SIGINT")
    assert run.returncode == 130, err[-2000:]
    assert "actor: cpu on" in err and "stopped by SIGINT" in err
    assert not list((tmp_path / "run").glob("*/*/verdict.json"))  # evaluations in flight: nothing kept
    with sqlite3.connect(tmp_path / "run" / "results.sqlite") as db:
        assert db.execute("select count(*) from verdicts").fetchone()[0] == 0

    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["statuses"] == {"ok": 1, "incorrect": 1}
    assert len(list((tmp_path / "run").glob("*/*/verdict.json"))) == 2
