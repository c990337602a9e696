"""Report statistics checked against numbers computed by hand."""

from __future__ import annotations

import dataclasses
import math

import pytest

from hercules.harness.records import Speedups, Status, Verdict
from hercules.report.stats import (
    P_VALUES,
    correctness_rate,
    fast_p,
    flag_counts,
    geometric_mean,
    per_level,
    speedup_stats,
    status_counts,
    summarize,
)


def v(status: Status, eager=None, best=None, flags=()) -> Verdict:
    return Verdict(
        status=status,
        correct=status in (Status.OK, Status.SUSPICIOUS),
        flags=tuple(flags),
        error=None,
        max_abs_err=None,
        rel_err=None,
        ref_ms=1.0,
        cand_ms=None if not eager else 1.0 / eager,
        speedup=Speedups(eager=eager, best=best),
        sol_fraction=None,
    )


# Seven rows over two levels and one row without a level.
ROWS = [
    ("add", 1, "a", v(Status.OK, eager=2.0, best=1.5)),
    ("add", 1, "b", v(Status.OK, eager=8.0, best=4.0)),
    ("mm", 1, "c", v(Status.OK, eager=0.5, best=0.25)),
    ("mm", 2, "d", v(Status.OK)),  # correct, but never timed
    ("mm", 2, "e", v(Status.SUSPICIOUS, eager=10.0, best=10.0, flags=("side_stream", "monkey_patch"))),
    ("conv", 2, "f", v(Status.INCORRECT, flags=("shape_mismatch",))),
    ("conv", None, "g", v(Status.CRASH)),
]


def test_correctness_rate_counts_only_ok():
    # 4 ok of 7; the suspicious row has correct outputs but is not counted.
    assert correctness_rate(ROWS) == pytest.approx(4 / 7)


def test_fast_p_is_over_all_rows_and_strictly_greater():
    assert fast_p(ROWS, 0) == pytest.approx(4 / 7)  # p = 0: correctness, untimed ok row included
    assert fast_p(ROWS, 1) == pytest.approx(2 / 7)  # 2.0 and 8.0; suspicious 10x excluded
    assert fast_p(ROWS, 1.5) == pytest.approx(2 / 7)
    assert fast_p(ROWS, 2) == pytest.approx(1 / 7)  # 2.0 is not > 2
    assert fast_p(ROWS, 100) == 0.0
    # Against the best baseline: 1.5, 4.0, 0.25.
    assert fast_p(ROWS, 1, against="best") == pytest.approx(2 / 7)
    assert fast_p(ROWS, 1.5, against="best") == pytest.approx(1 / 7)
    assert fast_p(ROWS, 2, against="best") == pytest.approx(1 / 7)


def test_speedup_averages_by_hand():
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    eager = speedup_stats(ROWS, "eager")  # 2, 8, 0.5
    assert eager.n == 3
    assert eager.mean == pytest.approx(3.5)
    assert eager.median == pytest.approx(2.0)
    assert eager.geomean == pytest.approx(2.0)  # (2 * 8 * 0.5) ** (1/3) = 8 ** (1/3)
    assert (eager.min, eager.max) == (0.5, 8.0)
    best = speedup_stats(ROWS, "best")  # 1.5, 4, 0.25
    assert best.mean == pytest.approx(5.75 / 3)
    assert best.median == pytest.approx(1.5)
    assert best.geomean == pytest.approx(1.5 ** (1 / 3))


def test_geomean_of_two_and_eight_rows():
    rows = [("p", 1, "a", v(Status.OK, 2.0, 2.0)), ("p", 1, "b", v(Status.OK, 8.0, 8.0))]
    s = summarize(rows)
    assert s.eager.geomean == pytest.approx(4.0) and s.best.geomean == pytest.approx(4.0)
    assert s.eager.median == pytest.approx(5.0)  # median of an even count is the midpoint


def test_unusable_speedups_are_ignored_not_fatal():
    rows = [
        ("p", 1, "nan", v(Status.OK, float("nan"))),
        ("p", 1, "inf", v(Status.OK, float("inf"))),
        ("p", 1, "zero", v(Status.OK, 0.0)),
        ("p", 1, "neg", v(Status.OK, -2.0)),
        ("p", 1, "good", v(Status.OK, 3.0)),
    ]
    stats = speedup_stats(rows)
    assert stats.n == 1 and stats.geomean == pytest.approx(3.0)
    assert fast_p(rows, 1) == pytest.approx(1 / 5)
    assert fast_p(rows, 0) == 1.0  # all five are correct


def test_summary_and_per_level_breakdown():
    s = summarize(ROWS)
    assert (s.n_rows, s.n_ok) == (7, 4)
    assert s.correctness_rate == pytest.approx(4 / 7)
    assert [p for p, _ in s.fast_eager] == list(P_VALUES)
    assert s.fast(1.0) == pytest.approx(2 / 7) and s.fast(2.0, "best") == pytest.approx(1 / 7)
    assert s.eager.geomean == pytest.approx(2.0)

    assert [lv.level for lv in s.levels] == [1, 2, None]  # rows without a level come last
    l1, l2, lnone = s.levels
    assert (l1.n_rows, l1.n_ok, l1.correctness_rate) == (3, 3, 1.0)
    assert l1.fast(1.0) == pytest.approx(2 / 3)
    assert l1.eager.geomean == pytest.approx(2.0)
    assert (l2.n_rows, l2.n_ok) == (3, 1)
    assert l2.correctness_rate == pytest.approx(1 / 3)
    assert l2.fast(1.0) == 0.0 and l2.eager.geomean is None  # its only ok row has no timing
    assert (lnone.n_rows, lnone.n_ok, lnone.correctness_rate) == (1, 0, 0.0)
    assert per_level(ROWS) == s.levels


