"""Speedups keyed by baseline name, with their intervals: from ``decide`` through the verdict's JSON
and back, without any process. A baseline's name in ``harness.baselines`` is all it takes."""

from __future__ import annotations

import copy
import json
import math
import pickle

import pytest

from hercules.harness import baselines
from hercules.harness.decide import BaselineOutcome, CheckOutcome, Context, MeasureOutcome, ScanOutcome, decide
from hercules.harness.records import CheckResult, Speedups, Status, TimingResult, speedup_names, verdict_from_json

CTX = Context(problem="p", candidate="c", device="cuda:0")
GOOD = CheckOutcome(CheckResult(correct=True, trials=5, max_abs_err=0.0, rel_err=0.0, ref_rel_err=0.0))
BAD = CheckOutcome(CheckResult(correct=False, trials=5, max_abs_err=1.0, rel_err=1.0, ref_rel_err=0.0, error="x"))


def timing(ms: float) -> TimingResult:
    return TimingResult(method="cuda_events", reps=10, median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0.0,
                        std_ms=0.0, input_sets=2, l2_flushed=True, wall_ms=ms)


def timed(times: dict[str, float | None], intervals: dict[str, tuple[float, float]] | None = None,
          cand_ms: float = 0.5, check: CheckOutcome = GOOD):
    return decide(CTX, ScanOutcome(), check=check, measure=MeasureOutcome(timing(cand_ms)),
                  baselines=BaselineOutcome(times, intervals=intervals or {}))


def test_every_baseline_has_its_ratio_by_name_and_best_is_the_fastest():
    times = {name: 1.0 + i for i, name in enumerate(baselines.BASELINES)}
    v = timed(times)
    assert set(v.speedup.ratios) == set(baselines.BASELINES)
    for name, ms in times.items():
        assert v.speedup.ratio(name) == pytest.approx(ms / 0.5) == getattr(v.speedup, name)
    assert v.speedup.best == v.speedup.ratio("best") == pytest.approx(min(times.values()) / 0.5)


def test_a_baseline_without_a_time_has_no_ratio_and_is_not_best():
    v = timed({"eager": 1.0, "compile": None, "cudagraph": 0.0})
    assert v.speedup.ratios == {"eager": pytest.approx(2.0)}
    assert v.speedup.compile is None and v.speedup.usable("cudagraph") is None
    assert v.speedup.best == pytest.approx(2.0)


def test_intervals_reach_the_verdict_by_name_and_the_fastest_baselines_is_best():
    v = timed({"eager": 1.0, "compile": 0.4}, {"eager": (1.9, 2.1), "compile": (0.75, 0.85)})
    assert v.speedup.interval("eager") == (1.9, 2.1)
    assert v.speedup.interval("compile") == v.speedup.interval("best") == (0.75, 0.85)
    assert v.speedup.interval("expert") is None


def test_an_interval_without_a_speedup_is_dropped():
    # Not scored (incorrect): no time, so no speedup and no interval either.
    v = timed({"eager": 1.0}, {"eager": (1.9, 2.1)}, check=BAD)
    assert v.status is Status.INCORRECT and v.speedup == Speedups() and v.speedup.intervals == {}
    # An interval for a baseline that has no time of its own says nothing about a ratio.
    v = timed({"eager": 1.0, "compile": None}, {"eager": (1.9, 2.1), "compile": (0.1, 0.2)})
    assert v.speedup.intervals == {"eager": (1.9, 2.1), "best": (1.9, 2.1)}


def test_unknown_names_are_refused_not_dropped():
    with pytest.raises(ValueError, match="tensorrt"):
        Speedups(tensorrt=2.0)
    with pytest.raises(ValueError, match="tensorrt"):
        Speedups(intervals={"tensorrt": (1.0, 2.0)})
    with pytest.raises(ValueError, match="tensorrt"):
        Speedups(eager=1.0).usable("tensorrt")
    with pytest.raises(AttributeError):
        Speedups().tensorrt  # noqa: B018


def test_spellings_of_the_same_record_compare_equal_and_survive_copies():
    a = Speedups(eager=2.0, compile=None, best=2.0, intervals={"eager": [1.9, 2.1]})
    b = Speedups({"eager": 2.0}, best=2.0, intervals={"eager": (1.9, 2.1)})
    assert a == b and repr(a) == repr(b)
    assert pickle.loads(pickle.dumps(a)) == a and copy.deepcopy(a) == a and copy.copy(a).eager == 2.0


def test_the_verdicts_json_is_flat_by_name_with_intervals_and_reads_back():
    v = timed({"eager": 1.0, "compile": 0.4}, {"eager": (1.9, 2.1)})
    data = json.loads(json.dumps(v.to_json()))
    assert set(data["speedup"]) == {*speedup_names(), "intervals"}
    assert data["speedup"]["eager"] == pytest.approx(2.0) and data["speedup"]["expert"] is None
    assert data["speedup"]["best"] == pytest.approx(0.8)
    assert data["speedup"]["intervals"] == {"eager": [1.9, 2.1]}
    assert verdict_from_json(data) == v


