"""Failing variants of a run become debugging-benchmark instances (``hercules.debug.export``).

Each instance carries the problem, the broken candidate, the prompt that produced it (the
debugging task's context) and the core's error. The debugging package is imported here only,
when the command runs: the optimiser itself does not depend on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from hercules.optimize.storage import RunStore

DEFAULT_STATUSES = ("build_error", "runtime_error", "crash", "timeout", "incorrect")


def export_failures(run_dir: Path, corpus_dir: Path, statuses: Iterable[str] | None = None) -> list[Path]:
    from hercules.debug.export import export_failing_candidate, exportable
    from hercules.harness.records import Cause

    wanted = set(statuses or DEFAULT_STATUSES)
    store = RunStore(run_dir)
    try:
        codes = store.problem_codes()
        written = []
        for v in store.variants():
            if v.status not in wanted or not v.code or v.slot.problem not in codes:
                continue
            # The verdict's cause decides what kind of instance it is; a failure that was not the
            # candidate's (the harness, a kill from outside, the problem's own code) is none.
            cause = v.verdict.cause if v.verdict is not None else Cause.NONE
            if not exportable(v.status, cause):
                continue
            call = store.call(v.slot)
            prompt = call[0].user if call else f"Seed candidate {v.name} of {v.slot.problem}."
            written.append(export_failing_candidate(
                corpus_dir, problem_name=v.slot.problem, problem_code=codes[v.slot.problem], candidate_code=v.code,
                status=v.status, error=v.reason or v.status, prompt=prompt, reference_code=codes[v.slot.problem],
                cause=cause))
        return sorted(set(written))
    finally:
        store.close()
