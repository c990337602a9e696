"""The SQLite results store: round trips, upserts, durability across connections and threads."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading

import pytest

from hercules.harness.records import (
    BuildResult,
    CheckResult,
    Flag,
    Speedups,
    Status,
    TimingResult,
    Verdict,
)
from hercules.problems.model import Candidate, Problem
from hercules.store import ResultStore

PROBLEM_CODE = "import torch\nclass Model(torch.nn.Module):\n    pass\n"


def make_verdict(status: Status, eager=None, best=None, flags=(), **extra) -> Verdict:
    fields = dict(
        status=status,
        correct=status in (Status.OK, Status.SUSPICIOUS),
        flags=tuple(flags),
        error=None if status in (Status.OK, Status.SUSPICIOUS) else f"{status.value}: it broke",
        max_abs_err=1e-3 if status == Status.OK else None,
        rel_err=2e-4 if status == Status.OK else None,
        ref_ms=1.25,
        cand_ms=(1.25 / eager) if eager else None,
        speedup=Speedups(eager=eager, best=best),
        sol_fraction=0.42 if eager else None,
    )
    fields.update(extra)
    return Verdict(**fields)


def full_verdict() -> Verdict:
    """A verdict with every nested record filled in, to check nothing is lost on the way."""
    return make_verdict(
        Status.OK,
        eager=2.5,
        best=1.1,
        problem="relu",
        candidate="relu_cuda",
        device="NVIDIA H200",
        baselines_ms={"eager": 1.25, "compile": 0.6, "compile_reduce_overhead": 0.55, "cudagraph": None},
        build=BuildResult(ok=True, seconds=3.5, cache_key="abc", cache_hit=False, log="ok", language="cuda"),
        check=CheckResult(correct=True, trials=5, max_abs_err=1e-3, rel_err=2e-4, ref_rel_err=1e-4),
        timing=TimingResult(
            method="cuda_events", reps=100, median_ms=0.5, mean_ms=0.51, min_ms=0.49, max_ms=0.6,
            iqr_ms=0.01, std_ms=0.02, input_sets=4, l2_flushed=True, wall_ms=0.52,
            samples_ms=(0.49, 0.5, 0.6),
        ),
        sol={"bound": "memory", "bytes": 1024},
        seconds=4.25,
    )


def problem(name="relu", code=PROBLEM_CODE, level=1) -> Problem:
    return Problem(name=name, code=code, source=f"suite/{name}.py", level=level)


def candidate(name, code=None) -> Candidate:
    return Candidate(name=name, code=code or f"# {name}\nclass ModelNew: pass\n", source=f"cands/{name}.py")


def test_round_trip_survives_reopen(tmp_path):
    db = tmp_path / "results.sqlite"
    expected = [
        ("relu", 1, "relu_cuda", full_verdict()),
        ("relu", 1, "relu_wrong", make_verdict(Status.INCORRECT)),
        ("gemm", 2, "gemm_sneaky", make_verdict(Status.SUSPICIOUS, 9.0, 4.0, flags=(Flag.SIDE_STREAM.value,))),
        ("gemm", 2, "gemm_boom", make_verdict(Status.CRASH)),
    ]
    with ResultStore(db) as store:
        run = store.start_run("NVIDIA H200", {"torch": "2.13"}, {"problems": ["relu", "gemm"]})
        for prob, level, cand, verdict in expected:
            pid = store.upsert_problem(problem(prob, PROBLEM_CODE + f"# {prob}\n", level))
            cid = store.upsert_candidate(pid, candidate(cand), "cuda")
            store.record_verdict(run, cid, verdict)
        store.finish_run(run)

    reopened = ResultStore(db)
    got = reopened.verdicts(run)
    assert got == expected
    # Nested records come back as the same types, not dicts.
    assert isinstance(got[0][3].timing, TimingResult) and got[0][3].timing.samples_ms == (0.49, 0.5, 0.6)
    assert got[0][3].status is Status.OK
    (record,) = reopened.runs()
    assert record.id == run and record.device == "NVIDIA H200"
    assert record.versions == {"torch": "2.13"} and record.args == {"problems": ["relu", "gemm"]}
    assert record.finished_at is not None and record.finished_at >= record.started_at
    assert record.n_verdicts == 4
    reopened.close()


def test_file_is_wal_and_has_the_documented_tables(tmp_path):
    db = tmp_path / "r.sqlite"
    ResultStore(db).close()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "problems", "candidates", "verdicts"} <= tables
    columns = {r[1] for r in conn.execute("PRAGMA table_info(verdicts)")}
    assert {
        "run_id", "candidate_id", "status", "correct", "speedup_eager", "speedup_best",
        "sol_fraction", "cand_ms", "ref_ms", "flags", "verdict", "created_at",
    } <= columns


def test_committed_data_is_visible_to_another_process_while_store_is_open(tmp_path):
    db = tmp_path / "live.sqlite"
    store = ResultStore(db)
    run = store.start_run("cpu", {}, {})
    pid = store.upsert_problem(problem())
    cid = store.upsert_candidate(pid, candidate("a"), "pytorch")
    store.record_verdict(run, cid, make_verdict(Status.SUSPICIOUS, 3.0, 1.5, flags=("side_stream", "monkey_patch")))
    # No close(): a killed bench never gets to close. Another process must still see the row.
    script = (
        "import json, sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1])\n"
        "row = c.execute('SELECT status, correct, speedup_eager, speedup_best, flags, verdict "
        "FROM verdicts').fetchall()\n"
        "print(json.dumps(row))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(db)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    ((status, correct, eager, best, flags, verdict_json),) = json.loads(out)
    assert (status, correct, eager, best) == ("suspicious", 1, 3.0, 1.5)
    assert json.loads(flags) == ["side_stream", "monkey_patch"]
    assert json.loads(verdict_json)["speedup"]["eager"] == 3.0
    # A fresh connection of this process sees it too.
    assert ResultStore(db).verdicts(run)[0][3].flags == ("side_stream", "monkey_patch")
    store.close()


def test_upserts_are_idempotent_and_keyed_by_content(tmp_path):
    store = ResultStore(tmp_path / "u.sqlite")
    p1 = store.upsert_problem(problem("relu", PROBLEM_CODE, level=None))
    assert store.upsert_problem(problem("relu", PROBLEM_CODE, level=1)) == p1
    assert store.upsert_problem(problem("relu", PROBLEM_CODE + "# v2\n")) != p1  # new code
    assert store.upsert_problem(problem("relu_alias", PROBLEM_CODE)) != p1  # same code, other name
    c1 = store.upsert_candidate(p1, candidate("x"), "cuda")
    assert store.upsert_candidate(p1, candidate("x"), "cuda") == c1
    assert store.upsert_candidate(p1, candidate("x", code="# changed\n"), "cuda") != c1
    run = store.start_run("cpu", {}, {})
    store.record_verdict(run, c1, make_verdict(Status.INCORRECT))
    rows = store.verdicts(run)
    assert rows[0][1] == 1  # a later upsert filled in the level the first one lacked
    conn = sqlite3.connect(tmp_path / "u.sqlite")
    assert conn.execute("SELECT COUNT(*) FROM problems").fetchone()[0] == 3
    assert conn.execute("SELECT COUNT(*) FROM candidates").fetchone()[0] == 2
    assert conn.execute("SELECT language FROM candidates WHERE id=?", (c1,)).fetchone()[0] == "cuda"


def test_record_verdict_replaces_within_a_run_and_runs_are_separate(tmp_path):
    store = ResultStore(tmp_path / "v.sqlite")
    cid = store.upsert_candidate(store.upsert_problem(problem()), candidate("a"), "pytorch")
    run1 = store.start_run("cpu", {}, {})
    run2 = store.start_run("cpu", {}, {})
    store.record_verdict(run1, cid, make_verdict(Status.CRASH))
    store.record_verdict(run1, cid, make_verdict(Status.OK, 2.0, 1.0))  # a retry replaces
    store.record_verdict(run2, cid, make_verdict(Status.TIMEOUT))
    assert [v.status for *_, v in store.verdicts(run1)] == [Status.OK]
    assert [v.status for *_, v in store.verdicts(run2)] == [Status.TIMEOUT]
    assert store.has_verdict(run1, cid) and not store.has_verdict(run1 + 100, cid)
    assert store.verdicts(999) == []
    assert [r.n_verdicts for r in store.runs()] == [1, 1]
    assert store.latest_run_id() == run2


def test_nan_speedup_is_stored_as_null(tmp_path):
    store = ResultStore(tmp_path / "n.sqlite")
    cid = store.upsert_candidate(store.upsert_problem(problem()), candidate("a"), "pytorch")
    run = store.start_run("cpu", {}, {})
    store.record_verdict(run, cid, make_verdict(Status.OK, eager=float("nan"), best=2.0))
    eager, best = sqlite3.connect(tmp_path / "n.sqlite").execute(
        "SELECT speedup_eager, speedup_best FROM verdicts"
    ).fetchone()
    assert eager is None and best == 2.0
    assert store.verdicts(run)[0][3].speedup == Speedups(eager=None, best=2.0)


def test_finish_unknown_run_raises(tmp_path):
    store = ResultStore(tmp_path / "f.sqlite")
    with pytest.raises(KeyError):
        store.finish_run(12345)


def test_concurrent_writers_from_threads_lose_nothing(tmp_path):
    store = ResultStore(tmp_path / "t.sqlite")
    run = store.start_run("cpu", {}, {})
    errors: list[BaseException] = []
    problem_ids: set[int] = set()

    def worker(t: int) -> None:
        try:
            for i in range(25):
                pid = store.upsert_problem(problem())  # every thread races on the same problem
                problem_ids.add(pid)
                cid = store.upsert_candidate(pid, candidate(f"t{t}_c{i}"), "pytorch")
                store.record_verdict(run, cid, make_verdict(Status.OK, eager=1.0 + t + i / 100))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert len(problem_ids) == 1
    rows = ResultStore(tmp_path / "t.sqlite").verdicts(run)
    assert len(rows) == 8 * 25
    assert {name for _, _, name, _ in rows} == {f"t{t}_c{i}" for t in range(8) for i in range(25)}


def test_verdict_json_column_matches_verdict_fields(tmp_path):
    store = ResultStore(tmp_path / "j.sqlite")
    cid = store.upsert_candidate(store.upsert_problem(problem()), candidate("a"), "cuda")
    run = store.start_run("cpu", {}, {})
    verdict = full_verdict()
    store.record_verdict(run, cid, verdict)
    row = sqlite3.connect(tmp_path / "j.sqlite").execute(
        "SELECT cand_ms, ref_ms, sol_fraction, verdict FROM verdicts"
    ).fetchone()
    assert row[:3] == (verdict.cand_ms, verdict.ref_ms, verdict.sol_fraction)
    data = json.loads(row[3])
    assert data["build"]["language"] == "cuda" and data["baselines_ms"]["cudagraph"] is None
    assert store.verdicts(run)[0][3] == verdict
