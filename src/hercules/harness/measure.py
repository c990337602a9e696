"""The candidate's time, bounded by the parent's own clock, and every judged call checked.

The stage (``Measurement.run``) asks the candidate's worker for figures and hands them to the
measurement policy (policy.py), which decides what they mean and what to measure next; the stage
implements the policy's ``Probe``. Revalidation happens in the very timing buffers (a cache keyed
by address, shape or content shows there); every judged call after the trials gets the trials'
checks (outputs, input mutation, aliasing, precision)."""

from __future__ import annotations

import contextlib
import os
import secrets
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

from hercules.harness import build as build_mod
from hercules.harness import collector, requests
from hercules.harness.classify import Ending, WorkerEvent
from hercules.harness.datapath import (
    PackBusy,
    PackError,
    PackLayout,
    destination_pack,
    planned_layout,
    seal_pack,
)
from hercules.harness.decide import Finding, MeasureOutcome
from hercules.harness.judge import Judge
from hercules.harness.policy import (
    DRAWN_OUTPUTS_WRONG,
    EVENTS_RETIMES,
    FRESH_OUTPUTS_WRONG,
    LONG_BURSTS,
    PARENT_SLACK_MS,
    TIMED_OUTPUTS_WRONG,
    WALL_SLACK_MS,
    JudgedPasses,
    bounded_by,
    calls_at_bound,
    checked_burst,
    checked_calls,
    content_cache_findings,
    drawn_calls,
    events_need_retime,
    events_settled,
    floored,
    fresh_pass_plan,
    hidden_work,
    judge_passes,
    long_burst_calls,
    output_bytes,
    paired_candidate_first,
    paired_rounds_enough,
    paired_speedup,
    rounds_after,
    side_by_side_hold,
    timing_set_seeds,
    unmeasured,
)
from hercules.harness.protocol import (
    BuffersReply,
    BurstReply,
    Empty,
    PackReply,
    SingleReply,
    StreamsReply,
    TimeReply,
)
from hercules.harness.records import Flag, SideBySide, TimingResult
from hercules.harness.session import Abort, Session, Trials, abort_for, close_fds

if TYPE_CHECKING:
    from hercules.harness.beside import Beside

OVERWRITTEN_FINDING = Finding(
    Flag.OUTPUT_OVERWRITTEN.value, "a call wrote its outputs over the outputs of the call before, which the caller "
    "still held (one kept buffer returned by every call): not a drop-in replacement for the module")


@dataclass(frozen=True)
class Destination:
    """A reply's host pack made by the parent (``Transfers.destination``), or none (both None)."""

    fd: int | None
    layout: PackLayout | None

    def fds(self, others: tuple[int, ...] = ()) -> tuple[int, ...]:
        """A request's descriptors: ``others``, then this destination's (the worker takes the last)."""
        return others if self.fd is None else (*others, self.fd)

    def fields(self) -> dict[str, Any]:
        return {} if self.layout is None else {"into": self.layout.to_message()}


# Requests made again when their destination could not be sealed because it was busy (EBUSY).
SEAL_BUSY_ATTEMPTS = 3


