"""``hercules optimize`` names a new best only when it is faster beyond the measured noise: the
timing samples' IQR over their median, of the new variant and of the best so far."""

from __future__ import annotations

from hercules.harness.records import Speedups, Status, TimingResult, Verdict
from hercules.optimize.pool import Pool, beats
from hercules.optimize.records import Slot, Variant
from hercules.problems.model import Problem

PROBLEM = Problem(name="p", code="class Model: pass\n", source="test")


def variant(round_: int, eager: float, iqr_fraction: float) -> Variant:
    median = 1.0 / eager
    timing = TimingResult(method="perf_counter", reps=20, median_ms=median, mean_ms=median, min_ms=median,
                          max_ms=median, iqr_ms=median * iqr_fraction, std_ms=0.0, input_sets=1, l2_flushed=False)
    verdict = Verdict(status=Status.OK, correct=True, flags=(), error=None, max_abs_err=0.0, rel_err=0.0, ref_ms=1.0,
                      cand_ms=median, speedup=Speedups(eager=eager, best=eager), sol_fraction=None,
                      baselines_ms={"eager": 1.0}, timing=timing)
    return Variant(slot=Slot("p", round_, 0), origin="model", code=f"# {round_}\n", status="ok", verdict=verdict)


def test_a_faster_draw_inside_the_noise_is_a_tie_kept_by_the_earlier_variant():
    # The figures: one computation scored 1.11x, 1.85x and 1.17x across runs.
    pool = Pool(PROBLEM)
    pool.add(variant(1, 1.04, 0.20))
    pool.add(variant(2, 1.85, 0.40))  # 1.85 > 1.04 * (1 + 0.2 + 0.4): faster beyond the noise, a new best
    assert beats(pool.variants[2], pool.variants[1])
    assert pool.best().name == "r2s0"

    noisy = Pool(PROBLEM)
    noisy.add(variant(1, 1.11, 0.30))
    noisy.add(variant(2, 1.85, 0.45))  # 1.85 < 1.11 * 1.75 = 1.94: inside the noise, a tie
    noisy.add(variant(3, 1.17, 0.05))
    assert noisy.best().name == "r1s0" and noisy.best_speedup() == 1.11


def test_a_quiet_measurement_that_is_clearly_faster_is_the_new_best():
    pool = Pool(PROBLEM)
    pool.add(variant(1, 1.00, 0.02))
    pool.add(variant(2, 1.10, 0.02))  # 10% faster with 4% of noise between them
    assert pool.best().name == "r2s0"
    assert pool.best(max_round=1).name == "r1s0"


def _side_by_side(round_: int, eager: float, low: float, high: float) -> Variant:
    v = variant(round_, eager, 0.0)
    speedup = Speedups({"eager": eager}, best=eager, intervals={"eager": (low, high), "best": (low, high)})
    return Variant(slot=v.slot, origin=v.origin, code=v.code, status=v.status,
                   verdict=Verdict(**{**v.verdict.__dict__, "speedup": speedup}))


def test_speedups_measured_side_by_side_beat_only_when_their_intervals_do_not_overlap():
    # Quiet timings (no IQR) but rounds that disagree: the intervals, not the medians, decide.
    pool = Pool(PROBLEM)
    pool.add(_side_by_side(1, 1.10, 0.95, 1.30))
    pool.add(_side_by_side(2, 1.40, 1.20, 1.60))  # overlaps the first: a tie
    assert not beats(pool.variants[2], pool.variants[1]) and pool.best().name == "r1s0"
    pool.add(_side_by_side(3, 1.60, 1.35, 1.80))  # clear of the first's 1.30
    assert pool.best().name == "r3s0" and pool.best_speedup() == 1.60


def test_the_reports_show_every_speedup_with_its_interval_and_a_tie_as_one(tmp_path):
    from hercules.optimize.loop import ProblemState
    from hercules.optimize.report import render_markdown, write_best

    pool = Pool(PROBLEM)
    pool.add(_side_by_side(1, 1.32, 1.02, 1.75))
    pool.add(_side_by_side(2, 1.13, 0.79, 1.86))  # the interval holds 1.0: a tie with eager
    state = ProblemState(pool=pool)
    result = write_best(tmp_path, state)
    assert result.best_intervals["eager"] == (1.02, 1.75)
    assert result.to_json()["best_intervals"]["eager"] == [1.02, 1.75]
    md = render_markdown([result], {"p": state}, {"objective": "eager"})
    best_row = next(line for line in md.splitlines() if line.startswith("| p | r1s0 |"))
    assert "1.32x [1.02-1.75]" in best_row
    assert "1.13x [0.79-1.86] tie" in next(line for line in md.splitlines() if "| r2s0 |" in line)
