"""A debug run's own stop is never stored as an attempt's outcome (process-free): a worker ended by
the SIGINT or SIGTERM that stops the run reads as a crash, and a resumed run would skip the round.
Likewise a worker killed from outside (the host's OOM killer) is the machine's, not the file's."""

from __future__ import annotations

import threading
import time

import pytest

from hercules import interrupt
from hercules.debug import runner
from hercules.debug.attempt import Outcome
from hercules.debug.classifier import Classification
from hercules.debug.reproduce import maybe_load
from hercules.debug.store import DebugStore, write_json_atomic


def _outcome(reason: str, classification: Classification | None = None) -> Outcome:
    return Outcome(kind="native", code_hash="0" * 16, build=None, test=None, verdict=None,
                   classification=classification or Classification("memory_crash", "crash", reason), correct=False,
                   time_ms=None, method="wall")


@pytest.fixture(autouse=True)
def stop_cleared():
    interrupt.STOP.clear()
    yield
    interrupt.STOP.clear()


def test_a_worker_killed_while_the_run_stops_is_dropped(monkeypatch):
    monkeypatch.setattr(runner, "SIGNAL_RACE_S", 5.0)
    threading.Timer(0.2, interrupt.STOP.set).start()  # the stop reaches this process just after
    with pytest.raises(interrupt.Interrupted):
        runner._drop_if_stopped(_outcome("test killed by SIGTERM"))
    # Once the run is stopping, any outcome is dropped.
    with pytest.raises(interrupt.Interrupted):
        runner._drop_if_stopped(_outcome("exit status 1"))


def test_a_candidate_that_kills_itself_is_its_own_outcome_after_the_race_window(monkeypatch):
    monkeypatch.setattr(runner, "SIGNAL_RACE_S", 0.3)
    started = time.monotonic()
    runner._drop_if_stopped(_outcome("test killed by SIGINT"))  # no stop follows: recorded
    assert time.monotonic() - started >= 0.3
    started = time.monotonic()
    runner._drop_if_stopped(_outcome("Segmentation fault"))  # other crashes do not wait
    assert time.monotonic() - started < 0.2


@pytest.mark.parametrize(("category", "subtype", "reason", "kept"), [
    ("crash", "worker", "build: worker killed by SIGINT ([1/3] g++ ...)", False),  # the call's stop
    ("env", "external_kill", "candidate setup: worker killed by SIGKILL", False),  # the host's OOM killer
    ("crash", "worker", "test killed by SIGSEGV", True),  # the candidate's own crash
    ("build", "syntax_type", "solution.cu(17): error: expected a \";\"", True),
])
def test_a_stored_round_that_is_the_stop_or_the_machine_is_run_again(tmp_path, category, subtype, reason, kept):
    store = DebugStore(tmp_path / "run")
    where = store.round_dir("degenerate", "n=1", "task", 0, 0)
    record = {"category": category, "subtype": subtype, "reason": reason}
    write_json_atomic(where / "result.json", record)
    assert (runner._load_round(store, where) == record) is kept


@pytest.mark.parametrize(("classification", "side", "retried"), [
    (Classification("env", "external_kill", "candidate setup: worker killed by SIGKILL"), "broken", True),
    (Classification("timeout", "build", "build timed out"), "broken", True),
    (Classification("timeout", "test", "test timed out"), "broken", False),  # an observation of the file
    (Classification("timeout", "test", "test timed out"), "reference", True),
    (Classification("oom", "", "CUDA out of memory"), "broken", False),
    # the run's own stop (a time guard's SIGINT) reached the build: the stop's, not the file's
    (Classification("crash", "worker", "build: worker killed by SIGINT ([1/3] nvcc ...)"), "broken", True),
    (Classification("crash", "worker", "test killed by SIGTERM"), "reference", True),
    (Classification("crash", "worker", "test killed by SIGSEGV"), "broken", False),
])
def test_a_reproduction_the_machine_may_have_decided_is_not_cached(classification, side, retried):
    assert maybe_load(_outcome(classification.reason, classification), side) is retried


@pytest.mark.parametrize(("reason", "reused"), [
    ("build: worker killed by SIGINT ([1/3] nvcc ...)", False),  # left by a stopped call: run again
    ("test killed by SIGSEGV", True),
])
def test_a_cached_reproduction_that_observed_the_stop_is_run_again(tmp_path, reason, reused):
    from dataclasses import asdict

    from hercules.debug.reproduce import Reproduction, ReproductionCache

    broken = _outcome(reason, Classification("crash", "worker", reason))
    rep = Reproduction(task_id="t", labelled_category="logic_error", status="not_reproduced", reproduced=False,
                       observed_category="crash", not_reproduced_why="fails otherwise", why_kind="other",
                       evidence=reason, reference_status="ok", reference_why="", toolchain="nvcc", device="gpu",
                       instance_hash="0", broken=broken.to_json(), reference=None, seconds=1.0)
    cache = ReproductionCache(tmp_path)
    cache.put("k", rep)
    found = cache.get("k")
    assert (found is not None) is reused
    if reused:
        assert asdict(found) == asdict(rep) | {"cached": True}
