"""The figures of the passes whose every call is judged, and how they bound a candidate's time."""

import pytest

from hercules.harness.policy import (
    JUDGED_MIN_CALLS,
    JUDGED_RATIO_LIMIT,
    JUDGED_REQUEST_MS,
    WALL_SLACK_MS,
    JudgedPasses,
    burst_calls,
    landing_on_set0,
    timing_set_seeds,
)


def _passes(fresh_ms=1.0, overhead_ms=0.0, calls=100):
    return JudgedPasses(fresh_ms=fresh_ms, seen_ms=fresh_ms, seen_fastest_ms=fresh_ms, calls=calls,
                        fresh_overhead_ms=overhead_ms, seen_overhead_ms=overhead_ms)


def test_a_candidate_that_skips_half_its_unjudged_calls_gains_at_most_the_ratio():
    # Honest per-call cost 1 ms; the long burst (half the calls skipped) reads 0.5 ms. The floor
    # holds the time within JUDGED_RATIO_LIMIT of the judged figure, below the 1.5x a user notices.
    floor = _passes(fresh_ms=1.0, overhead_ms=5.0).floor_ms()
    assert 0.5 < floor <= 1.0 / JUDGED_RATIO_LIMIT
    assert 1.0 / floor < 1.5


def test_the_floor_allows_an_honest_candidate_its_long_burst_figure():
    # An honest fresh pass reads a little slower than the long burst (inputs handed in with it):
    # within the ratio, the floor stays below the long burst and changes nothing.
    assert _passes(fresh_ms=1.1, overhead_ms=2.0).floor_ms() < 1.0


def test_the_floor_leaves_room_for_the_calibrations_error_and_is_never_negative():
    loose = _passes(fresh_ms=0.2, overhead_ms=200.0, calls=40)
    assert loose.floor_ms() == 0.0
    tight = _passes(fresh_ms=0.2, overhead_ms=0.0, calls=40)
    assert tight.floor_ms() == pytest.approx((0.2 - (WALL_SLACK_MS + JUDGED_REQUEST_MS) / 40) / JUDGED_RATIO_LIMIT)


def test_passes_too_short_to_say_set_no_floor():
    # One call of a 512 MB input set (KernelBench 95_CrossEntropyLoss on the H200): an honest pass
    # read 1.23 ms against 0.43 ms in the long burst; it must not hold the candidate to 1.23.
    assert _passes(fresh_ms=1.23, overhead_ms=0.0, calls=1).floor_ms() == 0.0
    assert _passes(fresh_ms=1.0, calls=JUDGED_MIN_CALLS - 1).floor_ms() == 0.0
    assert _passes(fresh_ms=1.0, calls=JUDGED_MIN_CALLS).floor_ms() > 0.0


def test_slacks_are_the_whole_round_trip_per_call_and_respect_a_floor():
    passes = _passes(overhead_ms=9.95, calls=100)
    assert passes.fresh_slack_ms() == pytest.approx(0.1)
    assert passes.seen_slack_ms(floor_ms=1.0) == 1.0


@pytest.mark.parametrize("calls,sets,expected", [(10, 3, 10), (12, 3, 10), (2, 3, 1), (5, 1, 5), (0, 4, 1)])
def test_bursts_end_on_the_first_input_set(calls, sets, expected):
    landed = landing_on_set0(calls, sets)
    assert landed == expected and (landed - 1) % sets == 0


def test_burst_length_dwarfs_the_round_trip_and_is_capped():
    gpu = {"device_type": "cuda"}
    assert burst_calls(per_call_ms=1.0, overhead_ms=0.1, sets=3, **gpu) == 58  # 60, landing on set 0 below it
    assert burst_calls(per_call_ms=1.0, overhead_ms=0.1, sets=40, **gpu) == 41  # below it only one call: above it
    # A long call with many sets: the first landing past the target, not one call
    assert burst_calls(per_call_ms=11.8, overhead_ms=0.4, sets=16, **gpu) == 17
    # ...unless that burst would run past BURST_MAX_MS: the last landing before it
    assert burst_calls(per_call_ms=200.0, overhead_ms=0.4, sets=16, **gpu) == 1
    assert burst_calls(per_call_ms=1e-4, overhead_ms=0.1, sets=1, **gpu) == 2000
    # Ten round trips whatever the target, on either device
    assert burst_calls(per_call_ms=1.0, overhead_ms=20.0, sets=1, **gpu) == 200
    assert burst_calls(per_call_ms=1.0, overhead_ms=20.0, sets=1, device_type="cpu") == 200
    # The CPU's target is half the GPU's: 30 calls of 1 ms, 28 landing on set 0 of 3
    assert burst_calls(per_call_ms=1.0, overhead_ms=0.1, sets=3, device_type="cpu") == 28
    assert burst_calls(per_call_ms=1.0, overhead_ms=0.1, sets=1, device_type="cpu") == 30


def test_timing_buffers_hold_the_refreshed_sets_first_then_the_trials_round():
    trial_seeds = [11, 12, 13]
    # 8 buffers: the candidate keeps the 3 trial sets and clones them round (timing.rotation_sets);
    # the first two were refreshed for revalidation.
    assert timing_set_seeds(trial_seeds, 8, [91, 92]) == [91, 92, 13, 11, 12, 13, 11, 12]
    assert timing_set_seeds(trial_seeds, 2, [91, 92, 93]) == [91, 92]
    assert timing_set_seeds(trial_seeds, 1, []) == [11]


@pytest.mark.parametrize("trials,set_elements", [(5, 1000), (3, 1000), (5, 40_000_000), (2, 200_000_000)])
def test_the_parents_map_of_timing_buffers_matches_the_workers_rotation(trials, set_elements):
    """On a GPU the candidate keeps its trial sets in trial order and clones them round to fill its
    timing buffers (timing.rotation_sets, sized by timing.sets_to_keep); the parent's map of which
    seed each buffer holds must agree, or honest calls drawn for judging would be judged wrong."""
    import torch

    from hercules.harness import timing
    device = torch.device("cuda")  # only its type is read: the sets below stay on the CPU
    per_set = torch.empty(0).new_zeros(1).expand(set_elements)  # set_elements float32 values, no memory
    kept = [(per_set, torch.tensor(float(t))) for t in range(trials)]
    kept = kept[:timing.sets_to_keep(timing.set_bytes(kept[0]), device)]  # what op_run keeps
    buffers = timing.rotation_sets(kept, device)
    mapped = timing_set_seeds([100 + t for t in range(trials)], len(buffers), [])
    assert [100 + int(b[1]) for b in buffers] == mapped
