"""A trusted baseline timed beside the candidate, in the same rounds (policy.PAIRED_ROUNDS).

While the baseline's burst runs, every process of the candidate is stopped (``Sandbox.pause``): it
takes no host time, so load it left running cannot slow the baseline, the guarantee that timing
baselines only after the candidate has ended gave. On a GPU, work the candidate queued before it
was stopped still runs; a fixed device workload (the idle probe) runs first, drains it and says
whether the device is still busy, and a round whose probe reads busy is void."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from hercules.harness import collector, requests
from hercules.harness.ipc import Worker
from hercules.harness.measure import OwnReport, Transfers
from hercules.harness.policy import PAIRED_ROUNDS, device_busy, paired_candidate_first, paired_speedup
from hercules.harness.records import SideBySide
from hercules.harness.session import Abort, Session, Trials, close_fds

PROBES_PER_ROUND = 3  # idle probes before a round is void (each also drains the device)


@dataclass
class Beside:
    """Eager, timed beside the candidate; ``walls`` the per-call figures of its bursts so far."""

    session: Session
    transfers: Transfers
    trials: Trials
    device: torch.device
    timing_budget_s: float
    warmup_s: float
    name: str = "eager"
    event_ms: float | None = None
    walls: list[float] = field(default_factory=list)
    reports: list[OwnReport] = field(default_factory=list)  # its own figures of each burst
    void_rounds: int = 0
    best_probe_ms: float | None = None  # the idle probe's best on this device (the cache's)
    _calls: int = 1

    def ready(self, sets: int, calls: int) -> str | None:
        """Prepare the baseline over the first ``sets`` trial sets (as many as the candidate's timing
        buffers, as every baseline is) and take its in-process timing, the candidate stopped
        meanwhile; None when ready, else why it cannot be timed beside the candidate. Its bursts
        make ``calls`` calls, as many as the candidate's in the same round, and hand every call's
        outputs back as the candidate's do: each side pays the same fixed costs per burst (the
        first call's launch with nothing queued, the synchronise, the hand-over), spread over the
        same number of calls. With its own count (eight calls against the candidate's one) a
        launch-bound model's own code read 0.59x of itself on the H200."""
        sandbox = self._sandbox()
        if sandbox is None:
            return "the candidate runs without a sandbox that can be stopped"
        seeds = list(self.trials.seeds[:max(1, min(len(self.trials.seeds), sets))])
        with sandbox.paused() as stopped:
            if not stopped:
                return "the candidate's processes could not all be stopped"
            self.session.call("reference", requests.BaselinePrepare(name=self.name, seeds=seeds), 900.0,
                              f"baseline {self.name}")
            raw = self.session.call("reference",
                                    requests.BaselineTime(name=self.name, budget_s=self.timing_budget_s,
                                                          warmup_s=self.warmup_s),
                                    900.0, f"baseline {self.name}")
        self.event_ms = float(raw["timing"]["median_ms"])
        self._calls = max(1, calls)
        return None

    def burst(self) -> float | None:
        """One burst of the baseline with every process of the candidate stopped: its per-call ms,
        None when the round is void (the candidate could not be stopped, or the device stayed busy)."""
        sandbox = self._sandbox()
        with sandbox.paused() as stopped:
            if not stopped or not self._device_idle():
                self.void_rounds += 1
                return None
            self.warm()
            overhead_ms = self.transfers.overhead_ms(self._calls)
            with self.transfers.destination(self._calls, "reference") as destination, collector.timed() as clock:
                reply = self.session.call("reference",
                                          requests.Burst(name=self.name, calls=self._calls, every_call=True,
                                                         seed=self.trials.seeds[0], **destination.fields()),
                                          900.0, f"baseline {self.name}", destination.fds())
            close_fds(reply.get("_fds") or [])
        self.reports.append(OwnReport(float(reply.get("enqueue_ms") or 0.0), _figure(reply.get("pack_ms")),
                                      _figure(reply.get("device_ms"))))
        per_call = max(0.0, clock.ms - overhead_ms) / self._calls
        if per_call <= 0.0:
            self.void_rounds += 1
            return None
        self.walls.append(per_call)
        return per_call

    def warm(self) -> None:
        """One untimed call right before a timed burst, on a GPU: each side of a round starts its
        burst from the same state (the device's clocks, the host thread just run), whatever ran
        between the rounds. The candidate gets the same (``Measurement``)."""
        if self.device.type != "cuda":
            return
        reply = self.session.call("reference", requests.Burst(name=self.name, calls=1, seed=self.trials.seeds[0]),
                                  900.0, f"baseline {self.name}")
        close_fds(reply.get("_fds") or [])

    def figure_ms(self) -> float | None:
        """The baseline's time as every baseline's is taken: its in-process median bounded by the
        fastest of its bursts on the parent's clock."""
        if self.event_ms is None or not self.walls:
            return None
        return max(self.event_ms, min(self.walls))

    def bridge(self, name: str, calls: int) -> SideBySide | None:
        """A baseline timed after the candidate ended (cached, compiled: too costly to time beside
        every candidate) against this one in the same rounds, alternating order, ``calls`` calls
        each: the median of ``name``'s time over this baseline's, with its interval. The
        candidate's speedup against ``name`` is this ratio times its side-by-side speedup against
        this baseline, and its interval the product of the two intervals (each covers 98.4% with
        seven rounds; together at least 96.8%). Both sides are the reference worker's own code:
        nothing to stop, nothing to judge. None when fewer rounds than the least were valid."""
        pairs = []
        for index in range(PAIRED_ROUNDS):
            figures = {}
            for side in ((name, self.name) if paired_candidate_first(index) else (self.name, name)):
                figures[side] = trusted_burst_ms(self.session, self.transfers, side, calls, self.trials.seeds[0])
            pairs.append((figures[self.name], figures[name]))
        return paired_speedup(pairs, 1.0, calls)

    def release(self) -> None:
        if self.session.alive("reference"):
            try:
                self.session.call("reference", requests.Release(name=self.name), 120.0, "baseline release")
            except Abort:
                pass

    def _sandbox(self):
        worker: Worker | None = self.session.workers.get("candidate")
        return getattr(worker, "sandbox", None)

    def _device_idle(self) -> bool:
        if self.device.type != "cuda":
            return True  # nothing the candidate queued outlives its stopped processes on the CPU
        for _ in range(PROBES_PER_ROUND):
            probe = self.session.call("reference", requests.Probe(), 120.0, "idle probe").get("ms")
            if probe is None:
                return True
            busy = device_busy(probe, self.best_probe_ms)
            if self.best_probe_ms is None or probe < self.best_probe_ms:
                self.best_probe_ms = probe
            if not busy:
                return True
        return False


def trusted_burst_ms(session: Session, transfers: Transfers, name: str, calls: int, seed: int,
                     timeout_s: float = 900.0) -> float:
    """One burst of the reference worker's baseline ``name`` on the parent's clock, its last outputs
    in the reply: the per-call time, the calibrated round trip taken off."""
    overhead_ms = transfers.overhead_ms()
    with transfers.destination(1, "reference") as destination, collector.timed() as clock:
        reply = session.call("reference", requests.Burst(name=name, calls=calls, seed=seed, **destination.fields()),
                             timeout_s, f"baseline {name}", destination.fds())
    close_fds(reply.get("_fds") or [])
    return max(0.0, clock.ms - overhead_ms) / calls


def _figure(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None