class Transfers:
    """How a burst's outputs travel back and what that costs with no call at all: shared by the
    candidate's measurement and the baselines', so both pay and deduct the same."""

    def __init__(self, session: Session, datapath: str, trials: Trials):
        self.session = session
        self.datapath = datapath
        self.trials = trials
        self.calibration_pack_ms: list[float] = []  # diagnosis (reported beside the candidate's)
        self._calibrated: dict[tuple[int, int], float] = {}

    def overhead_ms(self, outputs_of: int = 1, inputs_of: int = 0, again: bool = False) -> float:
        """What a reply carrying ``outputs_of`` calls' outputs costs with no call at all, measured on
        the trusted side: the round trip and the packing the candidate's bursts also pay; with
        ``inputs_of``, also receiving and placing that many input sets with the request (a fresh
        pass). Measured once per evaluation and shape (best of 3) and used for the candidate and
        every baseline alike: with a 3.2 GB output (KernelBench 11_4D_tensor_matrix_multiplication)
        each calibration took ~7 s on the H200 through host memory, and measuring it again for each
        of four baselines took 88 of the evaluation's 388 s. ``again``: measure it anew (a burst came
        back sooner than this calibration says an empty one takes)."""
        key = (outputs_of, inputs_of)
        seeds = self.trials.seeds
        if again or key not in self._calibrated:
            taken: list[float] = []
            for _ in range(3):
                fds, fields = (), {}
                if inputs_of:
                    # A pack made anew for each round trip, as every fresh pass gets one: the same
                    # pack handed over again maps pages already touched, and on the 2-core VM that
                    # calibration read low enough for an honest candidate's passes to floor its time
                    # (scale_add: 0.47 ms per call on fresh values against 0.054 in the long burst).
                    fd, layout, _per_set = self.inputs_many([seeds[i % len(seeds)] for i in range(inputs_of)])
                    fds, fields = (fd,), {"layout": layout}
                try:
                    with self.destination(outputs_of, "reference") as destination, collector.timed() as clock:
                        raw = self.session.call("reference",
                                                requests.Burst(name="", calls=0, seed=seeds[0], outputs_of=outputs_of,
                                                               **fields, **destination.fields()),
                                                self.session.run_timeout_s, "calibration", destination.fds(fds))
                    taken.append(clock.ms)
                    if raw.get("pack_ms") is not None and outputs_of == 1 and not inputs_of:
                        self.calibration_pack_ms.append(float(raw["pack_ms"]))
                finally:
                    close_fds(fds)
                close_fds(raw.get("_fds") or [])
            self._calibrated[key] = min(taken)
        return self._calibrated[key]

    @contextlib.contextmanager
    def destination(self, outputs_of: int, writer: str) -> Iterator[Destination]:
        """Where a burst's worker writes ``outputs_of`` calls' outputs: a host pack whose pages are
        allocated here, before the clock starts (datapath.destination_pack: on the 2-core VM a
        pack's own page allocation took 27-190 ms for 62 MB, the calls 2 ms). With device packs
        none: the worker that will write one (``writer``: "candidate" or "reference") is asked to
        allocate it now instead (``requests.Reserve``), for the same reason. The parent's
        descriptor is closed on leaving."""
        if not self.trials.specs:
            yield Destination(None, None)
            return
        layout = planned_layout(self.trials.specs, outputs_of)
        if self.datapath != "memfd":
            reserve = requests.Reserve(nbytes=layout.size)
            if writer == "candidate":
                self.session.candidate(Empty, reserve, self.session.run_timeout_s, "reserving a pack")
            else:
                self.session.call(writer, reserve, self.session.run_timeout_s, "reserving a pack")
            yield Destination(None, None)
            return
        fd = destination_pack(layout)
        try:
            yield Destination(fd, layout)
        finally:
            close_fds([fd])

    def handed_back(self, reply: PackReply, fds: list[int], destination: Destination,
                    what: str, last: bool = True) -> tuple[PackReply, list[int]]:
        """The pack a candidate's reply hands in: the destination, sealed now, where the candidate
        wrote into it (a descriptor of its own returned, for the comparison to close); else the
        candidate's own. A destination that cannot be sealed (a writable mapping kept, its own
        seals) is refused; one that is only busy (EBUSY) raises PackBusy unless ``last``, for the
        caller to make the request again (``candidate_into``)."""
        if not reply.into:
            return reply, fds
        close_fds(fds)
        if destination.fd is None:
            raise abort_for(WorkerEvent("candidate", "", Ending.UNREADABLE),
                            f"{what}: a reply names a destination it was not given")
        try:
            seal_pack(destination.fd)
        except PackError as exc:
            if isinstance(exc, PackBusy) and not last:
                raise
            self.session.workers["candidate"].kill()
            raise abort_for(WorkerEvent("candidate", "", Ending.UNREADABLE), f"{what}: {exc}") from None
        return replace(reply, layout=destination.layout.to_message()), [os.dup(destination.fd)]

    def candidate_into(self, outputs_of: int, request: Callable[[Destination], requests.Request],
                       timeout: float, what: str, extra_fds: tuple[int, ...] = ()
                       ) -> tuple[float, BurstReply, list[int]]:
        """A candidate's burst writing into a destination of ``outputs_of`` calls, timed on the
        parent's clock: (ms, the reply, its pack's descriptors). A destination that could not be
        sealed because it was busy is thrown away with its figure and the request made again, up
        to SEAL_BUSY_ATTEMPTS times: pages still pinned right after an honest write (the kernel's
        ~150 ms wait for transient references ran out beside two busy loops on the 2-core machine,
        and an honest guarded fallback came out runtime_error). A writable mapping kept on purpose
        is refused at every attempt; no attempt's outputs or time outlive its refusal."""
        for attempt in range(SEAL_BUSY_ATTEMPTS):
            with self.destination(outputs_of, "candidate") as destination:
                with collector.timed() as clock:
                    reply, fds = self.session.candidate(BurstReply, request(destination), timeout, what,
                                                        destination.fds(extra_fds))
                try:
                    reply, fds = self.handed_back(reply, fds, destination, what,
                                                  last=attempt == SEAL_BUSY_ATTEMPTS - 1)
                except PackBusy:
                    continue
            return clock.ms, reply, fds
        raise AssertionError("unreachable: the last attempt raises or returns")

    def inputs_many(self, seeds: list[int]) -> tuple[int, dict[str, Any], int]:
        raw = self.session.call("reference", requests.InputsMany(seeds=seeds), self.session.run_timeout_s,
                                "input factory")
        return raw["_fds"][0], raw["layout"], int(raw["per_set"])

    def inputs(self, seed: int) -> tuple[int, dict[str, Any]]:
        raw = self.session.call("reference", requests.Inputs(seed=seed), self.session.run_timeout_s, "input factory")
        return raw["_fds"][0], raw["layout"]