def test_status_and_flag_counts():
    assert status_counts(ROWS) == (("crash", 1), ("incorrect", 1), ("suspicious", 1), ("ok", 4))
    rows = ROWS + [("x", 3, "h", v(Status.SUSPICIOUS, flags=("side_stream", "side_stream")))]
    # A flag repeated in one row counts once; most frequent first, then by name.
    assert flag_counts(rows) == (("side_stream", 2), ("monkey_patch", 1), ("shape_mismatch", 1))
    s = summarize(rows)
    assert s.status_count(Status.SUSPICIOUS) == 2 and s.status_count("timeout") == 0
    assert s.flag_count("side_stream") == 2 and s.flag_count("zero_output") == 0


def test_no_rows_gives_none_not_errors():
    s = summarize([])
    assert (s.n_rows, s.n_ok, s.correctness_rate) == (0, 0, None)
    assert all(value is None for _, value in s.fast_eager + s.fast_best)
    assert s.eager.n == 0 and s.eager.mean is None and s.eager.median is None and s.eager.geomean is None
    assert s.levels == () and s.status_counts == () and s.flag_counts == ()
    assert fast_p([], 1.0) is None and correctness_rate([]) is None and geometric_mean([]) is None


def test_rows_without_any_speedup():
    rows = [("p", 1, "a", v(Status.CRASH)), ("p", 1, "b", v(Status.INCORRECT))]
    s = summarize(rows)
    assert s.correctness_rate == 0.0 and s.fast(1.0) == 0.0 and s.fast(0.0, "best") == 0.0
    assert s.eager.geomean is None and s.best.median is None and s.eager.n == 0


def test_records_are_frozen_and_arguments_checked():
    s = summarize(ROWS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.n_rows = 0  # type: ignore[misc]
    with pytest.raises(KeyError):
        s.fast(3.0)  # not among the computed p values
    with pytest.raises(ValueError, match="tensorrt"):
        fast_p(ROWS, 1.0, against="tensorrt")  # type: ignore[arg-type]  # not a baseline's name
    custom = summarize(ROWS, ps=(3.0,))
    assert custom.fast(3.0) == pytest.approx(1 / 7)  # only the 8x row
    assert math.isclose(summarize(ROWS).fast(0.0), 4 / 7)


# ---- correct outputs under two tolerances, spread, seconds ----------------------------------

from synthetic_run import ROWS as KB_ROWS  # noqa: E402
from synthetic_run import check  # noqa: E402

from hercules.report.stats import correctness, kernelbench_correct, seconds_stats  # noqa: E402


def test_kernelbench_correctness_is_read_defensively():
    ok = v(Status.OK, eager=2.0)
    assert kernelbench_correct(ok) is None  # no check at all: unknown
    assert kernelbench_correct(dataclasses.replace(ok, check=check(True, True))) is True
    assert kernelbench_correct(dataclasses.replace(ok, check=check(False, False))) is False
    assert kernelbench_correct(dataclasses.replace(ok, check={"correct_kernelbench": True})) is True  # type: ignore[arg-type]
    # A check written before the field existed says nothing; a row with no output is incorrect.
    from hercules.harness.records import CheckResult

    old = CheckResult(correct=True, trials=5, max_abs_err=None, rel_err=None, ref_rel_err=None)
    if not hasattr(old, "correct_kernelbench"):
        assert kernelbench_correct(dataclasses.replace(ok, check=old)) is None
    for status in (Status.BUILD_ERROR, Status.CRASH, Status.TIMEOUT, Status.RUNTIME_ERROR):
        assert kernelbench_correct(v(status)) is False
    assert kernelbench_correct(v(Status.INCORRECT)) is None


def test_correct_outputs_under_both_tolerances():
    c = correctness(KB_ROWS)
    assert (c.n_rows, c.strict, c.kernelbench, c.kernelbench_known) == (9, 6, 7, 9)
    assert c.strict_rate == pytest.approx(6 / 9) and c.kernelbench_rate == pytest.approx(7 / 9)
    # Rows of unknown KernelBench correctness leave its denominator, not the strict one.
    unknown = ROWS  # the stats fixture's verdicts carry no check: only the crash is known
    c = correctness(unknown)
    assert (c.strict, c.n_rows) == (5, 7)  # 4 ok + the suspicious row's correct outputs
    assert (c.kernelbench, c.kernelbench_known, c.kernelbench_rate) == (0, 1, 0.0)
    assert correctness([]).strict_rate is None and correctness([]).kernelbench_rate is None
    s = summarize(KB_ROWS)
    assert [lv.correctness.kernelbench for lv in s.levels] == [4, 2, 1]
    assert [lv.correctness.strict for lv in s.levels] == [3, 2, 1]


def test_speedup_quartiles_and_seconds_per_evaluation():
    eager = speedup_stats(ROWS, "eager")  # 0.5, 2, 8
    assert (eager.q1, eager.median, eager.q3) == (pytest.approx(1.25), 2.0, pytest.approx(5.0))
    one = speedup_stats([ROWS[0]], "eager")
    assert one.q1 == one.q3 == one.median == 2.0
    assert speedup_stats([], "eager").q1 is None
    secs = seconds_stats(KB_ROWS)
    assert (secs.n, secs.median, secs.total) == (9, 14.0, 194.0)
    assert seconds_stats(ROWS).n == 0 and seconds_stats(ROWS).median is None  # never recorded
    level1 = summarize(KB_ROWS).levels[0]
    assert level1.seconds.median == pytest.approx(10.5)
    assert level1.status_counts == (("incorrect", 1), ("ok", 3)) and level1.flag_counts == ()
