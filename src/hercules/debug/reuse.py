"""Attempts that are a run already made: a recorded outcome taken instead of running it again.

The ``null`` fixer submits the broken file and ``replay`` the reference: exactly what the
reproduction stage ran (``reproduce``) on the same instance, through the same
``attempt.run_solution``. An attempt takes a recorded run's outcome only when it is provably the
same run:

    the same file        the recorded outcome's code hash is the attempt's
    the same instance    the reproduction's ``instance_hash`` (every file of the instance folder:
                         commands, testbench, broken file, reference) is the instance's now
    the same conditions  ``conditions.Conditions``: toolchain identity and device, Python/torch,
                         CUDA library wheels, the hash of the code that runs and classifies an
                         attempt, build/test timeouts, the core's timing budget

Everything else an attempt records is derived from its Outcome the same way for a recorded one
and a new one (``runner._record``: the gate, the ``slow`` classification under the protocol's p,
the degeneration signs), except the gate's reference timing of native tasks on a GPU, which is
itself a run of the reference: the reproduction's reference run is taken for it under the same
rules (``RecordedRuns.reference``). A replay of such a task that takes that same run is therefore
timed against its own measurement: speedup 1.0 by construction (two runs of the same file
differed by up to 0.57x by wall time on the H200, noise the gate read as a result).

How often a recorded run may stand for an attempt (a timed-out build, or the reference's timed-out
test, never: it may be the machine's load, and the reproduction does not cache it either):
    a deterministic outcome (a build failure, a build this machine cannot test): any number of
        attempts of that file (a repeat builds the same thing again);
    an outcome that ran a test (passed, wrong, crashed, timed out, a core verdict): one attempt
        only; a second sample of the same file is a second observation (a race may go the other
        way), so it runs.

Not reused: the full logs on disk (the reproduction's workspace is deleted after it; the record
keeps each log's head and tail, as every record does) and the attempt's own ``seconds`` (what the
attempt took now; the commands' seconds in the outcome are the recorded run's). The round says
which it was: ``reused_from`` ("reproduction" or "run": an earlier attempt of this run) and
``reused`` (which run). ``hercules debug run --no-reuse`` runs every attempt.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hercules.debug.attempt import Outcome, RunOptions
from hercules.debug.conditions import Conditions, run_conditions
from hercules.debug.corpus import Instance
from hercules.debug.reproduce import (
    RULES_VERSION,
    Reproduction,
    deterministic,
    instance_hash,
    maybe_load,
    outcome_from_json,
)
from hercules.debug.toolchain import Toolchain

REPRODUCTION = "reproduction"
RUN = "run"


def current_conditions(tc: Toolchain, opts: RunOptions, kind: str) -> Conditions:
    return run_conditions(tc, opts, kind, RULES_VERSION)


def _digest(conditions: Conditions) -> str:
    return hashlib.sha256(json.dumps(conditions.to_json(), sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Recorded:
    """One recorded run an attempt may take as its own."""

    outcome: Outcome
    source: str  # REPRODUCTION | RUN
    run: str  # the reproduction's side ("broken" | "reference"), or the earlier attempt's round folder
    repeatable: bool  # deterministic: stands for any number of attempts of the file
    instance_hash: str = ""
    conditions: str = ""  # digest of the Conditions both runs share

    def describe(self) -> dict[str, Any]:
        return {"from": self.source, "run": self.run, "repeatable": self.repeatable,
                "instance_hash": self.instance_hash, "conditions": self.conditions}


class RecordedRuns:
    """The runs of one benchmark run that attempts may take, keyed by (task id, code hash)."""

    def __init__(self) -> None:
        self._runs: dict[tuple[str, str], list[Recorded]] = defaultdict(list)
        self._references: dict[tuple[str, str], Recorded] = {}
        self._taken: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()

    def admit(self, inst: Instance, rep: Reproduction, now: Conditions) -> str | None:
        """Add the reproduction's runs of ``inst`` if they are runs of this instance under ``now``;
        otherwise say why not (nothing added: its attempts run)."""
        recorded = Conditions.from_json(rep.conditions)
        if recorded is None:
            return "the reproduction record keeps no conditions of its runs (an older record)"
        if rep.task_id != inst.task_id or rep.instance_hash != instance_hash(inst):
            return "the instance's files changed since its reproduction"
        diff = now.differences(recorded)
        if diff:
            return "conditions differ (now vs the reproduction's): " + "; ".join(diff)
        digest = _digest(now)
        with self._lock:
            for side, data in (("broken", rep.broken), ("reference", rep.reference)):
                if data is None:
                    continue
                outcome = outcome_from_json(data)
                if maybe_load(outcome, side):
                    continue  # a timeout that may be the machine's load: the attempt tries again
                run = Recorded(outcome, REPRODUCTION, side, deterministic(outcome), rep.instance_hash, digest)
                self._runs[(inst.task_id, outcome.code_hash)].append(run)
                if side == "reference":
                    self._references[(inst.task_id, outcome.code_hash)] = run
        return None

    def take(self, task_id: str, code_hash: str) -> Recorded | None:
        """A recorded run of this file for an attempt: a repeatable one, else one not taken yet."""
        with self._lock:
            runs = self._runs.get((task_id, code_hash), [])
            for run in runs:
                if run.repeatable:
                    return run
            for run in runs:
                if (task_id, code_hash, run.run) not in self._taken:
                    self._taken.add((task_id, code_hash, run.run))
                    return run
            return None

    def mark_taken(self, task_id: str, code_hash: str, run: str) -> None:
        """A stored round (a resumed run) already took this run."""
        with self._lock:
            self._taken.add((task_id, code_hash, run))

    def reference(self, task_id: str, code_hash: str) -> Recorded | None:
        """The reproduction's run of the reference, for the gate's reference timing (not taken:
        the timing is the baseline every candidate of the task is compared with)."""
        with self._lock:
            return self._references.get((task_id, code_hash))

    def remember(self, task_id: str, outcome: Outcome, run: str) -> None:
        """An attempt's deterministic outcome, for later attempts of the same file in this run."""
        if not deterministic(outcome):
            return
        with self._lock:
            runs = self._runs[(task_id, outcome.code_hash)]
            if not any(r.repeatable for r in runs):
                runs.append(Recorded(outcome, RUN, run, True))


def admit_all(recorded: RecordedRuns, instances: Sequence[Instance], reproductions: Sequence[Reproduction],
              tc: Toolchain, opts: RunOptions) -> dict[str, str]:
    """Admit every instance's reproduction; {task id: why not} for those refused."""
    by_task = {r.task_id: r for r in reproductions}
    refused: dict[str, str] = {}
    for inst in instances:
        rep = by_task.get(inst.task_id)
        if rep is not None and rep.broken is not None:
            why = recorded.admit(inst, rep, current_conditions(tc, opts, inst.kind))
            if why:
                refused[inst.task_id] = why
    return refused
