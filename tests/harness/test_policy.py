"""The measurement policy's pure rules, each from scripted figures (no worker, no clock): burst
and pass sizes, how many rounds, when events are taken again, when a baseline's round suffices,
what counts as reuse, which figure the time is. The load cases are figures once measured on a busy
CI host; the probe-driven rules (checked bursts, judged passes, the floor) are in
test_drift_pairing.py."""

import secrets

import pytest

from hercules.harness.policy import (
    BURST_MAX_MS,
    BURST_TARGET_MS,
    CHECKED_OUTPUT_BYTES,
    FRESH_PASS_BYTES,
    FRESH_PASS_CALLS,
    FRESH_ROUNDS_MAX,
    FRESH_ROUNDS_MIN,
    FRESH_TOTAL_BYTES,
    JUDGED_MIN_CALLS,
    JudgedPasses,
    baseline_confirmed,
    bounded_by,
    content_cache_findings,
    events_need_retime,
    events_settled,
    fresh_pass_plan,
    hidden_work,
    long_burst_calls,
    passes_caught,
    rounds_after,
    unmeasured,
)
from hercules.harness.records import Flag

MB = 1 << 20


def test_a_cheap_call_gets_full_passes_and_rounds_enough_for_the_target():
    plan = fresh_pass_plan("cpu", sets=3, per_call_ms=0.05, set_bytes=4096, out_bytes=4096)
    assert plan.calls == FRESH_PASS_CALLS["cpu"] and plan.seen_calls == plan.calls
    # 32 calls of 0.05 ms is 1.6 ms a pass: as many rounds as reach the target, at most the maximum
    assert plan.rounds == FRESH_ROUNDS_MAX and plan.least == FRESH_ROUNDS_MIN


def test_a_slow_call_gets_the_fewest_rounds():
    plan = fresh_pass_plan("cuda", sets=4, per_call_ms=30.0, set_bytes=MB, out_bytes=MB)
    assert plan.calls == 4  # at least one call per timing buffer, however slow
    assert plan.rounds == FRESH_ROUNDS_MIN


