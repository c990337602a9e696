"""The reference worker forked from a zygote: the same process to the parent as a plain child.

Each test runs real processes: the zygote (torch imported once), its forked workers answering
real requests, and an evaluating process killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hercules.harness import zygote
from hercules.harness.checks import DEFAULT_TOLERANCES
from hercules.harness.ipc import Worker, package_pythonpath

# The problem checks, while the worker sets it up, what a fresh process would see.
_MODEL = textwrap.dedent("""
    class Model(nn.Module):
        def forward(self, x):
            return x * 2

    def get_inputs():
        return [torch.randn(8)]

    def get_init_inputs():
        return []
""")
_PROBLEM = textwrap.dedent("""
    import os, sys
    import torch
    import torch.nn as nn
    assert os.environ.get("HERCULES_ZYGOTE_MARK") == {mark!r}, os.environ.get("HERCULES_ZYGOTE_MARK")
    assert os.getcwd() == {cwd!r}, os.getcwd()
    assert sys.path[0] == {cwd!r}, sys.path[0]
""") + _MODEL.replace("{", "{{").replace("}", "}}")


def _setup(worker: Worker, mark: str, cwd: Path) -> dict:
    worker.send("setup", code=_PROBLEM.format(mark=mark, cwd=str(cwd)), device="cpu", dtype="float32",
                init_seed=1, tolerance=DEFAULT_TOLERANCES["float32"].__dict__)
    return worker.receive("setup", 120)


def _parent_pid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":  # dead, waiting for its parent to read its status
            return True
        time.sleep(0.05)
    return False


def test_a_forked_worker_takes_the_requests_environment_and_folder_and_its_own_session(tmp_path, monkeypatch):
    monkeypatch.setenv("HERCULES_ZYGOTE_MARK", "first")
    first = Worker.start("reference", tmp_path / "first.log", cwd=tmp_path)
    monkeypatch.setenv("HERCULES_ZYGOTE_MARK", "second")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    second = Worker.start("reference", tmp_path / "second.log", cwd=elsewhere)
    try:
        assert isinstance(first.process, zygote.ForkedProcess)
        # Hercules' own variables are read late: one zygote serves both.
        assert _parent_pid(first.process.pid) == _parent_pid(second.process.pid) != os.getpid()
        assert _setup(first, "first", tmp_path)["ok"], first.log_tail()
        assert _setup(second, "second", elsewhere)["ok"], second.log_tail()
        assert os.getsid(first.process.pid) == first.process.pid  # a kill of its group ends only it
    finally:
        first.close()
        second.close()
    assert first.process.returncode == 0 and second.process.returncode == 0


def test_a_killed_worker_reads_as_a_killed_child_and_a_failed_setup_as_the_problems_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HERCULES_ZYGOTE_MARK", "yes")
    worker = Worker.start("reference", tmp_path / "w.log", cwd=tmp_path)
    try:
        reply = _setup(worker, "no", tmp_path)  # the problem's own assertion fails
        assert not reply["ok"] and "AssertionError" in reply["error"]
        assert worker.process.poll() is None
        os.kill(worker.process.pid, signal.SIGKILL)
        assert worker.process.wait(timeout=10) == -signal.SIGKILL
        assert worker.process.poll() == -signal.SIGKILL
    finally:
        worker.kill()


def test_a_variable_read_at_start_up_gets_a_zygote_of_its_own(tmp_path, monkeypatch):
    plain = Worker.start("reference", tmp_path / "a.log")
    monkeypatch.setenv("MALLOC_ARENA_MAX", "3")
    other = Worker.start("reference", tmp_path / "b.log")
    try:
        assert _parent_pid(plain.process.pid) != _parent_pid(other.process.pid)
        environ = Path(f"/proc/{other.process.pid}/environ").read_bytes().split(b"\0")
        assert b"MALLOC_ARENA_MAX=3" in environ
        # The retired zygote keeps serving the worker it forked.
        assert _setup(plain, "", tmp_path)["ok"] is False  # answers (the mark is unset, so it fails)
    finally:
        plain.close()
        other.close()


def test_switched_off_the_worker_is_a_plain_child(tmp_path, monkeypatch):
    monkeypatch.setenv("HERCULES_ZYGOTE", "0")
    worker = Worker.start("reference", tmp_path / "w.log")
    try:
        assert isinstance(worker.process, subprocess.Popen)
    finally:
        worker.close()


_EVALUATING = """
import sys, time
from pathlib import Path
from hercules.harness.ipc import Worker, package_pythonpath
worker = Worker.start("reference", Path(sys.argv[1]))
print(worker.process.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_workers_and_their_zygote_end_with_the_evaluating_process(tmp_path, sig):
    env = dict(os.environ, PYTHONPATH=package_pythonpath(os.environ.get("PYTHONPATH", "")))
    parent = subprocess.Popen([sys.executable, "-c", _EVALUATING, str(tmp_path / "w.log")],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        pid = int(parent.stdout.readline())
        zygote_pid = _parent_pid(pid)
        assert zygote_pid != parent.pid and _parent_pid(zygote_pid) == parent.pid
        parent.send_signal(sig)
        parent.wait(timeout=30)
        assert _gone(pid, 10), "the worker outlived the evaluating process"
        assert _gone(zygote_pid, 10), "the zygote outlived the evaluating process"
    finally:
        parent.kill()
        parent.wait()


_NEEDS_FLOP_COUNTER = textwrap.dedent("""
    import sys
    import torch
    import torch.nn as nn
    assert "torch._dynamo" not in sys.modules, "torch._dynamo imported"
    assert "torch.utils.flop_counter" in sys.modules, "flop_counter not imported"
""") + _MODEL


def test_the_flop_counters_imports_are_made_once_before_the_second_worker_and_not_at_start(tmp_path, monkeypatch):
    """A single evaluation's worker is not kept waiting for them; the second and later workers of
    the same evaluating process find torch's flop_counter already there, and none finds
    torch._dynamo (~1 s of imports the count no longer needs)."""
    monkeypatch.setenv("MALLOC_TOP_PAD_", "131072")  # read at start-up: a zygote of this test's own
    workers = [Worker.start("reference", tmp_path / f"w{i}.log", cwd=tmp_path) for i in range(3)]
    try:
        assert len({_parent_pid(w.process.pid) for w in workers}) == 1  # one zygote
        replies = []
        for worker in workers:
            worker.send("setup", code=_NEEDS_FLOP_COUNTER, device="cpu", dtype="float32", init_seed=1,
                        tolerance=DEFAULT_TOLERANCES["float32"].__dict__)
            replies.append(worker.receive("setup", 120))
        assert [r["ok"] for r in replies] == [False, True, True], replies
        assert "flop_counter not imported" in replies[0]["error"]
    finally:
        for worker in workers:
            worker.close()
