"""The measurement policy: every decision about how a candidate's time is taken, as functions of
measured figures.

Nothing here talks to a worker. The figures come from a ``Probe`` (the evaluation's real one sends
requests and reads the parent's clock; tests script one), so every rule that decides burst sizes,
how many rounds, when a slow figure is measured again and paired with a long burst, when a time is
held and by what, is tested with scripted figures, including the load cases that once flaked on a
busy CI host.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from hercules.harness.decide import Finding
from hercules.harness.records import Flag, SideBySide

# The parent's wall figure per call exceeding the in-process median by this much means time went
# unmeasured by the candidate's own timer (side streams, patched events); honest kernels agree
# within launch overhead (a few us per call).
WALL_RATIO_LIMIT = 1.5
WALL_SLACK_MS = 0.05
# One call on freshly written values against the same call again on those values: generous, since
# single calls are noisy; a cache keyed by content skips the work on seen values.
FRESH_RATIO_LIMIT = 3.0
# A burst lasts at least this long on the parent's clock, so its fixed costs (the round trip, the
# packing of the last outputs, calibrated separately) are small against the calls it times: at
# least ten times that round trip whatever the device (``burst_calls``). By device: on the CPU the
# timed calls are the host's own work, which the two sides of an evaluation take turns at, and
# every burst is time the CI machine's two cores spend on one evaluation. There 30 ms bursts cut
# the red team's honest control from 37-39 to 31.4 CPU-seconds over three evaluations (its timing
# stage 2.9-4.3 s to 1.9-2.6 s) with speedups against itself of 0.96-1.02 either way.
BURST_TARGET_MS = {"cuda": 60.0, "cpu": 30.0}
# Long bursts per figure, the faster kept, for candidate and baselines alike: load only ever slows
# one, and on the 2-core CPU machine one eager burst of a 3.4 ms problem read 5.35 ms, which made a
# candidate held to its true time look 1.52x faster.
LONG_BURSTS = 2
PARENT_SLACK_MS = 1.0
# Passes over never-seen values: enough rounds for their median to stand above the host's jitter.
FRESH_ROUNDS_MIN = 3
FRESH_ROUNDS_MAX = 12
FRESH_PASS_BYTES = 256 << 20
# Calls per pass, by device. A pass's figure carries its round trip's noise divided by its calls,
# and the slack allowed for it is that round trip over the calls. On the H200, with 32 calls, a
# candidate that ran 1 of the long burst's 2,000 unjudged calls of a 0.12 ms product (red team
# skip_with_protocol_knowledge, static scan off) came out ok at 97x: the slack of handing over 32
# sets, over 32, exceeded the call. On the CPU the slack is floored at PARENT_SLACK_MS whatever the
# calls, so more of them buy nothing there.
FRESH_PASS_CALLS = {"cuda": 256, "cpu": 32}
# Passes whose every call is judged floor the time, whatever the long burst says: a candidate that
# skips calls where only the last is judged, fewer than would make a fresh pass FRESH_RATIO_LIMIT
# times slower (half of them: ok at 2.2x on the H200, red team skip_half_with_protocol_knowledge
# with the static scan off), is held to its fastest judged pass over JUDGED_RATIO_LIMIT, less what
# that figure can be off by per pass: JUDGED_CALIBRATION_ERROR of its calibrated round trip (taken
# as the least of several) and JUDGED_REQUEST_MS that a request costs the candidate's process and
# no calibration sees (1.5-7 ms per burst on the H200; likely full garbage collections, see
# worker.SETTLE_OPS). Only passes of at least
# JUDGED_MIN_CALLS calls: with one call (a 512 MB input set, KernelBench 95_CrossEntropyLoss) an
# honest pass read 1.23 ms against 0.43 ms in the long burst.
JUDGED_RATIO_LIMIT = 1.2
JUDGED_CALIBRATION_ERROR = 0.1
JUDGED_REQUEST_MS = 2.0
JUDGED_MIN_CALLS = 32
# A set of passes that shows reuse is measured again this many times, and flags only if every set
# does. Once was not enough on the CPU: the first evaluation of a CI run (KernelBench
# 12_Matmul_with_diagonal_matrices_, 3 calls of 64 MB per pass) was flagged result_cache honest;
# in another run of it the calibration of that pass's request read 578 ms, then 59 and 58 ms.
JUDGED_REMEASURES = 2
# The long burst again, every call's outputs kept and returned, and CHECKED_JUDGED of its calls
# (drawn by the parent after the reply, so the candidate cannot know which) judged against the
# values their timing buffer holds: a candidate that skips a share f of unjudged calls is caught
# with probability 1 - (1 - f)^CHECKED_JUDGED (half of them: 1 - 2^-16), or, computing them all
# here, held to this burst's time. Outputs kept up to CHECKED_OUTPUT_BYTES (by device), fewer calls
# where they do not fit.
CHECKED_JUDGED = 16
# Checked bursts per evaluation, the fastest kept; while the fastest is above the limit, more, up
# to CHECKED_BURSTS_MAX (every one judges its own drawn calls). On the H200 a host-bound honest
# candidate's bursts read 0.13-0.19 ms per call from one run to the next (others' load on the
# host): two slow ones in a row held it to 0.165 against 0.128 in its long burst.
CHECKED_BURSTS = 2
CHECKED_BURSTS_MAX = 2 + 2 * JUDGED_REMEASURES
CHECKED_OUTPUT_BYTES = {"cuda": 1 << 30, "cpu": 64 << 20}
FRESH_TOTAL_BYTES = 1 << 30
BURST_MAX_CALLS = 2000
# A baseline is timed this many times, the fastest figure kept: the candidate's time is the fastest
# of several judged bursts or passes, and one slow baseline figure inflates its speedup. On the
# 2-core VM eager once read 5.45 ms per call where it reads 3.8-3.9 (a red-team skipper held to its
# full 3.5 ms came out 1.55x).
BASELINE_ROUNDS = 2
# ...except on a GPU when the first round's long bursts and its events agree within this ratio
# either way (a compiled baseline only): the events of a device-bound call repeat within ~1% there,
# and every round holds the device lock for its timing budget and two long bursts. Either way: on
# the H200, with six KernelBench evaluations in flight, eager's events of 16_ConvTranspose2d read
# 37.6 ms against 18.7 in its bursts, and a one-sided rule took that round alone (0.52x apparent
# slowdown of eager against itself). Eager, the figure speedups are quoted against, always takes
# every round.
BASELINE_AGREEMENT = 1.05
# The candidate's in-process timing is taken again (the lowest median kept, at most this many more
# times) when its events read above the parent's long burst by more than this ratio: others' device
# work during the timed repetitions (neighbours' torch.compile autotuning runs outside the device
# lock) inflated events to 2x the bursts' figure on the H200 (KernelBench 6_GoogleNetInceptionModule
# 34.8 against 16.8 ms per call), while the parent's clock still bounds the time from below.
EVENTS_RETIME_RATIO = 1.1
EVENTS_RETIMES = 2
EVENTS_RETIME_DEVICES = ("cuda",)  # on the CPU, events and wall both read the same clock
# ...and at most this long by the parent's own single-call figures: a candidate whose events claim
# a hundredth of its real time (red team forged_reply_encoder) was asked for 2,000 calls of a 25 ms
# product, and its timing stage took 119 s on the CPU.
BURST_MAX_MS = 3000.0


@dataclass(frozen=True)
class JudgedPasses:
    """Per-call figures of the passes whose every call comes back (``_judged_passes``), on the
    parent's clock, each round's calibrated empty round trip taken off."""

    fresh_ms: float  # the fastest pass over never-seen values, every call judged
    seen_ms: float  # the median pass over the timing buffers on values just seen, the last call judged
    seen_fastest_ms: float
    calls: int  # per pass, fresh and seen alike
    fresh_overhead_ms: float  # the least empty round trip carrying ``calls`` input sets and outputs
    seen_overhead_ms: float  # ... carrying ``seen_calls`` outputs alone
    seen_calls: int = 0  # calls of the pass on values just seen (``calls`` when 0)

    def fresh_slack_ms(self, floor_ms: float = 0.0) -> float:
        """What the fresh figure may be off by per call: its whole calibrated round trip."""
        return max(floor_ms, (WALL_SLACK_MS + self.fresh_overhead_ms) / self.calls)

    def seen_slack_ms(self, floor_ms: float = 0.0) -> float:
        return max(floor_ms, (WALL_SLACK_MS + self.seen_overhead_ms) / (self.seen_calls or self.calls))

    def floor_ms(self) -> float:
        """A per-call time no candidate that runs every call can go below (JUDGED_RATIO_LIMIT); 0
        for passes too short to say (JUDGED_MIN_CALLS)."""
        if self.calls < JUDGED_MIN_CALLS:
            return 0.0
        error = (WALL_SLACK_MS + JUDGED_REQUEST_MS + JUDGED_CALIBRATION_ERROR * self.fresh_overhead_ms) / self.calls
        return max(0.0, self.fresh_ms - error) / JUDGED_RATIO_LIMIT


def output_bytes(specs: Sequence[dict[str, Any]] | None) -> int:
    """Bytes of one call's outputs, from the reference's output specs (shape, dtype name)."""
    total = 0
    for spec in specs or ():
        itemsize = torch.empty((), dtype=getattr(torch, spec["dtype"])).element_size()
        total += math.prod(spec["shape"]) * itemsize
    return total


def burst_target_ms(device_type: str) -> float:
    """The burst target for a device (the GPU's for any other kind)."""
    return BURST_TARGET_MS.get(device_type, BURST_TARGET_MS["cuda"])


def burst_calls(per_call_ms: float, overhead_ms: float, sets: int, device_type: str) -> int:
    """Enough calls for the burst to dwarf its fixed cost, landing on set 0: the last landing
    before the target while that burst still lasts half of it; otherwise the first landing past
    the target, unless that exceeds BURST_MAX_CALLS or BURST_MAX_MS. Rounding down alone made one
    call of many: KernelBench 96_ConvTranspose3d (11.8 ms a call, 16 input sets) was timed by
    one-call bursts on the H200, a burst's few ms of fixed cost read as 7 ms per call, and the
    honest reference came out 0.64x and flagged side_stream. Rounding up always doubled CPU bursts
    (33 calls where 17 reach the target; the CPU test suite took 24 min 48 s with it, 22 min 40 s
    the run before, with other changes between)."""
    target = max(burst_target_ms(device_type), 10.0 * overhead_ms)
    needed = int(min(BURST_MAX_CALLS, max(3, math.ceil(target / per_call_ms))))
    below = landing_on_set0(needed, sets)
    if below * per_call_ms >= target / 2:
        return below
    above = landing_at_least(needed, sets)
    if above <= BURST_MAX_CALLS and above * per_call_ms <= BURST_MAX_MS:
        return above
    return below


def landing_at_least(calls: int, sets: int) -> int:
    """The fewest calls, at least ``calls``, whose last lands on set 0."""
    return (max(calls, 1) - 1 + sets - 1) // sets * sets + 1 if sets > 1 else max(1, calls)


def landing_on_set0(calls: int, sets: int) -> int:
    """At most ``calls``, one more than a multiple of the number of input sets, so the last call
    lands on set 0 (the set refreshed before timing, whose outputs are judged)."""
    return max(1, (calls - 1) // sets * sets + 1) if sets > 1 else max(1, calls)


def drawn(indices: list[int], count: int) -> list[int]:
    """``count`` of ``indices`` drawn with ``secrets`` (all of them when there are no more)."""
    pool = list(indices)
    return pool if len(pool) <= count else [pool.pop(secrets.randbelow(len(pool))) for _ in range(count)]



def content_cache_findings(fresh: list[float], seen: list[float], clock: str, slack_ms: float) -> list[Finding]:
    """A single call on fresh values far slower than the same call on values just seen."""
    if not fresh or not seen:
        return []
    baseline = max(0.0, max(seen))
    if min(fresh) > FRESH_RATIO_LIMIT * baseline + slack_ms:
        return [Finding(Flag.RESULT_CACHE.value, f"{min(fresh):.4f} ms per call on fresh values against "
                        f"{baseline:.4f} ms on values already seen, by {clock} (a cache keyed by content?)")]
    return []



def hidden_work(event_ms: float, wall_ms: float, enqueue_ms: float) -> bool:
    """The device stayed busy long after the host issued everything, with events seeing little.
    A host-bound candidate (Python overhead) issues for the whole wall time instead."""
    return wall_ms > WALL_RATIO_LIMIT * event_ms + WALL_SLACK_MS and enqueue_ms < 0.5 * wall_ms


def unmeasured(event_ms: float, wall_ms: float) -> bool:
    """The parent's clock reads far above the candidate's own timer: time went unmeasured by it."""
    return wall_ms > WALL_RATIO_LIMIT * event_ms + WALL_SLACK_MS


def events_need_retime(device_type: str, event_ms: float, wall_ms: float) -> bool:
    """Events above the parent's long burst by more than EVENTS_RETIME_RATIO (on a GPU)."""
    return device_type in EVENTS_RETIME_DEVICES and event_ms > EVENTS_RETIME_RATIO * wall_ms + WALL_SLACK_MS


def events_settled(event_ms: float, wall_ms: float) -> bool:
    return event_ms <= EVENTS_RETIME_RATIO * wall_ms + WALL_SLACK_MS


def baseline_confirmed(device_type: str, name: str, event_ms: float, wall_ms: float) -> bool:
    """A baseline's round whose long bursts and events agree within BASELINE_AGREEMENT either way
    needs no other round (a compiled baseline on a GPU only; eager always takes every round)."""
    agree = event_ms / BASELINE_AGREEMENT <= wall_ms <= BASELINE_AGREEMENT * event_ms
    return device_type == "cuda" and name != "eager" and agree


def baselines_to_cache(cached: dict[str, Any], measured: dict[str, float | None], uncached: set[str],
                       idle: bool, bridges: dict[str, SideBySide] | None = None) -> dict[str, Any] | None:
    """The baseline cache entry to write after this evaluation's baselines, or None: only figures
    taken with the device idle (a busy device would inflate every later speedup for this problem),
    never one whose failure may not recur (``uncached``: out of memory, a fault that was not the
    problem's), and eager only where none is cached (it is timed afresh beside every candidate).
    A baseline's bridge to eager (its time over eager's, with the interval) is kept with its time,
    or dropped with it."""
    if not measured or not idle:
        return None
    kept = {name: ms for name, ms in measured.items()
            if (name != "eager" or "eager" not in cached) and name not in uncached}
    entry = {**cached, **kept}
    old_bridges = {name: figures for name, figures in (cached.get("bridges") or {}).items() if name not in kept}
    new_bridges = {name: [b.speedup, b.low, b.high, b.rounds] for name, b in (bridges or {}).items()
                   if name in kept and kept[name] is not None}
    if old_bridges or new_bridges:
        entry["bridges"] = {**old_bridges, **new_bridges}
    return entry


# A fixed device workload this much slower than the best it read on this device means something
# else was running there.
IDLE_PROBE_RATIO = 1.5


def device_busy(probe_ms: float, best_ms: float | None) -> bool:
    """Whether the idle probe's figure says the device is busy, against its best here (none yet: idle)."""
    return best_ms is not None and probe_ms > IDLE_PROBE_RATIO * best_ms


def timing_set_seeds(trial_seeds: Sequence[int], sets: int, revalidation_seeds: Sequence[int]) -> list[int]:
    """The seed whose values each of the candidate's timing buffers holds: the first ones were
    refreshed for revalidation, the others are the trials' sets (the candidate keeps them in
    trial order and clones them round to fill its ``sets`` buffers, timing.rotation_sets)."""
    originals = max(1, min(len(trial_seeds), sets))
    seeds = [trial_seeds[j % originals] for j in range(sets)]
    refreshed = min(len(revalidation_seeds), sets)
    seeds[:refreshed] = list(revalidation_seeds[:refreshed])
    return seeds


def long_burst_calls(interpreted: bool, event_ms: float, overhead_ms: float, sets: int,
                     parent_single_ms: float, device_type: str) -> int:
    """Calls of the long burst: from the events, unless the parent's own single calls say that many
    would run past BURST_MAX_MS (the events understate the calls, or are forged)."""
    calls = 1 if interpreted else burst_calls(max(event_ms, 1e-4), overhead_ms, sets, device_type)
    if parent_single_ms * calls > BURST_MAX_MS:
        calls = landing_on_set0(int(BURST_MAX_MS / parent_single_ms), sets)
    return calls


@dataclass(frozen=True)
class PassPlan:
    """The shape of a set of judged passes (``fresh_pass_plan``)."""

    calls: int  # per fresh pass, each on its own never-seen set
    seen_calls: int  # of the pass on values just seen
    rounds: int  # planned rounds
    least: int  # never fewer
    target_ms: float  # the device's burst target the plan was made for


def fresh_pass_plan(device_type: str, sets: int, per_call_ms: float, set_bytes: int, out_bytes: int) -> PassPlan:
    """How many calls a pass has and how many rounds are planned.

    A pass of a few calls carries the round trip's jitter whole (on the loaded 2-core CPU an honest
    3-call pass read 10.6 and 16.7 ms per call against 0.11 ms in the long burst), so a pass has as
    many calls (each on its own never-seen set) as make the device's burst target, up to FRESH_PASS_CALLS (by
    device), FRESH_PASS_BYTES of inputs and FRESH_TOTAL_BYTES of outputs; the first ``sets`` go
    into the timing buffers.

    The pass on values just seen goes round those buffers as often as the fresh pass has calls:
    with one call per buffer (3 on the CPU) its figure carried the round trip's noise over 3 calls,
    and a skipper hid in it under load. A fresh pass held to a few calls by the size of its inputs
    needs no new values on the seen side: that pass goes round the buffers for as long as
    burst target asks (its outputs kept within CHECKED_OUTPUT_BYTES). On the H200 KernelBench
    51_Argmax's one-call passes (an 8.6 GB input) read 30.4 ms on seen values against 2.76 ms per
    call in the long burst, three times over: one request's fixed cost, whole, over one call.

    A round also moves every call's outputs of both passes: through host memory a 3.2 GB output
    took ~6 s per burst on the H200. Where three rounds would move more than FRESH_TOTAL_BYTES one
    round is taken (a slow round is measured again before it counts, as always)."""
    set_bytes = max(1, set_bytes)
    target = burst_target_ms(device_type)
    calls = int(min(FRESH_PASS_CALLS.get(device_type, 32), max(sets, math.ceil(target / max(per_call_ms, 1e-3)))))
    # Every call's outputs come back in one pack: no more than FRESH_TOTAL_BYTES of them. Bounded
    # by the inputs alone, a pass of KernelBench 7_Matmul_with_small_K_dimension (4 MB of inputs,
    # a 1 GB output, as released by CUDA-L1) asked for 64 calls, 64 GB in one pack: past the
    # device's memory and the sandbox's file-size limit, a harness error on the H200.
    calls = max(1, min(calls, FRESH_PASS_BYTES // set_bytes, FRESH_TOTAL_BYTES // max(1, out_bytes)))
    seen_calls = calls
    if calls < JUDGED_MIN_CALLS:
        out_cap = CHECKED_OUTPUT_BYTES.get(device_type, 64 << 20) // max(1, out_bytes)
        seen_calls = max(calls, min(BURST_MAX_CALLS, out_cap, math.ceil(target / max(per_call_ms, 1e-3))))
    round_bytes = calls * set_bytes + 2 * calls * out_bytes
    rounds = int(min(FRESH_ROUNDS_MAX, math.ceil(target / max(calls * per_call_ms, 1e-3)),
                     FRESH_TOTAL_BYTES // round_bytes))
    least = FRESH_ROUNDS_MIN if FRESH_ROUNDS_MIN * round_bytes <= FRESH_TOTAL_BYTES else 1
    return PassPlan(calls=calls, seen_calls=seen_calls, rounds=max(least, rounds), least=least, target_ms=target)


def rounds_after(plan: PassPlan, fastest_ms: float) -> int:
    """Rounds were planned from the figure being checked (events, the long burst); passes all much
    slower than that (a result cache: 32 calls of 38 ms, not of 0.07 ms, on the CPU) need no more
    rounds than their own length asks for: 12 such rounds, twice, made one red-team evaluation's
    timing stage take 133 s. By the fastest pass so far: load only ever slows a pass, and one slow
    pass must not cut an honest candidate's rounds."""
    return min(plan.rounds, max(plan.least, math.ceil(plan.target_ms / max(plan.calls * fastest_ms, 1e-3))))


# ---- policies that ask for more figures -------------------------------------------------------


class Probe(Protocol):
    """What the policies below may ask for; each answer is a figure on the parent's clock.

    ``long_burst``: per-call ms of ``calls`` back-to-back calls whose last call's outputs are
    judged (None when they are wrong). ``checked_burst``: the same with every call's outputs
    returned and those whose ``judged`` entry is a seed judged. ``judged_passes``: a set of
    passes whose every call comes back (None when any judged call is wrong). ``overhead_ms``:
    the calibrated empty round trip carrying ``outputs_of`` calls' outputs. ``buffer_seeds``: the
    seed whose values each timing buffer holds now (fresh passes write into them)."""

    def long_burst(self, calls: int, event_ms: float) -> float | None: ...

    def checked_burst(self, calls: int, judged: list[int | None], event_ms: float) -> float | None: ...

    def judged_passes(self, sets: int, per_call_ms: float) -> JudgedPasses | None: ...

    def overhead_ms(self, outputs_of: int) -> float: ...

    def buffer_seeds(self) -> list[int]: ...


@dataclass(frozen=True)
class Held:
    """What a policy decided about the candidate's time."""

    ms: float | None = None  # the per-call time to hold it to; None: the figure it was given stands
    wrong: str | None = None  # why outputs were refused (then nothing else counts)
    note: str | None = None  # said in the verdict
    beside_ms: float | None = None  # a long burst measured beside a slow checked one, when that held it


FRESH_OUTPUTS_WRONG = "outputs of calls on fresh values in the timing buffers are wrong"
TIMED_OUTPUTS_WRONG = "outputs of the timed calls are wrong (judged against the refreshed values)"
DRAWN_OUTPUTS_WRONG = "outputs of calls of a timed burst, drawn after it ended, are wrong (calls skipped or results reused?)"


def checked_calls(calls: int, out_bytes: int, device_type: str) -> int:
    """Calls of a burst whose every call's outputs come back: at most ``calls``, no more outputs than
    CHECKED_OUTPUT_BYTES (by device). The last call need not land on set 0: each call is judged
    against the seed its buffer holds (``drawn_calls``). Landing there cut KernelBench's
    8_ResNetBasicBlock (128 MB of output a call, 8 fit, 16 buffers) to one call a burst on the
    H200, against eager's eight beside it: its own code read 0.59x."""
    return max(1, min(calls, CHECKED_OUTPUT_BYTES.get(device_type, 64 << 20) // max(1, out_bytes)))


def drawn_calls(calls: int, sets: int, set_seeds: Sequence[int], draw: secrets.SystemRandom) -> list[int | None]:
    """For a burst of ``calls`` over ``sets`` timing buffers: the seed to judge each call against, for
    CHECKED_JUDGED calls drawn at random and the last; None for the others."""
    chosen = set(draw.sample(range(calls - 1), min(CHECKED_JUDGED, calls - 1))) | {calls - 1}
    return [set_seeds[i % sets] if i in chosen else None for i in range(calls)]


def checked_burst(probe: Probe, calls: int, sets: int, event_ms: float, wall_ms: float, out_bytes: int,
                  device_type: str) -> Held:
    """The long burst again with every call's outputs returned, CHECKED_JUDGED of them drawn at
    random after the reply and judged: the per-call time to hold the candidate to (None when the
    long burst's stands), or why the outputs were refused.

    Run CHECKED_BURSTS times, the fastest kept (on a GPU the first burst that keeps every output
    asks the allocator for new memory; on the 2-core VM one such request of 18 ms read 5 ms
    slow). While the fastest stays above the long burst's time (JUDGED_RATIO_LIMIT plus what it
    can be off by), each further one is paired with a long burst measured right after it: the
    host's speed drifts over seconds (on the H200 one honest host-bound candidate's long bursts
    read 0.128 and its six checked bursts 0.174-0.196 ms per call, while another evaluation of
    it read 0.158 and 0.155), and a checked burst within the limit of the long burst beside it
    shows that drift, not skipped calls. The time is then held to the lesser of that long burst
    and the fastest checked one (on the 2-core VM a long burst right after a checked one read
    0.236 ms per call where the checked one read 0.183), so a candidate that runs every call
    only in the long bursts that follow checked ones gains nothing. With no such pair, the
    fastest checked burst holds the time."""
    calls = checked_calls(calls, out_bytes, device_type)
    if calls < 2:  # one call: the long burst's last, judged already
        return Held()
    set_seeds = list(probe.buffer_seeds())
    draw = secrets.SystemRandom()
    slack = (WALL_SLACK_MS + JUDGED_REQUEST_MS + JUDGED_CALIBRATION_ERROR * probe.overhead_ms(calls)) / calls

    def within(checked_ms: float, long_ms: float) -> bool:
        return checked_ms <= JUDGED_RATIO_LIMIT * long_ms + slack

    figures: list[float] = []
    while len(figures) < CHECKED_BURSTS or (not within(min(figures), wall_ms) and len(figures) < CHECKED_BURSTS_MAX):
        judged = drawn_calls(calls, sets, set_seeds, draw)
        checked = probe.checked_burst(calls, judged, event_ms)
        if checked is None:
            return Held(wrong=DRAWN_OUTPUTS_WRONG)
        figures.append(checked)
        if len(figures) <= CHECKED_BURSTS or within(min(figures), wall_ms):
            continue
        beside = probe.long_burst(calls, event_ms)
        if beside is None:
            return Held(wrong=TIMED_OUTPUTS_WRONG)
        if within(checked, beside):
            held = min(min(figures), beside)  # each a figure of every call run
            return Held(ms=held, beside_ms=beside if held == beside else None,
                        note=f"the burst whose calls were judged at random read {checked:.4f} ms per call against "
                             f"{wall_ms:.4f} in the long burst, and {beside:.4f} in a long burst measured right "
                             f"after it: the host slowed, the time is held to {held:.4f}")
    fastest = min(figures)
    if within(fastest, wall_ms):
        return Held()
    return Held(ms=fastest, note=f"time held to the burst whose calls were judged at random: {fastest:.4f} ms per "
                                 f"call (fastest of {len(figures)}) against {wall_ms:.4f} ms in the long burst")


def passes_caught(found: JudgedPasses, long_ms: float, device_type: str) -> bool:
    """Whether a set of passes shows results reused or calls skipped, against a long burst.

    Reuse, against the long burst: it repeats values as the seen pass does, so reused results make
    it as fast, and a candidate that skips calls where only the last is judged is fast there, never
    in a fresh pass. Not against the seen pass: an honest one on the loaded CPU read 0.005 ms per
    call against 1.37 ms in the long burst. Skipping, against the same burst: the seen pass carries
    no inputs, so its slack is the return of its outputs alone (the fresh passes' slack, the
    hand-over of 32 sets over 32 calls, let a skipper pass at 29x on the CPU). Two evaluations
    sharing a loaded 2-core host delay single passes by milliseconds (an honest candidate was
    flagged that way once): on the CPU only a reuse that saves more than PARENT_SLACK_MS per call
    is taken as one."""
    floor = PARENT_SLACK_MS if device_type != "cuda" else 0.0
    reused = found.fresh_ms > FRESH_RATIO_LIMIT * long_ms + found.fresh_slack_ms(floor)
    skipped = found.seen_fastest_ms > FRESH_RATIO_LIMIT * long_ms + found.seen_slack_ms(floor)
    return reused or skipped


@dataclass(frozen=True)
class PassesJudged:
    passes: JudgedPasses | None  # the set that counts; None when judged outputs were wrong
    caught: bool  # results reused or calls skipped
    note: str | None = None


def judge_passes(probe: Probe, passes: JudgedPasses, sets: int, event_ms: float, wall_ms: float, calls: int,
                 device_type: str) -> PassesJudged:
    """The passes that count and whether they show results reused or calls skipped. A slow set of
    passes is measured again, up to JUDGED_REMEASURES times, before it counts: a burst of load from
    another process (a compiler on the 2-core host) can slow one set; reuse of results slows every
    one. Each set measured again is paired with a long burst (``calls`` calls, as in the first)
    measured right after it, and judged against the slower of the two long bursts: load that set
    in after the first long burst slows the passes and the long burst beside them alike (an honest
    candidate read 8.84 ms per call on new values, 9.04 on repeated ones, against 0.56 in a long
    burst measured before a CI host filled up), while results reused or calls skipped keep any
    long burst fast."""
    if not passes_caught(passes, wall_ms, device_type):
        return PassesJudged(passes, False)
    for _ in range(JUDGED_REMEASURES):
        again = probe.judged_passes(sets, max(event_ms, wall_ms))
        if again is None:
            return PassesJudged(None, True)
        if not passes_caught(again, wall_ms, device_type):
            return PassesJudged(again, False, f"a set of never-seen-value passes was slow ({passes.fresh_ms:.4f} "
                                              f"against {passes.seen_ms:.4f} ms per call); measured again: "
                                              f"{again.fresh_ms:.4f} against {again.seen_ms:.4f}")
        beside = probe.long_burst(calls, event_ms)
        if beside is None:
            return PassesJudged(None, True)
        if not passes_caught(again, max(wall_ms, beside), device_type):
            return PassesJudged(again, False, f"never-seen-value passes read {again.fresh_ms:.4f} ms per call "
                                              f"({again.seen_ms:.4f} on values just seen) against {wall_ms:.4f} in "
                                              f"the long burst, and {beside:.4f} in a long burst measured right "
                                              "after them: the host slowed")
    return PassesJudged(passes, True)


@dataclass(frozen=True)
class Floored:
    passes: JudgedPasses  # the set that counts
    floor_ms: float  # its floor where that stays above the long burst; the long burst's figure otherwise
    wrong: str | None = None
    note: str | None = None


def floored(probe: Probe, passes: JudgedPasses, sets: int, event_ms: float, wall_ms: float) -> Floored:
    """Passes whose floor stands above the long burst (``wall_ms``), measured again up to
    JUDGED_REMEASURES times while it still does; the set with the fastest fresh pass counts (load
    only slows one). Not paired with a long burst as the checked burst is: the floor is already the
    fresh figure over JUDGED_RATIO_LIMIT, at most what such a long burst would read when the pair
    agrees."""
    fastest = passes
    for _ in range(JUDGED_REMEASURES):
        again = probe.judged_passes(sets, max(event_ms, wall_ms))
        if again is None:
            return Floored(passes, wall_ms, FRESH_OUTPUTS_WRONG)
        if again.fresh_ms < fastest.fresh_ms:
            fastest = again
        if fastest.floor_ms() <= wall_ms:
            return Floored(fastest, wall_ms)
    return Floored(fastest, fastest.floor_ms(),
                   note=f"time floored by the passes with every call judged: {fastest.fresh_ms:.4f} ms per call on "
                        f"never-seen values against {wall_ms:.4f} ms in the long burst")


def bounded_by(bound_ms: float, event_ms: float, wall_figures: Sequence[float | None]) -> str:
    """Which figure the candidate's time is: its events, a long burst of the parent's, or a judged one."""
    if bound_ms == event_ms:
        return "events"
    return "wall" if bound_ms in [w for w in wall_figures if w is not None] else "judged"


# ---- candidate and baseline side by side ------------------------------------------------------

# Rounds of one candidate burst and one baseline burst each, in alternating order (A B, B A, ...).
# The host's speed drifts over seconds (on the H200 one process's figure moved up to 1.86x between
# rounds while the ratio of two processes timed alternately stayed at 0.99-1.01,
# h200_process_spread_530e4f9.log), so a speedup is the median of per-round ratios, not the ratio
# of figures taken minutes apart. Seven rounds give a distribution-free interval for the median of
# [least, greatest] ratio at 98.4% coverage (1 - 2 / 2**7); fewer valid rounds than
# PAIRED_ROUNDS_MIN and the side-by-side figure is not used.
PAIRED_ROUNDS = 7
PAIRED_ROUNDS_MIN = 5
PAIRED_COVERAGE = 0.95
# While the interval after PAIRED_ROUNDS is wider than PAIRED_WIDTH_LIMIT (high over low), more
# rounds, up to PAIRED_ROUNDS_MAX: load that comes and goes over seconds moves single rounds'
# ratios far either way, and seven of them put an honest candidate at 1.69x eager once on the
# loaded 2-core machine (red team skip_in_side_by_side_rounds, whose rounds computed every call).
# The median of more rounds moves less; the interval narrows as the order statistics close in.
PAIRED_ROUNDS_MAX = 21
PAIRED_WIDTH_LIMIT = 1.25


def paired_rounds_enough(pairs: Sequence[tuple[float, float]], rounds_run: int) -> bool:
    """Whether the side-by-side rounds so far are enough: PAIRED_ROUNDS at least, then until the
    interval of the valid rounds' ratios is within PAIRED_WIDTH_LIMIT, or PAIRED_ROUNDS_MAX run;
    no further round after PAIRED_ROUNDS that were all void."""
    if rounds_run >= PAIRED_ROUNDS_MAX:
        return True
    if rounds_run < PAIRED_ROUNDS:
        return False
    ratios = paired_ratios(pairs)
    if not ratios:
        return True  # every round void (the device kept busy): more of them would be too
    if len(ratios) < PAIRED_ROUNDS_MIN:
        return False
    _median, low, high = median_interval(ratios)
    return high <= PAIRED_WIDTH_LIMIT * low


def paired_ratios(pairs: Sequence[tuple[float, float]]) -> list[float]:
    """Baseline over candidate for each valid round of (candidate ms, baseline ms) figures."""
    return [base / cand for cand, base in pairs if cand > 0 and base > 0]


def paired_candidate_first(round_index: int) -> bool:
    """The candidate's burst comes first in even rounds, the baseline's in odd ones: drift within a
    round then favours neither side."""
    return round_index % 2 == 0


def median_interval(values: Sequence[float], coverage: float = PAIRED_COVERAGE) -> tuple[float, float, float]:
    """(median, low, high): the order-statistic interval [v_(k), v_(n+1-k)] for the median, with the
    largest k whose coverage 1 - 2 P(Binomial(n, 1/2) <= k - 1) is at least ``coverage``; with too
    few values for that coverage, [least, greatest]."""
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        raise ValueError("no values")
    middle = n // 2
    median = ordered[middle] if n % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    k, below = 1, 0.0  # below: P(Binomial(n, 1/2) <= k - 1)
    while True:
        below_next = below + math.comb(n, k) / 2 ** n  # P(<= k)
        if k + 1 > (n + 1) // 2 or 1 - 2 * below_next < coverage:
            break
        k, below = k + 1, below_next
    return median, ordered[k - 1], ordered[n - k]


def paired_speedup(pairs: Sequence[tuple[float, float]], candidate_hold: float, calls: int = 0) -> SideBySide | None:
    """The speedup from (candidate ms, baseline ms) per-call figures of the same rounds, both the
    parent's clock around long bursts: the median of baseline / candidate, over ``candidate_hold``,
    how far a check of the candidate's calls (a checked burst, judged passes) set its time above its
    long bursts (at least 1): a candidate held to its judged passes gains nothing from bursts that
    skip work, and the same code on both sides reads 1. None with fewer than PAIRED_ROUNDS_MIN
    valid rounds."""
    ratios = paired_ratios(pairs)
    if len(ratios) < PAIRED_ROUNDS_MIN:
        return None
    scale = 1.0 / max(1.0, candidate_hold)
    median, low, high = median_interval(ratios)
    return SideBySide(speedup=median * scale, low=low * scale, high=high * scale, rounds=len(ratios),
                      calls=calls, pairs=tuple((cand, base) for cand, base in pairs))


def hold(bound_ms: float, wall_ms: float | None) -> float:
    """How far a time was set above its own long bursts' figure (1 when it is that figure)."""
    return max(1.0, bound_ms / wall_ms) if wall_ms and wall_ms > 0 else 1.0


def side_by_side_hold(bound_ms: float, wall_ms: float | None, bounded: str, floor_ms: float) -> float:
    """How far the candidate's figures in the side-by-side rounds are held (at least 1): by its
    time where a check of its calls set it (``bounded`` "judged"), and always by the floor of the
    passes whose every call is judged (``floor_ms``, 0 where none was taken). The rounds repeat
    values as the long burst does, so a candidate fast only on values it has met is as fast there;
    the floor is what says otherwise, whatever else set the time. With only the first, a slower
    figure (events, a long burst beside load) that set the time above the floor left the rounds
    unheld. On an H100 with four evaluations in flight the red team's content cache came out ok at
    1.52x eager; alone it was floored to 0.66x and 0.97x (0.155 ms per call on never-seen values,
    0.06 on repeated ones, eager 0.10)."""
    held = hold(bound_ms, wall_ms) if bounded == "judged" else 1.0
    return max(held, hold(floor_ms, wall_ms))


def calls_at_bound(calls: int, sized_ms: float, bound_ms: float, overhead_ms: float, sets: int,
                   device_type: str) -> int:
    """Calls of the candidate's later bursts (the second long burst, the checked burst, the
    side-by-side rounds, where both sides run the same count): the first long burst's, unless the
    parent's clock or a check of the candidate's calls (``bound_ms``: whichever is slowest) put a
    call above the figure that burst was sized by (``sized_ms``, the candidate's own events); then
    no more than the bound needs to reach the burst target. A candidate that understates its events
    (forged, or work they do not see) otherwise has every later burst sized for calls it does not
    make: the red team's forged timing (0.06 ms of events against 3.3 ms by the parent's clock on
    the CPU) ran its long and checked bursts at ~850 calls, 2.8 s each, and its side-by-side rounds
    at 113 calls a side, 13 of its 15 s evaluation, and the skipper held 450x above its bursts did
    the same. The bursts stay at or past half the target, and a speedup is taken over the same
    calls on both sides."""
    if bound_ms <= 0.0 or bound_ms <= sized_ms:
        return calls
    return max(1, min(calls, burst_calls(bound_ms, overhead_ms, sets, device_type)))
