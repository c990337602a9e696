"""Fresh workspaces and the subprocesses that build and test them.

Each attempt gets its own copy of the testbench with the editable file put in place (the corpus
is never modified). Build and test each run under ``bash -c`` in their own process group with a
timeout; stdout, stderr, exit status and signal are kept (in full on disk, the tail in the record).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from hercules.debug import interrupt
from hercules.debug.corpus import Instance

TAIL_CHARS = 16_000  # head + tail kept in the record; the full log is on disk


@dataclass(frozen=True)
class CommandResult:
    stage: str  # "build" | "test"
    command: str
    returncode: int | None  # None when killed for the timeout
    signal: int | None  # the signal that ended it (negative return codes), if any
    timed_out: bool
    seconds: float
    stdout: str  # tail
    stderr: str  # tail
    notes: tuple[str, ...] = ()  # adaptations made to the command (arch flags, ...)
    skipped: str | None = None  # why the stage did not run (no GPU, empty command, earlier failure)

    @property
    def ok(self) -> bool:
        return self.skipped is None and self.returncode == 0 and not self.timed_out

    @property
    def text(self) -> str:
        return f"{self.stdout}\n{self.stderr}"


def skipped(stage: str, command: str, why: str, notes: tuple[str, ...] = ()) -> CommandResult:
    return CommandResult(stage, command, None, None, False, 0.0, "", "", notes, why)


def prepare(instance: Instance, solution_code: str, where: Path) -> Path:
    """``where/workspace``: a copy of the testbench with the solution file written in."""
    workspace = where / "workspace"
    if workspace.exists():
        shutil.rmtree(workspace)
    shutil.copytree(instance.testbench, workspace, symlinks=True)
    target = workspace / instance.solution_file
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(solution_code, encoding="utf-8")
    return workspace


def _tail(path: Path) -> str:
    """Head and tail: the first compiler errors matter most, the end says how it stopped."""
    data = path.read_bytes()
    if len(data) <= TAIL_CHARS:
        return data.decode("utf-8", errors="replace")
    half = TAIL_CHARS // 2
    return (data[:half].decode("utf-8", errors="replace") + "\n[... cut ...]\n"
            + data[-half:].decode("utf-8", errors="replace"))


def run_command(stage: str, command: str, workspace: Path, env: dict[str, str], timeout_s: float,
                log_dir: Path, notes: tuple[str, ...] = ()) -> CommandResult:
    """Run one stage; output goes to ``log_dir/<stage>.stdout|stderr``. Never raises for the command;
    raises ``interrupt.Interrupted`` when the run is stopped (the stage killed, no result)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / f"{stage}.stdout", log_dir / f"{stage}.stderr"
    start = time.perf_counter()
    timed_out = False
    interrupt.check()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        # A new session, so a timeout kills the whole tree (make -> nvcc -> cicc, python -> ./test.out).
        proc = subprocess.Popen(["bash", "-c", command], cwd=workspace, env=env, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        interrupt.register(proc.pid)  # a stop of the run kills the tree at once
        try:
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        finally:
            interrupt.unregister(proc.pid)
    # Killed (or maybe just finished) as the run was stopped: not an outcome of the code.
    interrupt.check()
    seconds = time.perf_counter() - start
    rc = proc.returncode
    # bash reports a child killed by signal N as 128 + N.
    sig = -rc if rc is not None and rc < 0 else (rc - 128 if rc is not None and 128 < rc < 160 else None)
    return CommandResult(stage, command, None if timed_out else rc, sig, timed_out, round(seconds, 3),
                         _tail(out_path), _tail(err_path), notes)