def detect_interpreted(code: str) -> bool:
    """Triton's CPU interpreter runs a kernel in seconds: such a candidate is timed minimally."""
    return build_mod.detect_language(code) == "triton"


def revalidation_failed(findings: list[Finding], message: str) -> MeasureOutcome:
    """The candidate's outputs were wrong in its own timing buffers: no time, a result_cache flag."""
    findings.append(Finding(Flag.RESULT_CACHE.value, message))
    return MeasureOutcome(timing=None, findings=tuple(findings), revalidated=False, revalidation_error=message)


@dataclass(frozen=True)
class MeasureSettings:
    timing_budget_s: float
    warmup_s: float
    revalidation_sets: int
    interpreted: bool  # a Triton candidate under the CPU interpreter: timed minimally


class Measurement:
    """The measure stage. Its state (which seed each timing buffer holds, the findings of the
    judged calls, the fresh-pass sizes already warmed) lives as long as the stage; ``run`` returns
    everything the later stages use."""

    def __init__(self, session: Session, judge: Judge, transfers: Transfers, trials: Trials,
                 device: torch.device, settings: MeasureSettings, notes: list[str], beside: Beside | None = None):
        self.session = session
        self.judge = judge
        self.transfers = transfers
        self.trials = trials
        self.deadlines = trials.deadlines
        self.device = device
        self.settings = settings
        self.notes = notes  # the evaluation's notes, said in the verdict
        self.beside = beside  # a baseline to time in the same rounds as the candidate
        self.findings: list[Finding] = []  # of the judged calls after the trials
        self._buffer_seeds: list[int] = []
        self._warmed_fresh_calls: set[int] = set()
        self._sets = 1
        self.candidate_pack_ms: list[float] = []
        # The candidate's own figures of its last burst; diagnosis only, said beside the
        # baseline's in the side-by-side note.
        self.last_report = OwnReport(0.0)

    # ---- the policy's probe --------------------------------------------------------------
    def buffer_seeds(self) -> list[int]:
        return list(self._buffer_seeds)

    def overhead_ms(self, outputs_of: int) -> float:
        return self.transfers.overhead_ms(outputs_of)

    def long_burst(self, calls: int, event_ms: float) -> float | None:
        wall, _enqueue, _lines = self._burst_wall(calls, self._landing_seed(calls), event_ms)
        return wall

    def checked_burst(self, calls: int, judged: list[int | None], event_ms: float) -> float | None:
        return self._burst_wall(calls, judged[-1], event_ms, judged=judged)[0]

    def judged_passes(self, sets: int, per_call_ms: float) -> JudgedPasses | None:
        return self._judged_passes(sets, per_call_ms)

    def _landing_seed(self, calls: int) -> int:
        """The seed of the buffer the last of ``calls`` calls lands on (a burst starts on buffer 0)."""
        return self._buffer_seeds[(calls - 1) % len(self._buffer_seeds)]

    # ---- the stage -----------------------------------------------------------------------
    def run(self) -> MeasureOutcome:
        settings = self.settings
        findings: list[Finding] = []
        in_process, overwrote = self._in_process_timing(min_reps=1 if settings.interpreted else 5)
        if overwrote:
            findings.append(OVERWRITTEN_FINDING)
        sets = self._sets = max(1, in_process.input_sets)

        # Revalidation: fresh values written into the timing buffers, one call each, judged; then the
        # same call again (seen values) for the content-cache check.
        executed: set[int] = set()
        revalidation_seeds = []
        fresh_walls, seen_walls, fresh_events, seen_events = [], [], [], []
        overhead_ms = self.transfers.overhead_ms()
        call_s = self.deadlines.call_s()
        for index in range(min(settings.revalidation_sets, sets) or 1):
            # A call on the old values first: the request path's one-time costs (the first pack,
            # the first poisoning) must not make the fresh call look slow.
            _, warm_fds = self.session.candidate(SingleReply, requests.Single(index=index, specs=self.trials.specs),
                                                 call_s, "revalidation")
            close_fds(warm_fds)
            seed = secrets.randbits(63)
            revalidation_seeds.append(seed)
            fd, layout = self.transfers.inputs(seed)
            try:
                self.session.candidate(Empty, requests.Refresh(index=index, layout=layout), call_s, "revalidation",
                                       (fd,))
            finally:
                close_fds([fd])
            for pass_ in ("fresh", "seen"):
                with collector.timed() as clock:
                    single, out_fds = self.session.candidate(SingleReply,
                                                             requests.Single(index=index, specs=self.trials.specs),
                                                             call_s, "revalidation")
                wall = clock.ms - overhead_ms
                result = self._judged(seed, single, out_fds, "revalidation")
                if not result.correct:
                    message = (f"outputs wrong after inputs were refreshed in place ({pass_} call): "
                               + "; ".join(result.problems[:2]))
                    findings.append(Finding(Flag.RESULT_CACHE.value, message))
                    return MeasureOutcome(timing=None, findings=tuple(findings), revalidated=False,
                                          revalidation_error=message, timing_sets=sets)
                (fresh_walls if pass_ == "fresh" else seen_walls).append(wall)
                if single.event_ms is not None:
                    (fresh_events if pass_ == "fresh" else seen_events).append(single.event_ms)
        # The parent's figures carry a round trip each. On a GPU host that is ~0.1 ms, hence the
        # wider slack; on a loaded 2-core CPU single round trips measured 1-27 ms for one and the
        # same call, so there the parent's single-call figures say nothing and are not used.
        if self.device.type == "cuda":
            findings.extend(content_cache_findings(fresh_walls, seen_walls, "the parent's clock", PARENT_SLACK_MS))
        findings.extend(content_cache_findings(fresh_events, seen_events, "the candidate's events", WALL_SLACK_MS))

        # The parent's own clock: back-to-back calls whose last outputs arrive in the reply (so the
        # reply cannot come before the work), the calibrated round trip taken off. The last call
        # lands on timing set 0, refreshed above, so its outputs are judged against fresh values.
        event_ms = in_process.median_ms
        parent_single_ms = min((w for w in fresh_walls + seen_walls if w > 0), default=0.0)
        calls = long_burst_calls(settings.interpreted, event_ms, overhead_ms, sets, parent_single_ms,
                                 self.device.type)
        wall_ms = enqueue_ms = None
        self._buffer_seeds = timing_set_seeds(self.trials.seeds, sets, revalidation_seeds)
        for _ in range(LONG_BURSTS):  # load only ever slows a burst: the faster counts
            figure, enqueue, lines = self._burst_wall(calls, revalidation_seeds[0], event_ms)
            executed.update(lines)
            if figure is None:
                return self._failed(findings, TIMED_OUTPUTS_WRONG, sets)
            if wall_ms is None or figure < wall_ms:
                wall_ms, enqueue_ms = figure, enqueue
            # The parent's clock now says what a call takes: the bursts after this one are sized by it.
            calls = calls_at_bound(calls, event_ms, figure, overhead_ms, sets, self.device.type)
        findings.extend(self._inputs_changed("after the long bursts"))
        if events_need_retime(self.device.type, event_ms, wall_ms):
            in_process, event_ms = self._retimed(in_process, wall_ms)
        bound_ms = max(event_ms, wall_ms)
        beside_ms = None
        passes = None
        floor_ms = 0.0
        if not settings.interpreted:
            held = checked_burst(self, calls, sets, event_ms, wall_ms, output_bytes(self.trials.specs),
                                 self.device.type)
            if held.wrong:
                return self._failed(findings, held.wrong, sets)
            self._say(held.note)
            beside_ms = held.beside_ms
            if held.ms is not None and held.ms > bound_ms:
                bound_ms = held.ms
            # The same calls on values never seen before, every call judged. A cache keyed by
            # content (or any result reuse across calls) makes the repeated-value burst above fast
            # and these slow; honest code runs both alike.
            passes = self._judged_passes(sets, max(event_ms, wall_ms))
            if passes is None:
                return self._failed(findings, FRESH_OUTPUTS_WRONG, sets)
            if wall_ms <= 0.0:
                # The long burst took no longer than an empty one, measured twice: no figure at all.
                # The pass whose every call was judged bounds the time instead (a candidate that
                # loads the host to hide a skipped burst gains nothing).
                self.notes.append("the long burst was no longer than the calibrated round trip (a loaded host?): "
                                  "the pass with every call judged bounds the time")
                wall_ms = passes.seen_ms
                bound_ms = max(bound_ms, wall_ms)  # the checked burst's hold, if any, stands
            judged = judge_passes(self, passes, sets, event_ms, wall_ms, calls, self.device.type)
            self._say(judged.note)
            passes = judged.passes
            if passes is None:
                return self._failed(findings, FRESH_OUTPUTS_WRONG, sets)
            if judged.caught:
                findings.append(Finding(Flag.RESULT_CACHE.value,
                                        f"{passes.fresh_ms:.4f} ms per call on never-seen values and "
                                        f"{passes.seen_fastest_ms:.4f} ms on the same values repeated, every call "
                                        f"judged, against {wall_ms:.4f} ms in the long burst, by the parent's clock "
                                        "(results reused, or calls skipped, across calls?)"))
                bound_ms = max(bound_ms, passes.fresh_ms, passes.seen_fastest_ms)
            elif passes.floor_ms() > wall_ms:
                # Against the long burst, not the time so far: a slower figure that set the time
                # (events, a checked burst beside load) says nothing of values never seen, and the
                # side-by-side rounds repeat values as the long burst does.
                floor = floored(self, passes, sets, event_ms, wall_ms)
                if floor.wrong:
                    return self._failed(findings, floor.wrong, sets)
                self._say(floor.note)
                passes, floor_ms = floor.passes, floor.floor_ms
                bound_ms = max(bound_ms, floor_ms)
        timing = replace(in_process, wall_ms=wall_ms, event_median_ms=event_ms, median_ms=bound_ms,
                         bounded_by=bounded_by(bound_ms, event_ms, (wall_ms, beside_ms)),
                         judged_ms=passes.fresh_ms if passes else None, seen_ms=passes.seen_ms if passes else None,
                         interpreted=settings.interpreted)
        self._packing_note()
        side_by_side = {}
        if self.beside is not None and not settings.interpreted:
            # Held where a check of the candidate's calls set its time above its bursts (a checked
            # burst, judged passes), and by the judged passes' floor always (policy.side_by_side_hold):
            # events above the bursts, taken seconds apart, are drift.
            held = side_by_side_hold(bound_ms, wall_ms, timing.bounded_by, floor_ms)
            paired, wrong = self._side_by_side(
                calls_at_bound(calls, event_ms, bound_ms, overhead_ms, sets, self.device.type), event_ms, held)
            if wrong:
                return self._failed(findings, wrong, sets)
            if paired is not None:
                side_by_side[self.beside.name] = paired
        # The stream check profiles the candidate's process, so it comes after every burst timed
        # there: Kineto leaves CUPTI attached once a profile ends (no cuptiFinalize unless
        # TEARDOWN_CUPTI=1; pytorch#144455 reports 10-20% slower work after profiling), and with
        # the check before the side-by-side rounds the red team's honest matmul, the same code as
        # the reference, issued 0.0893 ms a call in its rounds against eager's 0.0714 (H100; 0.168
        # against 0.137 on the H200) and read 0.81x eager.
        if self.device.type == "cuda":
            findings.extend(self._stream_findings(event_ms, wall_ms, enqueue_ms))
        findings.extend(self.findings)
        if self.session.alive("reference"):
            findings.extend(self._inputs_changed("after the passes with every call judged"))
        else:  # it ended timing the baseline beside the candidate (the problem's size), not by the candidate
            self.notes.append("inputs after the side-by-side rounds not checked: the reference worker ended "
                              "while the baseline was timed")
        return MeasureOutcome(timing=timing, findings=tuple(unique(findings)), executed_lines=frozenset(executed),
                              timing_sets=sets, side_by_side=side_by_side)

    def _side_by_side(self, calls: int, event_ms: float, candidate_hold: float) -> tuple[SideBySide | None, str | None]:
        """The candidate's burst and the baseline's in the same rounds, in alternating order
        (policy.PAIRED_ROUNDS, more while the interval is wide: policy.paired_rounds_enough): the
        speedup from the per-round ratios, or None with a note saying why; or why the candidate's
        outputs were refused.

        Both sides' bursts hand every call's outputs back, and CHECKED_JUDGED of the candidate's,
        drawn after each reply, are judged: a candidate that tells these rounds from the checks
        before them (by the order of requests) cannot skip work in them (red team
        skip_in_side_by_side_rounds), and the baseline pays the same hand-over."""
        beside = self.beside
        out_bytes = output_bytes(self.trials.specs)
        calls = checked_calls(calls, out_bytes, self.device.type)
        try:
            why = beside.ready(self._sets, calls)
        except Abort as abort:  # the baseline's own failure (out of memory, ...): a note, never the candidate's
            why = f"{beside.name} failed ({abort.failure.cause.value}): {abort.failure.error[:200]}"
        if why is None:
            draw = secrets.SystemRandom()
            pairs = []
            reports: list[OwnReport] = []
            index = 0
            while not paired_rounds_enough(pairs, index):
                figures: dict[str, float | None] = {}
                for side in (("candidate", "baseline") if paired_candidate_first(index) else ("baseline", "candidate")):
                    if side == "candidate":
                        judged = drawn_calls(calls, self._sets, self._buffer_seeds, draw)
                        self._warm()
                        figures[side] = self.checked_burst(calls, judged, event_ms)
                        if figures[side] is None:
                            return None, DRAWN_OUTPUTS_WRONG
                        reports.append(self.last_report)
                    else:
                        try:
                            figures[side] = beside.burst()
                        except Abort as abort:
                            self.notes.append(f"speedup against {beside.name} not timed side by side: "
                                              f"{beside.name} failed ({abort.failure.cause.value}): "
                                              f"{abort.failure.error[:200]}")
                            return None, None
                if figures["baseline"] is not None:
                    pairs.append((figures["candidate"], figures["baseline"]))
                index += 1
            found = paired_speedup(pairs, candidate_hold, calls)
            if found is not None:
                rounds = ", ".join(f"{cand:.4g}/{base:.4g}" for cand, base in found.pairs)
                self.notes.append(f"speedup against {beside.name} from {found.rounds} rounds timed side by side "
                                  f"(the candidate stopped while {beside.name} ran): {found.speedup:.3f}x, 95% "
                                  f"interval [{found.low:.3f}, {found.high:.3f}]; ms per call, candidate/"
                                  f"{beside.name}, {calls} calls a burst: {rounds}"
                                  + reports_said(reports, beside.reports))
                return found, None
            why = f"{beside.void_rounds} of {index} rounds void (the candidate not stopped, or the device busy)"
        self.notes.append(f"speedup against {beside.name} not timed side by side: {why}")
        return None, None

    def _warm(self) -> None:
        """One untimed call of the candidate right before its burst in a side-by-side round, on a
        GPU, as the baseline gets one before its own (``Beside.warm``)."""
        if self.device.type != "cuda":
            return
        _, fds = self.session.candidate(SingleReply, requests.Single(index=0, specs=self.trials.specs),
                                        self.deadlines.call_s(), "side-by-side round")
        close_fds(fds)

    def _failed(self, findings: list[Finding], message: str, sets: int) -> MeasureOutcome:
        return replace(revalidation_failed(findings, message), timing_sets=sets)

    def _say(self, note: str | None) -> None:
        if note:
            self.notes.append(note)

    def _packing_note(self) -> None:
        packing = {"candidate": self.candidate_pack_ms, "calibration": self.transfers.calibration_pack_ms}
        packing = {k: statistics.median(v) for k, v in packing.items() if v}
        if self.device.type == "cuda" and len(packing) == 2 and packing["candidate"] > packing["calibration"] + 1.0:
            # On the H200 the long burst read 10-18% above the events on some KernelBench problems
            # with device packs (51_Argmax 1.137) and 1.03 with host files: a fixed few ms per burst
            # inside the candidate's process. Its own report of packing, beside the calibration's
            # (1.5-2.1 ms against 1.0-1.9 ms on five KernelBench problems: not the cause there).
            self.notes.append(f"packing a long burst's outputs: {packing['candidate']:.2f} ms in the candidate's "
                              f"process (its report), {packing['calibration']:.2f} ms in the calibration")

    def _judged(self, seed: int | None, reply: PackReply, fds: list[int], what: str,
                seeds: list[int | None] | None = None):
        """A judged call after the trials: its outputs compared, its precision checked."""
        judged = self.judge.compare(seed, reply, fds, what, seeds=seeds, later=True)
        if judged.precision is not None:
            self.findings.append(judged.precision)
        return judged.result

    def _inputs_changed(self, when: str) -> list[Finding]:
        """Input mutation on every call, not only the trials': the candidate's timing buffers,
        which its bursts went round many times (an input object coming round again), checked
        exactly against the values the parent knows each holds (``buffer_seeds``). Untimed."""
        reply, fds = self.session.candidate(BuffersReply, requests.Buffers(), self.deadlines.call_s(), f"inputs {when}")
        try:
            raw = self.session.call("reference",
                                    requests.InputsIntact(seeds=list(self._buffer_seeds), layout=reply.layout),
                                    self.session.run_timeout_s, f"inputs {when}", tuple(fds))
        finally:
            close_fds(fds)
        found = []
        if reply.aliases:
            found.append(Finding(Flag.OUTPUT_ALIASES_INPUT.value, f"an output of a call {when} shares memory with "
                                 "an input of that call"))
        if raw.get("intact") is not True:
            found.append(Finding(Flag.INPUT_MUTATED.value,
                                 f"inputs changed by the calls {when}: {str(raw.get('where'))[:80]}"))
        return found

    def _in_process_timing(self, min_reps: int, keep_sets: bool = False) -> tuple[TimingResult, bool]:
        """The candidate's own timing of its calls (events on a GPU): figures it could forge, which
        the parent bounds by its own clock before using them; and whether a call after it wrote
        over the outputs of the one before while they were still held."""
        settings = self.settings
        timed, _ = self.session.candidate(TimeReply,
                                          requests.Time(budget_s=settings.timing_budget_s, warmup_s=settings.warmup_s,
                                                        min_reps=min_reps, keep_sets=keep_sets),
                                          self.deadlines.call_s(12) + 4 * (settings.timing_budget_s + settings.warmup_s),
                                          "timing")
        return TimingResult(**timed.timing), timed.overwrote

    def _retimed(self, in_process: TimingResult, wall_ms: float) -> tuple[TimingResult, float]:
        """The in-process timing again while its events read above the parent's long burst by more
        than EVENTS_RETIME_RATIO (EVENTS_RETIMES times at most), the lowest median kept. Safe
        against forged events: the time stays bounded below by the parent's clock, and lower
        events only make the unmeasured-work check stricter."""
        first = in_process.median_ms
        for _ in range(EVENTS_RETIMES):
            again, _ = self._in_process_timing(min_reps=5, keep_sets=True)  # the buffers as revalidation left them
            if again.median_ms < in_process.median_ms:
                in_process = again
            if events_settled(in_process.median_ms, wall_ms):
                break
        self.notes.append(f"events timed again: {first:.4f} ms per call read above the parent's long burst "
                          f"({wall_ms:.4f}); kept {in_process.median_ms:.4f}")
        return in_process, in_process.median_ms

    def _burst_wall(self, calls: int, seed: int, event_ms: float,
                    judged: list[int | None] | None = None) -> tuple[float | None, float, tuple[int, ...]]:
        """(wall per call, enqueue per call, executed lines); wall None when the outputs are wrong,
        0.0 when the burst took no longer than the calibrated round trip, even measured again.
        With ``judged`` (a seed or None per call) every call's outputs come back and are judged
        where a seed is given; otherwise the last call's, against ``seed``."""
        timeout = self.deadlines.call_s(calls, per_call_s=event_ms / 1e3)
        outputs_of = calls if judged is not None else 1
        overhead_ms = self.transfers.overhead_ms(outputs_of)
        for attempt in range(2):
            total_ms, burst, fds = self.transfers.candidate_into(
                outputs_of, lambda destination: requests.Burst(calls=calls, every_call=judged is not None,
                                                               **destination.fields()),
                timeout, "wall clock check")
            self.last_report = OwnReport(burst.enqueue_ms, burst.pack_ms, burst.device_ms)
            if burst.pack_ms is not None and judged is None:
                self.candidate_pack_ms.append(burst.pack_ms)
            result = self._judged(seed, burst, fds, "timed outputs", seeds=judged)  # ``seeds`` wins
            if not result.correct:
                return None, burst.enqueue_ms, burst.executed_lines
            if total_ms > overhead_ms or attempt:
                break
            # No burst can be quicker than an empty one with the same reply (its last call has to
            # run): the calibration was taken under load (on the loaded 2-core CPU an honest 18 ms
            # call once measured 0 this way). Both are measured again.
            overhead_ms = self.transfers.overhead_ms(outputs_of, again=True)
        return max(0.0, total_ms - overhead_ms) / calls, burst.enqueue_ms, burst.executed_lines

    def _judged_passes(self, sets: int, per_call_ms: float) -> JudgedPasses | None:
        """Passes whose every call comes back, timed by the parent: over never-seen values (every
        call judged), each followed by one over the timing buffers on the values just seen. None
        when any judged call's outputs are wrong. ``sets``: the candidate's timing buffers.

        The fastest fresh pass counts, not the median: load only ever slows a pass, and reuse of
        results (or calls skipped elsewhere) slows every one. On the loaded 2-core CPU the median
        of an honest tiny problem's passes once read 16 ms per call against 0.02 ms in the long
        burst."""
        out_bytes = output_bytes(self.trials.specs)
        plan = fresh_pass_plan(self.device.type, sets, per_call_ms, self.session.sizes.input_bytes or 1, out_bytes)
        calls, seen_calls = plan.calls, plan.seen_calls
        rounds = plan.rounds
        totals: list[float] = []
        repeats: list[float] = []
        fresh_overhead_ms = self.transfers.overhead_ms(outputs_of=calls, inputs_of=calls)
        if self.device.type == "cuda" and calls not in self._warmed_fresh_calls:
            self._warm_fresh_pass(calls, per_call_ms)
        while len(totals) < rounds:
            # The values travel with the timed request and every call's outputs come back judged:
            # nothing can be computed ahead of the clock (while values are written in, untimed)
            # and no call can be skipped (only the last call of a burst used to be judged).
            seeds = [secrets.randbits(63) for _ in range(calls)]
            total_ms, burst, fds = self._fresh_pass(seeds, per_call_ms, "fresh timing values")
            if not self._judged(None, burst, fds, "timed outputs", seeds=list(seeds)).correct:
                return None
            if total_ms <= fresh_overhead_ms:  # quicker than no call at all: calibrated under load
                fresh_overhead_ms = self.transfers.overhead_ms(outputs_of=calls, inputs_of=calls, again=True)
            totals.append(total_ms)
            rounds = rounds_after(plan, max(0.0, min(totals) - fresh_overhead_ms) / calls)
            # The same buffers again, now on values just seen: the like-for-like comparison, so only
            # reuse of results makes the two differ. Its last call is judged (the buffer it lands
            # on: a burst starts on buffer 0, and the fresh pass just wrote its first sets there).
            last = self._landing_seed(seen_calls)
            seen, _enqueue, _lines = self._burst_wall(seen_calls, last, per_call_ms,
                                                      judged=[None] * (seen_calls - 1) + [last])
            if seen is None:
                return None
            repeats.append(seen)
        return JudgedPasses(fresh_ms=max(0.0, min(totals) - fresh_overhead_ms) / calls,
                            seen_ms=statistics.median(repeats), seen_fastest_ms=min(repeats), calls=calls,
                            fresh_overhead_ms=fresh_overhead_ms,
                            seen_overhead_ms=self.transfers.overhead_ms(seen_calls), seen_calls=seen_calls)

    def _warm_fresh_pass(self, calls: int, per_call_ms: float) -> None:
        """One untimed pass of ``calls`` never-seen sets, its outputs not judged: the candidate's
        process then holds the device memory a pass places its sets and outputs in, as the trusted
        calibration of the pass (the least of three) does. On the H200 one cold pass of 227 calls
        read 0.283 ms per call against 0.214 warm (allocations of 2 MB segments), and an honest
        candidate's time was floored by it from 0.16 to 0.22 ms per call (only one round of a pass
        fits FRESH_TOTAL_BYTES there)."""
        self._warmed_fresh_calls.add(calls)
        _ms, _burst, fds = self._fresh_pass([secrets.randbits(63) for _ in range(calls)], per_call_ms,
                                            "fresh timing values (warm-up)")
        close_fds(fds)

    def _fresh_pass(self, seeds: list[int], per_call_ms: float, what: str) -> tuple[float, PackReply, list[int]]:
        """One call on each of the sets of ``seeds`` (made before the clock, handed over with the
        request), every call's outputs back: (ms on the parent's clock, the reply, its pack's
        descriptors, for the caller to close)."""
        fd, layout, per_set = self.transfers.inputs_many(seeds)
        try:
            ms, burst, fds = self.transfers.candidate_into(
                len(seeds), lambda destination: requests.FreshBurst(layout=layout, per_set=per_set,
                                                                    **destination.fields()),
                self.deadlines.call_s(len(seeds), per_call_ms / 1e3), what, (fd,))
        finally:
            close_fds([fd])
        in_buffers = min(len(seeds), len(self._buffer_seeds))  # its first sets went into the timing buffers
        self._buffer_seeds[:in_buffers] = seeds[:in_buffers]
        return ms, burst, fds

    def _stream_findings(self, event_ms: float, wall_ms: float, enqueue_ms: float) -> list[Finding]:
        streams = self._streams()
        if unmeasured(event_ms, wall_ms) and (hidden_work(event_ms, wall_ms, enqueue_ms) or streams):
            return [Finding(Flag.SIDE_STREAM.value,
                            f"timed {event_ms:.4f} ms per call in the candidate's process, but {wall_ms:.4f} ms "
                            "per call on the parent's clock"
                            + (f"; kernels on other streams: {', '.join(streams[:3])}" if streams else ""))]
        if streams:
            self.notes.append("kernels on library-internal or side streams, all inside the timed interval: "
                              + ", ".join(streams[:3]))
        return []

    def _streams(self) -> list[str]:
        try:
            reply, _ = self.session.candidate(StreamsReply, requests.Streams(), self.deadlines.call_s(2) + 30.0,
                                              "stream check")
        except Abort as abort:
            self.notes.append(f"stream check unavailable: {abort.failure.error[:200]}")
            return []
        return list(reply.names or reply.other)


