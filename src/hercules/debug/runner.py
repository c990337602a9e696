"""The benchmark loop: fixers x protocols x tasks x samples, each sample a trajectory of rounds.

Trajectories run in parallel (builds overlap; GPU tests and timed evaluations are serialised by
one lock so every timing is taken alone). The reference of a native task is timed once per run,
the same way as the candidates, for the gate. An attempt that is a run already made (the
reproduction's run of the same file under the same conditions; an earlier deterministic outcome
of the same file in this run) takes that run's outcome and says so (``reuse``), unless the
benchmark is made with ``reuse=False``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hercules.debug import classifier as cls
from hercules.debug import interrupt
from hercules.debug.attempt import Outcome, RunOptions, run_solution_or_failure
from hercules.debug.core_verdict import killed_from_outside
from hercules.debug.corpus import Instance
from hercules.debug.evaluations import device_lock
from hercules.debug.fixers import kernelbench_alias
from hercules.debug.gate import GateResult, degeneration_signs
from hercules.debug.protocol import FixRequest, Protocol, Round, round_metrics
from hercules.debug.reproduce import Reproduction
from hercules.debug.reuse import Recorded, RecordedRuns, admit_all
from hercules.debug.stagnation import stagnation_modes
from hercules.debug.store import DebugStore, write_json_atomic
from hercules.debug.toolchain import Toolchain
from hercules.interrupt import SIGNAL_RACE_S
from hercules.problems.model import code_hash


@dataclass(frozen=True)
class Trajectory:
    fixer: str
    protocol: Protocol
    instance: Instance
    sample: int
    rounds: tuple[dict[str, Any], ...]
    modes: tuple[str, ...]
    stored: bool = False  # every round read back from the run folder (a resumed run), none run now

    def passes(self, p: float) -> bool:
        return any(_gate(r).passes(p) for r in self.rounds)

    @property
    def final(self) -> dict[str, Any]:
        return self.rounds[-1]


def _drop_if_stopped(outcome: Outcome) -> None:
    """Raise ``Interrupted`` (nothing recorded; the round runs again on resume) when the run is
    stopping, or the outcome is a worker ended by SIGINT/SIGTERM and the run's own stop follows
    within ``SIGNAL_RACE_S`` (a time guard's signal reaches the workers and this process together):
    such a worker's "crash" is the stop, not the candidate's outcome."""
    killed = cls.killed_by_stop_signal(outcome.classification.reason or "")
    if interrupt.STOP.is_set() or (killed and interrupt.STOP.wait(SIGNAL_RACE_S)):
        raise interrupt.Interrupted("the run was asked to stop")


def _load_round(store: DebugStore, where) -> dict[str, Any] | None:
    """A stored round, or None where there is none to keep, so that a resumed run runs it again:
    a round stored as a worker ended by SIGINT/SIGTERM is the stop of the call that ran it (such
    rounds were kept by runs whose stop came after ``SIGNAL_RACE_S``, or before
    ``_drop_if_stopped``; the H100 run carried from d1344ce held 17), and one whose evaluation was
    killed from outside (the host's OOM killer) is the machine's doing; neither is an outcome."""
    record = store.load(where)
    if record is None:
        return None
    if cls.killed_by_stop_signal(record.get("reason") or ""):
        return None
    if killed_from_outside(record.get("category"), record.get("subtype")):
        return None
    return record


def _gate(record: dict[str, Any]) -> GateResult:
    return GateResult(**record["gate"])


class Benchmark:
    def __init__(self, store: DebugStore, tc: Toolchain, opts: RunOptions, fixers: dict[str, Any],
                 protocols: Sequence[Protocol], jobs: int = 2, reuse: bool = True):
        self.store = store
        self.tc = tc
        self.opts = opts
        self.fixers = fixers
        self.protocols = tuple(protocols)
        self.jobs = max(1, jobs)
        self.gpu_lock = device_lock()
        self._ref_locks: dict[str, threading.Lock] = {}  # per task: its reference runs once
        self._outcome_locks: dict[tuple[str, str], threading.Lock] = {}  # per (task, code hash)
        self._locks_guard = threading.Lock()
        self.reuse = reuse
        self.recorded = RecordedRuns()
        self.refused: dict[str, str] = {}  # task id: why its reproduction's runs are not reused

    def use_reproductions(self, instances: Sequence[Instance], reproductions: Sequence[Reproduction]
                          ) -> dict[str, str]:
        """Let attempts take the reproduction's runs where they are the same run; returns
        {task id: why not} for the instances whose reproduction cannot stand for an attempt."""
        return admit_all(self.recorded, instances, reproductions, self.tc, self.opts) if self.reuse else {}

    # -- the reference, timed like a candidate (native and def.py tasks on a GPU) --
    def reference_timing(self, inst: Instance) -> dict[str, Any] | None:
        if inst.kind == "kernelbench" or not self.tc.gpu_present:
            return None
        with self._locks_guard:
            lock = self._ref_locks.setdefault(inst.task_id, threading.Lock())
        with lock:
            where = self.store.reference_dir(inst.task_id)
            saved = _load_round(self.store, where)
            if saved is not None and saved.get("reused_from") and not self.reuse:
                saved = None  # taken from a recorded run before; now asked to run for real
            if saved is None:
                reference = inst.reference_code()
                if reference is None:
                    return None
                # the reproduction ran this reference the same way (same conditions): that is the run
                recorded = self.recorded.reference(inst.task_id, code_hash(reference)) if self.reuse else None
                if recorded is not None:
                    outcome, seconds = recorded.outcome, 0.0
                else:
                    outcome, seconds = run_solution_or_failure(inst, reference, where, self.tc, self.opts,
                                                               self.gpu_lock)
                    _drop_if_stopped(outcome)
                saved = {"correct": outcome.correct, "time_ms": outcome.time_ms, "method": outcome.method,
                         "wall_ms": outcome.wall_ms, "category": outcome.classification.category,
                         "reason": outcome.classification.reason, "seconds": round(seconds, 3),
                         "reused_from": recorded.source if recorded else None}
                write_json_atomic(where / "result.json", saved)
            return saved if saved["correct"] else None

    def _outcome(self, inst: Instance, code: str, where) -> tuple[Outcome, Recorded | None]:
        """Run the code, unless a recorded run of it may stand for this attempt (``reuse``): then
        its outcome and which run it was."""
        key = (inst.task_id, code_hash(code))
        with self._locks_guard:
            lock = self._outcome_locks.setdefault(key, threading.Lock())
        with lock:  # the same file's attempts one at a time: the first one's outcome may serve the rest
            recorded = self.recorded.take(*key) if self.reuse else None
            if recorded is not None:
                return recorded.outcome, recorded
            outcome, _ = run_solution_or_failure(inst, code, where, self.tc, self.opts, self.gpu_lock)
            _drop_if_stopped(outcome)
            if self.reuse:
                self.recorded.remember(inst.task_id, outcome, where.relative_to(self.store.run_dir).as_posix())
            return outcome, None

    def _record(self, fixer: str, protocol: Protocol, inst: Instance, sample: int, round_: int, code: str,
                note: str, outcome: Outcome, seconds: float, recorded: Recorded | None = None) -> dict[str, Any]:
        gate = outcome.gate(self.reference_timing(inst) if outcome.correct else None)
        found = outcome.classification
        if gate.correct and not gate.passes(protocol.p):
            found = cls.Classification(cls.SLOW, gate.method,
                                       f"correct, speedup {gate.speedup if gate.speedup is None else round(gate.speedup, 3)}"
                                       f" < p={protocol.p:g}")
        ref = inst.reference_code()
        if inst.kind == "kernelbench" and ref:
            ref = kernelbench_alias(ref)
        degeneration = degeneration_signs(code, ref, gate.speedup, protocol.p) if gate.correct else ()
        return {
            "fixer": fixer, "protocol": protocol.describe(), "task_id": inst.task_id, "family": inst.family,
            "labelled": inst.category, "kind": inst.kind, "sample": sample, "round": round_,
            "code_hash": code_hash(code), "fixer_note": note[:2000],
            "category": found.category, "subtype": found.subtype, "reason": found.reason,
            "environment_suspect": found.environment_suspect, "correct": gate.correct,
            "gate": {"correct": gate.correct, "speedup": gate.speedup, "ref_ms": gate.ref_ms,
                     "cand_ms": gate.cand_ms, "method": gate.method},
            "degeneration": list(degeneration), "outcome": outcome.to_json(), "seconds": round(seconds, 3),
            "reused_from": recorded.source if recorded else None,
            "reused": recorded.describe() if recorded else None,
        }

    def trajectory(self, fixer_name: str, protocol: Protocol, inst: Instance, sample: int) -> Trajectory:
        fixer = self.fixers[fixer_name]
        code = inst.broken_code()
        rounds: list[dict[str, Any]] = []
        history: list[Round] = []
        stored = True
        for r in range(protocol.iterations):
            where = self.store.round_dir(fixer_name, protocol.describe(), inst.task_id, sample, r)
            record = _load_round(self.store, where)
            if record is not None and record.get("reused_from"):
                if not self.reuse:
                    record = None  # it took a recorded run; now asked to run for real
                elif (record.get("reused") or {}).get("run"):
                    self.recorded.mark_taken(inst.task_id, record["code_hash"], record["reused"]["run"])
            if record is None:
                stored = False
                start = time.perf_counter()
                answer = fixer.fix(FixRequest(inst, code, protocol, sample, r, tuple(history)))
                where.mkdir(parents=True, exist_ok=True)
                (where / "answer.txt").write_text(answer.raw or "")
                (where / "solution.txt").write_text(answer.code)
                outcome, recorded = self._outcome(inst, answer.code, where)
                record = self._record(fixer_name, protocol, inst, sample, r, answer.code, answer.raw, outcome,
                                      time.perf_counter() - start, recorded)
                self.store.save(where, record)
            rounds.append(record)
            code = (where / "solution.txt").read_text() if (where / "solution.txt").is_file() else code
            log = "\n".join(filter(None, [(record["outcome"].get(s) or {}).get(k, "")
                                          for s in ("build", "test") for k in ("stdout", "stderr")]))
            history.append(Round(code, record["category"], record["reason"], log, record["gate"]["speedup"],
                                 round_metrics(record)))
            if _gate(record).passes(protocol.p):
                break
        return _trajectory(fixer_name, protocol, inst, sample, rounds, stored)

    def run(self, instances: Sequence[Instance], progress: Callable[[Trajectory], None] | None = None
            ) -> list[Trajectory]:
        # Task-major order: a run cut short still has every fixer and protocol for the tasks it reached.
        # One job per (task, fixer), its protocols and samples one after another: a scripted fixer
        # answers the same code in each of them, and those repeats wait on the first one's outcome;
        # run side by side they only held a job slot each (2 jobs over the 35 compile-error
        # instances: 600 s, one core busy).
        groups = [[(f, p, inst, s) for p in self.protocols for s in range(p.attempts)]
                  for inst in instances for f in self.fixers]
        # A stopped run (interrupt.STOP) returns the groups finished; every round finished is stored.
        done: list[list[Trajectory] | None] = [None] * len(groups)
        for i, trajectories in interrupt.map_until_stopped(lambda g: [self.trajectory(*job) for job in g],
                                                           groups, self.jobs):
            done[i] = trajectories
            if progress:
                for traj in trajectories:
                    progress(traj)
        return [traj for group in done for traj in group or ()]


def _trajectory(fixer: str, protocol: Protocol, inst: Instance, sample: int, rounds: Sequence[dict[str, Any]],
                stored: bool = False) -> Trajectory:
    passed = any(_gate(x).passes(protocol.p) for x in rounds)
    modes = stagnation_modes([x["code_hash"] for x in rounds], [x["category"] for x in rounds], passed)
    return Trajectory(fixer, protocol, inst, sample, tuple(rounds), modes, stored)


def stored_trajectories(store: DebugStore, instances: Sequence[Instance], fixers: Sequence[str],
                        protocols: Sequence[Protocol]) -> tuple[list[Trajectory], int]:
    """The finished trajectories of a run, read back from its stored rounds (a run cut short, even
    by SIGKILL, keeps every round it finished), and how many trajectories are not finished."""
    finished: list[Trajectory] = []
    unfinished = 0
    for inst in instances:
        for fixer in fixers:
            for protocol in protocols:
                for sample in range(protocol.attempts):
                    rounds: list[dict[str, Any]] = []
                    for r in range(protocol.iterations):
                        record = _load_round(store, store.round_dir(fixer, protocol.describe(), inst.task_id,
                                                                    sample, r))
                        if record is None:
                            break
                        rounds.append(record)
                        if _gate(record).passes(protocol.p):
                            break
                    if rounds and (len(rounds) == protocol.iterations or _gate(rounds[-1]).passes(protocol.p)):
                        finished.append(_trajectory(fixer, protocol, inst, sample, rounds, stored=True))
                    else:
                        unfinished += 1
    return finished, unfinished
