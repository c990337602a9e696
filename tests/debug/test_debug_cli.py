"""End to end on CPU through the real CLI: ``hercules debug run`` with two scripted fixers (null,
replay) x two protocols over a subset of the compile-error instances, real nvcc builds.

The subset is the four compile-error instances whose builds fail fastest here (about a second
each): keeping the CI cost near 30-60 s on two cores. On a CPU machine nothing built can run, so
no fixer can pass; the null fixer's broken files must classify as build errors from the compiler's
own output. A second identical run resumes: every round is read back, nothing is rebuilt."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "corpora" / "cudabeaver"
SUBSET = ("cuda_180__compile_error__76f2d111", "cuda_227__compile_error__d12728ed",
          "cuda_173__compile_error__81485d75", "cusparse_4__compile_error__cfcd99f6")
PROTOCOLS = ("n=1,iter=1,fb=log,p=0.7", "n=2,iter=2,fb=evidence,hist=1,p=0")

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def _run(out: Path, *extra: str) -> dict:
    cmd = [sys.executable, "-m", "hercules.debug.cli", "run", "--corpus", str(CORPUS), "--category", "compile_error",
           "--device", "cpu", "--out", str(out), "--json", "--fixer", "null", "--fixer", "replay", "--k", "1",
           "--k", "2", *(a for p in PROTOCOLS for a in ("--protocol", p)), *(a for t in SUBSET for a in ("--task", t)),
           *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)  # exactly one JSON object


def test_two_fixers_two_protocols_on_cpu(tmp_path):
    out = tmp_path / "run"
    summary = _run(out)
    tasks = summary["tasks"]
    assert len(tasks) == len(SUBSET) * 2 * 2
    for t in tasks:
        assert {"task_id", "labelled_category", "classified_category", "passed"} <= set(t)
        assert t["passed"] is False  # nothing runs on a CPU machine
    null = [t for t in tasks if t["fixer"] == "null"]
    assert all(t["classified_category"] == "build" and t["labelled_category"] == "compile_error" for t in null)
    assert {t["subtype"] for t in null} <= {"syntax_type", "api_misuse", "missing_header", "link"}
    # the two-round protocol on an unchanged file: the same code twice, the same failure twice
    two = [t for t in null if t["protocol"].startswith("n=2")]
    assert all({"duplicate_code", "no_progress"} <= set(t["stagnation"]) for t in two)
    replay = [t for t in tasks if t["fixer"] == "replay"]
    assert all(t["classified_category"] in ("untested", "build") for t in replay)
    labels = {m["label"] for m in summary["pass_at_k"]}
    assert any(lbl.startswith("pass@2(M=null, C=cudabeaver, A=n=2,iter=2,fb=evidence") for lbl in labels)
    assert {m["p"] for m in summary["pass_at_k"]} == {0.0, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0}
    assert all(m["value"] == 0.0 for m in summary["pass_at_k"])
    assert (out / "report.md").is_file() and "<table>" in (out / "report.html").read_text()
    assert (out / "results.sqlite").is_file()
    # resume: the same command reads every round back
    start = time.perf_counter()
    again = _run(out)
    assert time.perf_counter() - start < 30
    assert [(t["task_id"], t["classified_category"]) for t in again["tasks"]] == \
        [(t["task_id"], t["classified_category"]) for t in tasks]


def test_bad_input_fails_with_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "hercules.debug.cli", "run", "--corpus", str(tmp_path / "nope"),
                           "--json"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "does not exist" in proc.stderr and proc.stdout == ""
    proc = subprocess.run([sys.executable, "-m", "hercules.debug.cli", "run", "--corpus", str(CORPUS),
                           "--protocol", "fb=loud"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "feedback must be one of" in proc.stderr