def test_verdict_files_from_before_intervals_still_load():
    old = {"status": "ok", "correct": True, "speedup": {"eager": 1.25, "compile": 0.5, "compile_reduce_overhead": None,
                                                        "cudagraph": None, "expert": None, "best": 0.5}}
    v = verdict_from_json(old)
    assert v.speedup == Speedups(eager=1.25, compile=0.5, best=0.5) and v.speedup.intervals == {}
    assert verdict_from_json({"status": "crash", "correct": False, "speedup": None}).speedup == Speedups()
    # A name that is no longer a baseline is left out, not an error for the resumed run.
    retired = verdict_from_json({**old, "speedup": {"eager": 1.0, "retired": 3.0, "best": 1.0}})
    assert retired.speedup.ratios == {"eager": 1.0}


def test_non_finite_figures_are_unusable_and_never_written_as_invalid_json():
    s = Speedups(eager=math.nan, compile=math.inf, best=-1.0, intervals={"eager": (math.nan, 1.0), "best": (0.9, 1.1)})
    assert s.usable("eager") is s.usable("compile") is s.usable("best") is None
    written = json.loads(json.dumps(s.to_json(), allow_nan=False))
    assert written["eager"] is None and written["compile"] is None and written["intervals"] == {"best": [0.9, 1.1]}
    # A malformed interval in a file is not read as one (a resumed run still loads the verdict).
    read = Speedups.from_json({"eager": 1.0, "intervals": {"eager": [None, 1.0], "best": [0.9], "compile": "x"}})
    assert read == Speedups(eager=1.0)


def test_a_new_baseline_is_its_name_in_baselines_py(monkeypatch):
    """Add a name to ``BASELINES`` and nothing else: the verdict, its JSON and its reload carry it."""
    monkeypatch.setattr(baselines, "BASELINES", (*baselines.BASELINES, "tensorrt"))
    v = timed({"eager": 1.0, "tensorrt": 0.25}, {"tensorrt": (0.45, 0.55)})
    assert v.speedup.tensorrt == pytest.approx(0.5) == v.speedup.best
    assert v.speedup.interval("best") == (0.45, 0.55)
    data = json.loads(json.dumps(v.to_json()))
    assert data["speedup"]["tensorrt"] == pytest.approx(0.5)
    assert data["speedup"]["intervals"]["tensorrt"] == [0.45, 0.55]
    assert verdict_from_json(data).speedup == v.speedup


def test_a_baseline_timed_beside_the_candidate_gives_its_side_by_side_speedup_and_interval():
    """Eager timed in the same rounds as the candidate: its speedup is the rounds' (drift between
    the candidate's figure and eager's, measured apart, does not enter it); the others stay
    time over time, and best follows the fastest baseline."""
    from hercules.harness.records import SideBySide

    paired = SideBySide(speedup=1.01, low=0.98, high=1.04, rounds=7)
    measure = MeasureOutcome(timing(0.5), side_by_side={"eager": paired})
    v = decide(CTX, ScanOutcome(), check=GOOD, measure=measure,
               baselines=BaselineOutcome({"eager": 0.6, "compile": 1.0}))
    assert v.speedup.ratio("eager") == 1.01 and v.speedup.interval("eager") == (0.98, 1.04)
    assert v.speedup.ratio("compile") == pytest.approx(2.0) and v.speedup.interval("compile") is None
    assert v.speedup.best == 1.01 and v.speedup.interval("best") == (0.98, 1.04)  # eager is the fastest
    assert verdict_from_json(json.loads(json.dumps(v.to_json()))).speedup.interval("eager") == (0.98, 1.04)


def test_a_baseline_timed_against_eager_reaches_the_candidate_through_eager():
    """compile timed after the candidate ended, in the same rounds as eager (its time 0.5 of
    eager's, [0.45, 0.55]); the candidate 2.0x eager side by side, [1.8, 2.2]: 1.0x compile, the
    interval the product of the ends. Without eager's side-by-side figure, time over time."""
    from hercules.harness.records import SideBySide

    paired = SideBySide(speedup=2.0, low=1.8, high=2.2, rounds=7)
    bridge = SideBySide(speedup=0.5, low=0.45, high=0.55, rounds=7)
    measure = MeasureOutcome(timing(0.5), side_by_side={"eager": paired})
    v = decide(CTX, ScanOutcome(), check=GOOD, measure=measure,
               baselines=BaselineOutcome({"eager": 1.0, "compile": 0.6}, bridges={"compile": bridge}))
    assert v.speedup.ratio("compile") == pytest.approx(1.0)
    assert v.speedup.interval("compile") == pytest.approx((0.81, 1.21))
    assert v.speedup.best == pytest.approx(1.0) and v.speedup.interval("best") == pytest.approx((0.81, 1.21))
    alone = decide(CTX, ScanOutcome(), check=GOOD, measure=MeasureOutcome(timing(0.5)),
                   baselines=BaselineOutcome({"eager": 1.0, "compile": 0.6}, bridges={"compile": bridge}))
    assert alone.speedup.ratio("compile") == pytest.approx(1.2) and alone.speedup.interval("compile") is None
