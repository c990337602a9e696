"""The static scan as a whole, through its public module: every exploit's static signal is found,
honest code gets no finding, and the contract every rule keeps (the record, never raising, speed).

Three sources of honest code here: the adversarial corpus's honest candidates, the built-in
suite's example candidates (globbed at test time, whatever exists then) and KernelBench's own
references submitted as candidates. Each rule's own cases are in tests/harness/scan/.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import time
from pathlib import Path

import pytest

from hercules.harness.records import Flag
from hercules.harness.static_scan import Finding, lines_executed, scan_candidate
from hercules.problems.model import read_metadata

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "adversarial"
SUITE = ROOT / "src" / "hercules" / "suite"
KERNELBENCH = next((p for p in (ROOT / "corpora" / "kernelbench", ROOT.parent / "shared" / "corpora" / "kernelbench")
                    if p.is_dir()), None)
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
FLAG_VALUES = {f.value for f in Flag}


def _problem_dtype(path: Path) -> str:
    try:
        return str(read_metadata(ast.parse(path.read_text())).get("dtype", "float32"))
    except (OSError, SyntaxError, ValueError):
        return "float32"


def _describe(findings: list[Finding]) -> str:
    return "; ".join(f"{f.flag}@{f.line}: {f.reason}" for f in findings)


# ---- the corpus -------------------------------------------------------------------------------

EXPLOITS = sorted(k for k, v in MANIFEST.items() if v["expect"] == "caught")
HONEST = sorted(k for k, v in MANIFEST.items() if v["expect"] == "ok")


def test_manifest_is_consistent():
    on_disk = {str(p.relative_to(CORPUS)) for p in CORPUS.glob("honest/*.py")} | {
        str(p.relative_to(CORPUS)) for p in CORPUS.glob("exploits/*.py")}
    assert on_disk == set(MANIFEST), "every candidate file has exactly one manifest entry"
    for name, entry in MANIFEST.items():
        assert (CORPUS / "problems" / f"{entry['problem']}.py").is_file(), name
        assert entry["expect"] in ("ok", "caught"), name
        for key in ("flags_any", "static_flags"):
            assert set(entry[key]) <= FLAG_VALUES, f"{name}: unknown flag in {key}"
        if entry["expect"] == "ok":
            assert not entry["flags_any"] and not entry["static_flags"] and not entry["or_status"], name


def test_every_threat_has_an_exploit():
    covered = {flag for k in EXPLOITS for flag in MANIFEST[k]["flags_any"] + MANIFEST[k]["static_flags"]}
    for flag in ("side_stream", "tensor_subclass", "result_cache", "problem_edit", "zero_output",
                 "precision_downcast", "monkey_patch", "background_thread", "global_state",
                 "output_aliases_input", "input_mutated", "reference_fallback", "foreign_memory",
                 "fragile_inputs"):
        assert flag in covered, flag


@pytest.mark.parametrize("name", EXPLOITS)
def test_exploit_static_signal_found(name):
    entry = MANIFEST[name]
    dtype = _problem_dtype(CORPUS / "problems" / f"{entry['problem']}.py")
    findings = scan_candidate((CORPUS / name).read_text(), dtype)
    missing = set(entry["static_flags"]) - {f.flag for f in findings if not f.note}
    assert not missing, f"{name}: expected {sorted(missing)}, found: {_describe(findings)}"


@pytest.mark.parametrize("name", HONEST)
def test_honest_corpus_candidate_is_clean(name):
    entry = MANIFEST[name]
    dtype = _problem_dtype(CORPUS / "problems" / f"{entry['problem']}.py")
    findings = scan_candidate((CORPUS / name).read_text(), dtype)
    assert findings == [], f"{name}: {_describe(findings)}"


def _suite_candidates() -> list[Path]:
    return sorted((SUITE / "candidates").glob("**/*.py"))


def test_suite_candidates_are_clean():
    """Every example candidate of the built-in suite (as present when the test runs) is clean."""
    files = _suite_candidates()
    if not files:
        pytest.skip("no suite candidates yet")
    dirty = {}
    for path in files:
        problem = SUITE / "problems" / f"{path.parent.name}.py"
        dtype = _problem_dtype(problem) if problem.is_file() else "float32"
        findings = scan_candidate(path.read_text(), dtype)
        if findings:
            dirty[str(path.relative_to(ROOT))] = _describe(findings)
    assert not dirty, dirty


def _as_candidate(reference: str) -> str:
    """A KernelBench reference submitted as its own candidate: Model renamed ModelNew, as users do."""
    return re.sub(r"\bModel\b", "ModelNew", reference)


def test_kernelbench_references_as_candidates_get_no_flag():
    """Each of KernelBench's references is honest PyTorch: submitted as a candidate, no finding of
    it may be a flag, outright or conditional (notes are allowed)."""
    files = sorted(KERNELBENCH.glob("level[123]/*.py")) if KERNELBENCH else []
    if not files:
        pytest.skip("no KernelBench corpus on this machine")
    flagged = {}
    for path in files:
        findings = [f for f in scan_candidate(_as_candidate(path.read_text()), _problem_dtype(path)) if not f.note]
        if findings:
            flagged[str(path.relative_to(KERNELBENCH))] = _describe(findings)
    assert not flagged, flagged
    assert len(files) >= 250, "the whole corpus was scanned"


# ---- contract ------------------------------------------------------------------------------------

def test_finding_record():
    findings = scan_candidate("import torch\ntorch.allclose = None\n")
    assert findings == [Finding(flag="monkey_patch", line=2, reason=findings[0].reason)]
    assert findings[0].decisive and not findings[0].conditional and not findings[0].note
    assert findings[0].fallback_lines == ()
    assert dataclasses.is_dataclass(Finding)
    with pytest.raises(dataclasses.FrozenInstanceError):
        findings[0].line = 3  # type: ignore[misc]
    # Every finding on the exploit and red-team files keeps the record's contract.
    for path in sorted(CORPUS.glob("exploits/*.py")) + sorted((ROOT / "tests" / "redteam").glob("*.py")):
        for finding in scan_candidate(path.read_text()):
            assert finding.flag in FLAG_VALUES and isinstance(finding.line, int) and finding.reason, (path, finding)
            assert finding.conditional is bool(finding.fallback_lines), (path, finding)


def test_lines_executed():
    assert lines_executed(((3, 5),), {1, 5}) is True
    assert lines_executed(((3, 5),), {2, 6}) is False
    assert lines_executed(((3, 3), (9, 12)), {10}) is True
    assert lines_executed((), {1, 2, 3}) is False
    assert lines_executed(((1, 100),), set()) is False


@pytest.mark.parametrize("code", [
    "def f(:\n", "class\n", "x = (\n", "\x00", "", "   ", "if True:\npass\n", "lambda: (yield)",
    "def f():\n    return " + "(" * 50 + "1" + ")" * 50 + "\n",
    "x = " + " + ".join(["a"] * 3000) + "\n",
    "from . import Model\nfrom .. import *\n",
    "exec(" + repr("exec(" + repr("import torch\ntorch.allclose = 1") + ")") + ")\n",
    "setattr()\ngetattr()\ntype()\nopen\nos.environ\nimport os\nos.environ[1:2]\nos.environ.update(1)\n",
    "def forward(self):\n    return\nclass A:\n    def forward():\n        return A\n",
    "try:\n    pass\nexcept* ValueError:\n    pass\n",
    "match x:\n    case {'a': 1}:\n        torch.allclose = 1\n",
    "async def f():\n    async with a as b:\n        async for c in d:\n            await e\n",
    "x: int\nclass A(metaclass=B, **kw):\n    y: 'torch.Tensor' = 1\n",
])
def test_odd_code_never_raises(code):
    findings = scan_candidate(code, "float32")
    assert isinstance(findings, list)
    for unusual_dtype in ("", "int8", "torch.bfloat16", None):
        scan_candidate(code, unusual_dtype)  # type: ignore[arg-type]


def test_syntax_error_gives_no_findings():
    assert scan_candidate("import threading\ndef f(:\n") == []


def test_fast_on_a_large_file():
    block = (CORPUS / "honest" / "matmul_blocked.py").read_text()
    big = "\n".join(block.replace("ModelNew", f"ModelNew{i}").replace("_block_size", f"_block_size{i}")
                    for i in range(100))
    # The scan's own CPU time (one thread): what it costs whatever else the host runs (~1 s).
    start = time.thread_time()
    assert scan_candidate(big) == []
    assert time.thread_time() - start < 5.0
