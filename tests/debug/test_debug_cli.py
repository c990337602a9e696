"""End to end on CPU through the real CLI: ``hercules debug run`` with two scripted fixers (null,
replay) x two protocols over compile-error instances of the corpus, real nvcc builds.

One instance of each way a CPU machine sees them (nvcc errors, a KernelBench static-check
rejection, a file that builds with nvcc 13.0, a missing library header, a reference that does not
build): the whole corpus took 213 s on two cores (the four KernelBench candidates whose sources
compile take 85-105 s each in the compile-only check), too much for CI;
`benchmarks/results/cpu_debug_reproduction.md` is that run. On a CPU machine nothing built can run, so
no fixer can pass. A null fixer's broken file is either a build error, with the compiler's or the
static check's own words as its reason, or it compiled, and then it is ``untested``, never a pass.
A second identical run resumes: every round is read back, nothing is rebuilt. Every row says
whether its instance was reproduced here (the broken file fails to build, the reference builds)
and, if not, why; pass@k is over the reproduced ones."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hercules.debug.corpus import load_corpus

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "corpora" / "cudabeaver"
PROTOCOLS = ("n=1,iter=1,fb=log,p=0.7", "n=2,iter=2,fb=evidence,hist=1,p=0")
TASKS = ("cuda_180__compile_error__76f2d111", "cuda_227__compile_error__d12728ed", "cuda_173__compile_error__81485d75",
         "kernelbench_level2_31__compile_error__3ae77b08", "cuda_104__compile_error__f8160fc8",
         "cusparse_4__compile_error__cfcd99f6", "thunderkittens_based_linear_attn__compile_error__b80b51d7")
BUILD_SUBTYPES = {"syntax_type", "api_misuse", "missing_header", "link", "static_check", "timeout"}

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def _run(out: Path, *extra: str) -> dict:
    cmd = [sys.executable, "-m", "hercules.debug.cli", "run", "--corpus", str(CORPUS), "--category", "compile_error",
           "--device", "cpu", "--out", str(out), "--json", "--fixer", "null", "--fixer", "replay", "--k", "1",
           "--k", "2", "--jobs", "2", *(a for p in PROTOCOLS for a in ("--protocol", p)),
           *(a for t in TASKS for a in ("--task", t)), *extra]
    # the run's own cache folder (beside RUN): the reproduction really builds every instance, as in CI
    env = dict(os.environ, HERCULES_CACHE_DIR=str(out.parent / "cache"))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)  # exactly one JSON object


# ~50 s on the CI machine (seven instances, real nvcc builds, two at a time). CI keeps the debug run end
# to end over real builds in test_debug_reproduce.py (test_run_scores_only_the_reproduced_instances,
# test_validate_rules_on_real_builds_and_cache) and test_debug_reuse.py.
@pytest.mark.ondemand
@pytest.mark.timeout(1800)
def test_two_fixers_two_protocols_on_compile_error_instances_of_each_kind(tmp_path):
    expected = {i.task_id for i in load_corpus(CORPUS, categories=("compile_error",)).instances} & set(TASKS)
    assert expected == set(TASKS)
    out = tmp_path / "run"
    summary = _run(out)
    tasks = summary["tasks"]
    assert len(tasks) == len(expected) * 2 * 2
    assert {t["task_id"] for t in tasks} == expected
    for t in tasks:
        assert {"task_id", "labelled_category", "classified_category", "passed", "reproduced",
                "not_reproduced_why"} <= set(t)
        assert t["labelled_category"] == "compile_error"
        assert t["passed"] is False  # nothing runs on a CPU machine
        # reproduced on CPU: the broken file fails to build (and the reference does not); otherwise why not
        assert (t["reproduced"] is True) == (t["not_reproduced_why"] is None), t
        if t["fixer"] == "null":  # the broken file: its row is the reproduction's own observation
            if t["reproduced"]:
                assert t["classified_category"] == "build", t
            elif t["classified_category"] == "build":  # e.g. a library header this machine lacks
                assert t["reproduction_status"] in ("corpus_defect", "untested"), t
        assert t["classified_category"] in ("build", "untested"), t
        if t["classified_category"] == "build":
            assert t["subtype"] in BUILD_SUBTYPES and t["reason"], t
        else:  # the build command (or the compile-only check) succeeded: said so, never a pass
            assert t["subtype"] == "no_device" and "compile" in t["reason"], t
    null = [t for t in tasks if t["fixer"] == "null"]
    # files whose nvcc errors are known (undefined identifier, redefinition, ambiguous conversion)
    # are build errors, subtyped from the compiler's words
    known = {"cuda_180__compile_error__76f2d111": "api_misuse", "cuda_227__compile_error__d12728ed": "syntax_type",
             "cuda_173__compile_error__81485d75": "api_misuse"}
    assert {t["task_id"]: t["subtype"] for t in null if t["task_id"] in known} == known
    # the two-round protocol on an unchanged file: the same code twice, the same outcome twice
    two = [t for t in null if t["protocol"].startswith("n=2")]
    assert all({"duplicate_code", "no_progress"} <= set(t["stagnation"]) for t in two)
    reproduced = {t["task_id"] for t in null if t["reproduced"]}
    assert reproduced and {m["tasks"] for m in summary["pass_at_k"]} == {len(reproduced)}
    assert summary["reproduction"]["excluded_tasks"] == len(expected) - len(reproduced)
    assert {e["task_id"] for e in summary["reproduction"]["excluded"]} == expected - reproduced
    labels = {m["label"] for m in summary["pass_at_k"]}
    assert any(lbl.startswith("pass@2(M=null, C=cudabeaver, A=n=2,iter=2,fb=evidence") for lbl in labels)
    assert {m["p"] for m in summary["pass_at_k"]} == {0.0, 0.3, 0.5, 0.7, 0.9, 1.0, 1.5, 2.0}
    assert all(set(r["values"]) == {"0", "0.5", "0.7", "0.9", "1"} for r in summary["p_sweep"])
    assert all(m["value"] == 0.0 for m in summary["pass_at_k"])
    assert (out / "report.md").is_file() and "<table>" in (out / "report.html").read_text()
    assert (out / "results.sqlite").is_file()
    # resume: the same command reads every round back
    start = time.perf_counter()
    again = _run(out)
    assert time.perf_counter() - start < 60
    assert [(t["task_id"], t["classified_category"]) for t in again["tasks"]] == \
        [(t["task_id"], t["classified_category"]) for t in tasks]
    _report_rebuilds_a_run_cut_short(out, again)


def _report_rebuilds_a_run_cut_short(out: Path, summary: dict) -> None:
    """A run killed before writing its summary (SIGKILL leaves only the stored rounds): ``report``
    summarises it from them, says it is partial and leaves out what was not finished."""
    def report() -> dict:
        proc = subprocess.run([sys.executable, "-m", "hercules.debug.cli", "report", str(out), "--k", "1", "--k", "2",
                               "--json"], capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)

    (out / "summary.json").unlink()
    rebuilt = report()
    assert rebuilt["partial"] == {"finished_trajectories": sum(2 if t["protocol"].startswith("n=2") else 1
                                                               for t in summary["tasks"]),
                                  "unfinished_trajectories": 0}
    assert rebuilt["tasks"] == summary["tasks"] and rebuilt["pass_at_k"] == summary["pass_at_k"]
    # one round of one trajectory lost (in flight when the run was killed)
    cut = next(t for t in summary["tasks"] if t["protocol"].startswith("n=1"))
    lost = next(out.glob(f"attempts/{cut['fixer']}/n=1*/{cut['task_id']}/s0/i0/result.json"))
    lost.unlink()
    partial = report()
    assert partial["partial"]["unfinished_trajectories"] == 1
    assert len(partial["tasks"]) == len(summary["tasks"]) - 1
    assert "Partial run" in (out / "report.md").read_text()


def test_bad_input_fails_with_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "hercules.debug.cli", "run", "--corpus", str(tmp_path / "nope"),
                           "--json"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "does not exist" in proc.stderr and proc.stdout == ""
    proc = subprocess.run([sys.executable, "-m", "hercules.debug.cli", "run", "--corpus", str(CORPUS),
                           "--protocol", "fb=loud"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "feedback must be one of" in proc.stderr


def test_a_run_folder_made_on_another_device_is_not_resumed_here(tmp_path):
    """Its stored rounds would be read back as they are: one table, two cards' speedups."""
    out = tmp_path / "run"
    out.mkdir()
    made_on = "NVIDIA H100 80GB HBM3, 580.159.04, sm_90"
    (out / "run.json").write_text(json.dumps({"corpus": str(CORPUS), "machine": made_on}))
    proc = subprocess.run([sys.executable, "-m", "hercules.debug.cli", "run", "--corpus", str(CORPUS), "--task",
                           TASKS[1], "--device", "cpu", "--out", str(out), "--json"], capture_output=True, text=True,
                          check=False, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"its rounds were made on {made_on}, this machine is cpu: no GPU" in proc.stderr
    assert json.loads((out / "run.json").read_text())["machine"] == made_on  # left as it was
    assert not (out / "results.sqlite").exists()
