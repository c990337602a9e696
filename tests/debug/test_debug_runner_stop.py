"""A debug run's own stop is never stored as an attempt's outcome (process-free): a worker ended by
the SIGINT or SIGTERM that stops the run reads as a crash, and a resumed run would skip the round."""

from __future__ import annotations

import threading
import time

import pytest

from hercules import interrupt
from hercules.debug import runner
from hercules.debug.attempt import Outcome
from hercules.debug.classifier import Classification


def _outcome(reason: str) -> Outcome:
    return Outcome(kind="native", code_hash="0" * 16, build=None, test=None, verdict=None,
                   classification=Classification("memory_crash", "crash", reason), correct=False,
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