def test_a_huge_input_set_gets_one_call_and_a_seen_pass_long_enough_to_time():
    # KernelBench 51_Argmax on the H200: an 8.6 GB input, 2.76 ms per call. One call of it per
    # fresh pass, and the seen pass goes round the buffers for the target's length.
    plan = fresh_pass_plan("cuda", sets=1, per_call_ms=2.76, set_bytes=8600 * MB, out_bytes=4 * MB)
    assert plan.calls == 1 and plan.calls < JUDGED_MIN_CALLS
    assert plan.seen_calls == -(-int(BURST_TARGET_MS["cuda"] * 100) // 276)  # ceil(60 / 2.76)
    assert plan.rounds == plan.least == 1  # three rounds would move more than FRESH_TOTAL_BYTES


def test_passes_are_capped_by_their_input_bytes_and_seen_calls_by_output_bytes():
    plan = fresh_pass_plan("cpu", sets=2, per_call_ms=0.01, set_bytes=FRESH_PASS_BYTES // 4, out_bytes=32 * MB)
    assert plan.calls == 4
    # Fewer than JUDGED_MIN_CALLS: the seen pass would go round for the target's length, but no
    # more outputs than CHECKED_OUTPUT_BYTES (2 of 32 MB) and never fewer calls than the fresh pass
    assert CHECKED_OUTPUT_BYTES["cpu"] // (32 * MB) < plan.seen_calls == plan.calls
    assert fresh_pass_plan("cpu", sets=2, per_call_ms=1.0, set_bytes=FRESH_PASS_BYTES // 4,
                           out_bytes=MB).seen_calls == BURST_TARGET_MS["cpu"]  # 30 calls of 1 ms


def test_a_pass_hands_back_no_more_outputs_than_the_total_a_round_may_move():
    # CUDA-L1's 7_Matmul_with_small_K_dimension on the H200: 4 MB of inputs and a 1 GB output a
    # call. Bounded by the inputs alone a pass took 64 calls: one 64 GB pack of outputs.
    plan = fresh_pass_plan("cuda", sets=1, per_call_ms=0.3, set_bytes=4 * MB, out_bytes=1024 * MB)
    assert plan.calls == FRESH_TOTAL_BYTES // (1024 * MB) == 1
    plan = fresh_pass_plan("cuda", sets=1, per_call_ms=0.01, set_bytes=MB, out_bytes=64 * MB)
    assert plan.calls == FRESH_TOTAL_BYTES // (64 * MB) == 16
    assert plan.calls * 64 * MB <= FRESH_TOTAL_BYTES


def test_rounds_shrink_when_the_passes_are_far_slower_than_planned_but_not_below_the_least():
    plan = fresh_pass_plan("cpu", sets=3, per_call_ms=0.07, set_bytes=MB, out_bytes=MB)
    # A result cache: 32 calls of 38 ms, not of 0.07 ms (a red-team evaluation took 133 s before)
    assert rounds_after(plan, fastest_ms=38.0) == plan.least
    # One slow pass must not cut an honest candidate's rounds: the fastest so far decides
    assert rounds_after(plan, fastest_ms=0.07) == plan.rounds


def test_the_long_burst_follows_the_events_unless_the_parents_single_calls_say_otherwise():
    assert long_burst_calls(False, event_ms=0.5, overhead_ms=0.1, sets=3, parent_single_ms=0.5,
                            device_type="cuda") == 118
    assert long_burst_calls(False, event_ms=0.5, overhead_ms=0.1, sets=3, parent_single_ms=0.5,
                            device_type="cpu") == 58  # half the GPU's target
    # Forged events (a hundredth of the real 25 ms): the parent's single calls cap the burst
    for device_type in ("cuda", "cpu"):
        calls = long_burst_calls(False, event_ms=0.25, overhead_ms=0.1, sets=3, parent_single_ms=25.0,
                                 device_type=device_type)
        assert calls * 25.0 <= BURST_MAX_MS and (calls - 1) % 3 == 0
    assert long_burst_calls(True, event_ms=500.0, overhead_ms=0.1, sets=3, parent_single_ms=500.0,
                            device_type="cuda") == 1


def test_events_are_taken_again_only_on_a_gpu_and_only_well_above_the_long_burst():
    # KernelBench 6_GoogleNetInceptionModule on the H200: events 34.8 ms against 16.8 in the bursts
    assert events_need_retime("cuda", event_ms=34.8, wall_ms=16.8)
    assert not events_need_retime("cuda", event_ms=17.0, wall_ms=16.8)
    assert not events_need_retime("cpu", event_ms=34.8, wall_ms=16.8)  # one clock on the CPU
    assert events_settled(18.0, 16.8) and not events_settled(30.0, 16.8)


def test_a_compiled_baseline_whose_bursts_confirm_its_events_needs_one_round_eager_always_two():
    assert baseline_confirmed("cuda", "compile", event_ms=1.00, wall_ms=1.03)
    assert not baseline_confirmed("cuda", "compile", event_ms=1.00, wall_ms=1.20)
    # eager's events read 37.6 ms against 18.7 in its bursts beside six evaluations: both ways
    assert not baseline_confirmed("cuda", "compile", event_ms=37.6, wall_ms=18.7)
    assert not baseline_confirmed("cuda", "eager", event_ms=1.00, wall_ms=1.00)
    assert not baseline_confirmed("cpu", "compile", event_ms=1.00, wall_ms=1.00)


def _passes(fresh_ms, seen_fastest_ms, calls=32, overhead_ms=0.0):
    return JudgedPasses(fresh_ms=fresh_ms, seen_ms=seen_fastest_ms, seen_fastest_ms=seen_fastest_ms, calls=calls,
                        fresh_overhead_ms=overhead_ms, seen_overhead_ms=overhead_ms)


def test_reuse_and_skipping_are_caught_against_the_long_burst():
    assert passes_caught(_passes(fresh_ms=9.0, seen_fastest_ms=0.5), long_ms=0.5, device_type="cuda")  # reuse
    assert passes_caught(_passes(fresh_ms=0.5, seen_fastest_ms=9.0), long_ms=0.5, device_type="cuda")  # skipping
    assert not passes_caught(_passes(fresh_ms=0.6, seen_fastest_ms=0.55), long_ms=0.5, device_type="cuda")


def test_on_the_cpu_a_few_ms_of_a_loaded_host_are_not_reuse():
    # Two evaluations sharing the loaded 2-core host: a pass delayed by ~1 ms per call, honest
    delayed = _passes(fresh_ms=1.05, seen_fastest_ms=0.02)
    assert not passes_caught(delayed, long_ms=0.02, device_type="cpu")
    assert passes_caught(delayed, long_ms=0.02, device_type="cuda")


def test_a_single_fresh_call_far_slower_than_the_seen_one_is_a_content_cache():
    found = content_cache_findings([5.0], [0.4, 0.5], "the candidate's events", slack_ms=0.05)
    assert [f.flag for f in found] == [Flag.RESULT_CACHE.value]
    assert content_cache_findings([1.2], [0.4, 0.5], "the candidate's events", slack_ms=0.05) == []
    assert content_cache_findings([], [0.4], "the candidate's events", slack_ms=0.05) == []


def test_time_the_events_miss_is_hidden_work_only_when_the_host_issued_it_early():
    assert unmeasured(event_ms=0.1, wall_ms=1.0)
    assert hidden_work(event_ms=0.1, wall_ms=1.0, enqueue_ms=0.05)  # device busy long after the host
    assert not hidden_work(event_ms=0.1, wall_ms=1.0, enqueue_ms=0.9)  # host-bound: Python overhead
    assert not unmeasured(event_ms=1.0, wall_ms=1.2)


@pytest.mark.parametrize("bound,expected", [(1.0, "events"), (1.2, "wall"), (1.3, "wall"), (1.5, "judged")])
def test_the_time_names_the_figure_it_is(bound, expected):
    assert bounded_by(bound, event_ms=1.0, wall_figures=(1.2, 1.3)) == expected
    assert bounded_by(1.3, event_ms=1.0, wall_figures=(1.2, None)) == "judged"


def test_fresh_total_bytes_bounds_the_rounds():
    plan = fresh_pass_plan("cuda", sets=2, per_call_ms=0.001, set_bytes=FRESH_TOTAL_BYTES // 8, out_bytes=MB)
    assert plan.rounds * plan.calls * (FRESH_TOTAL_BYTES // 8) <= FRESH_TOTAL_BYTES * 1.1


def test_the_median_interval_is_an_order_statistic_interval_of_the_stated_coverage():
    from hercules.harness.policy import median_interval

    # Seven values: only [least, greatest] reaches 95% (98.4%); nine: the second from each end (96.1%)
    assert median_interval([1.0, 0.9, 1.1, 1.05, 0.95, 1.02, 0.98]) == (1.0, 0.9, 1.1)
    assert median_interval([float(v) for v in range(1, 10)]) == (5.0, 2.0, 8.0)
    assert median_interval([float(v) for v in range(1, 12)]) == (6.0, 2.0, 10.0)  # 98.8%; k = 3 is 93.5%
    assert median_interval([2.0, 1.0]) == (1.5, 1.0, 2.0)  # too few for the coverage: the extremes


def test_side_by_side_rounds_read_one_for_the_same_code_through_drift():
    from hercules.harness.policy import PAIRED_ROUNDS, paired_speedup

    # The host drifts 1.86x between rounds; both sides of each round move together.
    speeds = [1.0, 1.4, 1.86, 1.2, 0.9, 1.5, 1.1][:PAIRED_ROUNDS]
    pairs = [(0.5 * s, 0.5 * s * (1.0 + 0.01 * (-1) ** i)) for i, s in enumerate(speeds)]
    found = paired_speedup(pairs, candidate_hold=1.0)
    assert found.rounds == PAIRED_ROUNDS and found.low <= 1.0 <= found.high
    assert 0.99 <= found.speedup <= 1.01 and found.high / found.low < 1.03


def test_a_candidate_held_above_its_bursts_keeps_the_hold_in_its_side_by_side_speedup():
    from hercules.harness.policy import hold, paired_speedup

    # Skips half its calls where only the last is judged: bursts read 0.5 ms, judged passes held it
    # to 1.0 ms; eager is 1.0 ms. The bursts alone would say 2x.
    pairs = [(0.5, 1.0)] * 7
    found = paired_speedup(pairs, candidate_hold=hold(bound_ms=1.0, wall_ms=0.5))
    assert found.speedup == pytest.approx(1.0) and found.high == pytest.approx(1.0)
    assert paired_speedup(pairs[:4], candidate_hold=1.0) is None  # fewer valid rounds than the least
    assert paired_speedup([(0.5, 1.0)] * 4 + [(0.5, 0.0)] * 3, candidate_hold=1.0) is None  # void rounds


def test_the_judged_passes_floor_holds_the_side_by_side_rounds_whatever_else_set_the_time():
    from hercules.harness.policy import JudgedPasses, hold, paired_speedup, side_by_side_hold

    # A cache keyed by content (H100 figures): 0.155 ms per call on never-seen values, 0.06 on
    # values met before (the long burst and every side-by-side round), eager 0.10 a call.
    passes = JudgedPasses(fresh_ms=0.155, seen_ms=0.06, seen_fastest_ms=0.06, calls=256, fresh_overhead_ms=0.5,
                          seen_overhead_ms=0.3)
    floor_ms, wall_ms = passes.floor_ms(), 0.06
    assert floor_ms > 2 * wall_ms
    pairs = [(0.06, 0.10)] * 7
    # A long burst beside load set the time above the floor (bounded by "wall"): the rounds are
    # still held by the floor, and the cache gains nothing over eager.
    held = side_by_side_hold(0.2, wall_ms, "wall", floor_ms)
    assert held == pytest.approx(floor_ms / wall_ms)
    assert paired_speedup(pairs, held).speedup < 1.0
    # Without the floor the same rounds read 1.67x.
    assert paired_speedup(pairs, side_by_side_hold(0.2, wall_ms, "wall", 0.0)).speedup == pytest.approx(0.10 / 0.06)
    # A check of the calls that held the time higher than the floor wins; neither holds below 1.
    assert side_by_side_hold(0.3, wall_ms, "judged", floor_ms) == pytest.approx(hold(0.3, wall_ms))
    assert side_by_side_hold(0.05, wall_ms, "events", 0.04) == 1.0
    assert side_by_side_hold(0.2, None, "judged", floor_ms) == 1.0  # no long burst to hold against


def test_baselines_are_cached_only_from_an_idle_device_and_eager_only_once():
    from hercules.harness.policy import baselines_to_cache

    cached = {"eager": 1.0, "compile": 0.8}
    assert baselines_to_cache(cached, {"eager": 1.2, "cudagraph": 0.5}, set(), idle=True) == \
        {"eager": 1.0, "compile": 0.8, "cudagraph": 0.5}  # eager kept as first cached
    assert baselines_to_cache({}, {"eager": 1.2}, set(), idle=True) == {"eager": 1.2}
    assert baselines_to_cache(cached, {"compile": 0.7}, set(), idle=False) is None  # a busy device
    # a baseline that ran out of memory beside others may fit another time: not cached as missing
    assert baselines_to_cache({}, {"compile": None, "eager": 1.0}, {"compile"}, idle=True) == {"eager": 1.0}
    assert baselines_to_cache(cached, {}, set(), idle=True) is None


def test_the_idle_probe_reads_busy_only_well_above_its_best():
    from hercules.harness.policy import IDLE_PROBE_RATIO, device_busy

    assert not device_busy(1.0, None)  # no best yet: this one is it
    assert not device_busy(1.4, 1.0) and device_busy(IDLE_PROBE_RATIO + 0.01, 1.0)


def test_a_burst_whose_every_call_comes_back_is_not_cut_to_land_on_a_set():
    """Outputs bound the calls of an every-call burst, nothing else: each call is judged against its
    own buffer's seed, so a count between two landings on set 0 stays (KernelBench's
    8_ResNetBasicBlock: 128 MB of output a call, 8 fit in the H200's limit, 16 buffers; cut to the
    one call landing on set 0, its bursts beside eager's eight read its own code at 0.59x)."""
    from hercules.harness.policy import CHECKED_OUTPUT_BYTES, checked_calls, drawn_calls

    out_bytes = 128 << 20
    fit = CHECKED_OUTPUT_BYTES["cuda"] // out_bytes
    assert checked_calls(35, out_bytes, "cuda") == fit == 8
    assert checked_calls(5, out_bytes, "cuda") == 5  # fewer asked than fit
    assert checked_calls(35, CHECKED_OUTPUT_BYTES["cuda"] * 2, "cuda") == 1  # not one fits: still one call
    seeds = list(range(100, 116))
    judged = drawn_calls(fit, len(seeds), seeds, secrets.SystemRandom())
    assert judged[-1] == seeds[fit - 1]  # the last call, judged against the buffer it landed on
    assert all(seed in (None, seeds[i % len(seeds)]) for i, seed in enumerate(judged))


def test_a_bridge_to_eager_is_cached_with_its_baselines_time_and_dropped_with_it():
    from hercules.harness.policy import baselines_to_cache
    from hercules.harness.records import SideBySide

    bridge = SideBySide(speedup=0.5, low=0.45, high=0.55, rounds=7)
    entry = baselines_to_cache({}, {"eager": 1.0, "compile": 0.5}, set(), True, {"compile": bridge})
    assert entry["bridges"] == {"compile": [0.5, 0.45, 0.55, 7]} and entry["compile"] == 0.5
    # Out of memory this time (may not recur): neither its time nor its bridge is kept.
    assert "bridges" not in baselines_to_cache({}, {"compile": 0.5}, {"compile"}, True, {"compile": bridge})
    assert baselines_to_cache({}, {"compile": 0.5}, set(), False, {"compile": bridge}) is None  # device busy
    # A later entry keeps the bridges of baselines it did not time again.
    later = baselines_to_cache(entry, {"eager": 1.1, "cudagraph": 0.4}, set(), True, {})
    assert later["bridges"] == {"compile": [0.5, 0.45, 0.55, 7]} and later["eager"] == 1.0


def test_an_import_with_no_compiler_may_take_as_long_as_the_problem_takes_to_build():
    """A model whose own construction is slow (level 3 #1 on the H200: the reference's setup took
    113 s) is not a hung import at 60 s; a quick problem keeps the 60 s bound."""
    from hercules.harness.evaluate import BUILD_IDLE_S, build_idle_s

    assert build_idle_s(4.5) == BUILD_IDLE_S == 60.0
    assert build_idle_s(113.0) == pytest.approx(226.0)


def test_side_by_side_rounds_go_on_while_load_keeps_their_interval_wide():
    """Seven rounds when their ratios agree; more while load spreads them (the interval's ends
    further apart than PAIRED_WIDTH_LIMIT), never past PAIRED_ROUNDS_MAX."""
    from hercules.harness.policy import PAIRED_ROUNDS, PAIRED_ROUNDS_MAX, paired_rounds_enough

    steady = [(1.0, 1.0 + 0.01 * (i % 3)) for i in range(PAIRED_ROUNDS)]
    assert not paired_rounds_enough(steady[:-1], PAIRED_ROUNDS - 1)
    assert paired_rounds_enough(steady, PAIRED_ROUNDS)
    # The loaded 2-core machine: single rounds' ratios from 0.4 to 2.9 around a true 1.0.
    loaded = [(1.0, r) for r in (0.4, 2.9, 1.0, 1.7, 0.9, 1.1, 1.6)]
    assert not paired_rounds_enough(loaded, PAIRED_ROUNDS)
    calmer = loaded + [(1.0, 1.0 + 0.01 * (i % 5)) for i in range(12)]
    assert paired_rounds_enough(calmer, len(calmer))  # the order statistics close in on the median
    assert paired_rounds_enough(loaded * 3, PAIRED_ROUNDS_MAX)  # the cap
    void = [(1.0, 0.0)] * PAIRED_ROUNDS  # every round void: the device stays busy, stop there
    assert paired_rounds_enough(void, PAIRED_ROUNDS)
    assert not paired_rounds_enough(void[:4] + steady[:3], PAIRED_ROUNDS)  # three valid: more rounds


def test_later_bursts_follow_the_bound_when_the_events_understated_the_calls():
    from hercules.harness.policy import BURST_TARGET_MS, burst_calls, calls_at_bound

    # Events that were the calls' time: the long burst's calls, whatever their count.
    assert calls_at_bound(113, 6.0, 6.0, 0.1, 4, "cuda") == 113
    assert calls_at_bound(17, 3.4, 3.3, 0.1, 4, "cuda") == 17  # the bursts faster than the events
    # Events forged (0.06 ms) under a call the parent's clock reads at 6.1 ms, or a skipper held to
    # its judged calls 450x above its bursts: as many calls as the bound needs for the burst
    # target, a few rather than 113.
    for device_type in ("cuda", "cpu"):
        for sized_ms in (0.06, 0.0134):
            calls = calls_at_bound(113, sized_ms, 6.1, 0.1, 4, device_type)
            assert calls == burst_calls(6.1, 0.1, 4, device_type) < 20
            assert calls * 6.1 >= BURST_TARGET_MS[device_type] / 2
    # A bound a little over the events changes the count only where the burst target says so.
    assert calls_at_bound(19, 3.26, 3.30, 0.1, 3, "cuda") == min(19, burst_calls(3.30, 0.1, 3, "cuda"))
    # Never more than the long burst's (a bound on a call already sized past the target).
    assert calls_at_bound(3, 0.0005, 0.001, 0.1, 2, "cuda") == 3
    # A figure that says nothing keeps the long burst's.
    assert calls_at_bound(17, 3.0, 0.0, 0.1, 4, "cpu") == 17
