"""Batch runs: run folder, resume after a kill, SQLite store, reports."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hercules.harness.batch import BenchItem, _held_device, item_dir, run_bench
from hercules.harness.evaluate import EvalOptions
from hercules.harness.device_memory import DeviceMemory
from hercules.harness.records import Cause, Speedups, Status, Verdict
from hercules.problems.loaders import load_source
from hercules.problems.model import Candidate
from hercules.report.bench import write_reports

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GOOD = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)
    def forward(self, x):
        return torch.relu(self.lin(x)) * 2
"""


def test_bench_writes_folder_store_and_reports_and_resumes(tmp_path):
    problem = load_source(FIXTURES / "scale_relu.py").problems[0]
    items = [BenchItem(problem, Candidate("good", GOOD, "test")),
             BenchItem(problem, Candidate("wrong", GOOD.replace("* 2", "* 3"), "test"))]
    options = EvalOptions(device="cpu", baselines=("eager",), timing_budget_s=0.05, warmup_s=0.01,
                          cache_dir=tmp_path / "cache")
    run_dir = tmp_path / "run"
    events = []
    rows = run_bench(items, run_dir, options, progress=lambda e, item, v: events.append((e, item.candidate.name)))
    assert [r.verdict.status for r in rows] == [Status.OK, Status.INCORRECT]
    for item in items:
        folder = item_dir(run_dir, item)
        assert (folder / "verdict.json").exists() and (folder / "candidate.py").exists()
    assert ("evaluated", "good") in events

    # A rerun (as after a kill) evaluates nothing again and keeps the verdicts.
    stamp = (item_dir(run_dir, items[0]) / "verdict.json").stat().st_mtime_ns
    again = run_bench(items, run_dir, options)
    assert all(r.resumed for r in again)
    assert [r.verdict.status for r in again] == [Status.OK, Status.INCORRECT]
    assert (item_dir(run_dir, items[0]) / "verdict.json").stat().st_mtime_ns == stamp

    with sqlite3.connect(run_dir / "results.sqlite") as db:
        statuses = sorted(s for (s,) in db.execute("select status from verdicts"))
    assert statuses == ["incorrect", "incorrect", "ok", "ok"]  # two runs, two verdicts each

    summary = write_reports(again, run_dir)
    assert summary["evaluations"] == 2 and summary["correctness_rate"] == 0.5
    assert (run_dir / "report.html").read_text().count("<img") >= 2
    assert "fast_" in (run_dir / "summary.md").read_text()


def test_pipelined_bench_evaluates_each_item_after_its_own_build(tmp_path):
    problem = load_source(FIXTURES / "scale_relu.py").problems[0]
    items = [BenchItem(problem, Candidate(name, GOOD.replace("* 2", factor), "test"))
             for name, factor in (("good", "* 2"), ("wrong", "* 3"), ("also_good", "+ torch.relu(self.lin(x))"))]
    options = EvalOptions(device="cpu", baselines=("eager",), timing_budget_s=0.05, warmup_s=0.01,
                          cache_dir=tmp_path / "cache")
    events = []
    rows = run_bench(items, tmp_path / "run", options, pipeline=True, eval_jobs=2,
                     progress=lambda e, item, v: events.append((e, item.candidate.name)))
    assert [r.verdict.status for r in rows] == [Status.OK, Status.INCORRECT, Status.OK]
    for item in items:
        name = item.candidate.name
        assert events.index(("built", name)) < events.index(("evaluated", name))


def test_out_of_memory_beside_other_evaluations_is_judged_again_alone(tmp_path):
    """A candidate that runs out of device memory while other evaluations share the device is
    evaluated again once they are done; its first verdict is set aside, not recorded."""
    problem = load_source(FIXTURES / "scale_relu.py").problems[0]
    oom = GOOD.replace("return torch.relu", "raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 14.00 GiB')\n        return torch.relu")
    items = [BenchItem(problem, Candidate("good", GOOD, "test")), BenchItem(problem, Candidate("oom", oom, "test"))]
    options = EvalOptions(device="cpu", baselines=("eager",), timing_budget_s=0.05, warmup_s=0.01,
                          cache_dir=tmp_path / "cache")
    events = []
    rows = run_bench(items, tmp_path / "run", options, eval_jobs=2,
                     progress=lambda e, item, v: events.append((e, item.candidate.name)))
    by_name = {r.item.candidate.name: r.verdict for r in rows}
    assert by_name["good"].status is Status.OK
    assert by_name["oom"].cause.value == "out_of_memory"
    assert any("evaluated alone" in note for note in by_name["oom"].notes), by_name["oom"].notes
    folder = item_dir(tmp_path / "run", items[1])
    assert (folder / "verdict_beside_others.json").exists()
    assert "evaluated alone" in (folder / "verdict.json").read_text()
    assert events.count(("evaluated", "oom")) == 1
    with sqlite3.connect(tmp_path / "run" / "results.sqlite") as db:
        assert db.execute("select count(*) from verdicts").fetchone()[0] == 2


def test_out_of_memory_alone_on_a_held_device_says_what_held_it_and_is_the_machines_fault():
    """Process-free: the rerun alone of an evaluation that ran out of device memory beside others,
    out of memory again, with the device's figures read before it began (scripted)."""
    oom = Verdict(status=Status.RUNTIME_ERROR, correct=False, flags=(), error="input factory: out of memory",
                  max_abs_err=None, rel_err=None, ref_ms=None, cand_ms=None, speedup=Speedups(), sol_fraction=None,
                  cause=Cause.OUT_OF_MEMORY)
    held = DeviceMemory(used_mib=75000, total_mib=81559, attributed=((5627, 710),), holders=())
    verdict = _held_device(oom, held)
    assert verdict.status is Status.HARNESS_ERROR and verdict.cause is Cause.OUT_OF_MEMORY
    assert "72.5 GiB to no visible process" in verdict.notes[-1]
    empty = DeviceMemory(used_mib=600, total_mib=81559, attributed=((5627, 600),), holders=())
    assert _held_device(oom, empty).status is Status.RUNTIME_ERROR  # the problem itself does not fit
    unknown = _held_device(oom, None)
    assert unknown.status is Status.RUNTIME_ERROR and "unknown" in unknown.notes[-1]
