"""Whose fault an exception in a worker is: process-free rules, then a real worker process."""

from __future__ import annotations

import textwrap
from pathlib import Path

import torch

from hercules.harness import blame
from hercules.harness.ipc import Worker


def _raised(fn) -> BaseException:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - the test inspects what was raised
        return exc
    raise AssertionError("nothing raised")


def _module_from(path: Path, source: str):
    path.write_text(textwrap.dedent(source))
    namespace: dict = {"torch": torch}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


def test_an_exception_raised_in_the_foreign_file_is_the_foreign_codes(tmp_path):
    path = tmp_path / "candidate.py"
    ns = _module_from(path, """
        def forward(x):
            return x.no_such_method()
    """)
    exc = _raised(lambda: ns["forward"](torch.ones(2)))
    assert blame.owner(exc, blame.ForeignCode(files=frozenset({str(path)}))) == blame.FOREIGN


def test_the_harness_own_bug_after_foreign_code_returned_is_the_harness(tmp_path):
    """The shipped bug: the forward ran fine (a guarded fallback swallowed its own exception), then
    the harness called ``.lines`` on a set."""
    path = tmp_path / "candidate.py"
    ns = _module_from(path, """
        def forward(x):
            try:
                raise RuntimeError("fast path unavailable")
            except RuntimeError:
                return torch.relu(x)
    """)

    def harness_step():
        ns["forward"](torch.ones(2))
        executed: set[int] = {3, 4}
        return sorted(executed.lines)  # type: ignore[attr-defined]

    exc = _raised(harness_step)
    assert isinstance(exc, AttributeError)
    assert blame.owner(exc, blame.ForeignCode(files=frozenset({str(path)}))) == blame.HARNESS


def test_a_module_whose_forward_is_inherited_is_recognised_by_its_object():
    """torch's own frames run with ``self`` the foreign model: the model's fault, not the harness's."""
    model = torch.nn.Linear(4, 4)
    exc = _raised(lambda: model(torch.ones(3)))
    assert blame.owner(exc, blame.ForeignCode(objects=(model,))) == blame.FOREIGN
    assert blame.owner(exc, blame.ForeignCode(objects=(torch.nn.Linear(4, 4),))) == blame.HARNESS


def test_a_syntax_error_in_the_foreign_file_and_a_foreign_request_blame_the_foreign_code(tmp_path):
    path = tmp_path / "candidate.py"
    exc = _raised(lambda: compile("def f(:\n", str(path), "exec"))
    foreign = blame.ForeignCode(files=frozenset({str(path)}))
    assert blame.owner(exc, foreign) == blame.FOREIGN
    plain = _raised(lambda: {}["missing"])
    assert blame.owner(plain, foreign) == blame.HARNESS
    assert blame.owner(plain, foreign, whole_request_is_foreign=True) == blame.FOREIGN


def test_a_real_candidate_worker_reports_its_own_fault_as_the_harness(tmp_path):
    """A request the harness should never send (a run before any build) fails inside the worker's
    own code: the reply says ``harness``, not the candidate's ``error``."""
    worker = Worker.start("candidate", tmp_path / "worker.log")
    try:
        worker.send("prepare", device="cpu", dtype="float32", compiler=False)
        assert worker.receive("prepare", 120.0)["ok"]
        worker.send("refresh", index=0, layout=None)
        reply = worker.receive("refresh", 60.0)
        assert reply["ok"] is False and reply["kind"] == "harness", reply
        assert "Traceback" in reply["traceback"]
    finally:
        worker.close()