class OwnReport(NamedTuple):
    """A worker's own figures of one burst of a side-by-side round (diagnosis only)."""

    issue_ms: float  # the host's time to issue one call
    pack_ms: float | None = None  # packing the burst's outputs
    device_ms: float | None = None  # one call on the device, by events around the burst's calls


def reports_said(candidate: list[OwnReport], baseline: list[OwnReport]) -> str:
    """The two sides' own reports over a side-by-side round's bursts, medians: the host's issue
    time per call, the device's time per call, and the packing of a burst's outputs. Diagnosis
    for a round whose ratio moves off 1 with the same code on both sides (on the H200 the red
    team's honest control read 0.64-0.76x of its reference; tanh_mul's 0.86-0.91x with events
    that agree): a slower issue says the candidate's process ran its host code slower; slower
    calls on the device, that its kernels ran slower there; a slower packing, that the hand-over
    differs; none of them, that the difference is outside both processes' work. The candidate's
    figures are its own word and decide nothing."""
    def median(values: list[float | None]) -> float | None:
        values = [v for v in values if v]
        return statistics.median(values) if values else None

    def said(reports: list[OwnReport], field: str) -> str:
        value = median([getattr(r, field) for r in reports])
        return "-" if value is None else f"{value:.4g}"

    both = {f: median([getattr(r, f) for r in candidate + baseline]) for f in OwnReport._fields}
    if not any(both.values()):
        return ""
    device = (f", on the device {said(candidate, 'device_ms')}/{said(baseline, 'device_ms')} ms a call"
              if both["device_ms"] else "")  # none off CUDA
    return (f"; each side's own report, candidate/baseline medians: issue {said(candidate, 'issue_ms')}/"
            f"{said(baseline, 'issue_ms')} ms a call{device}, packing {said(candidate, 'pack_ms')}/"
            f"{said(baseline, 'pack_ms')} ms a burst")


def unique(findings: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in findings:
        if (f.flag, f.note) not in seen:
            seen.add((f.flag, f.note))
            out.append(f)
    return out
