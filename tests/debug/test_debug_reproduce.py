"""Reproduction before scoring, on CPU with real nvcc builds through the real CLI (subprocesses).

Small instances only (cuda_227 and cuda_104 build in about a second each); the variants are
copies of cuda_227 with one thing changed (its label, its broken file, its reference), so every
rule is seen acting on real compiler output. Each test gets its own cache folder
(``HERCULES_CACHE_DIR``), so nothing is read from an earlier run unless the test says so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hercules.debug import classifier as cls
from hercules.debug.attempt import Outcome
from hercules.debug.corpus import load_instance
from hercules.debug.reproduce import judge
from hercules.debug.workspace import CommandResult

CORPUS = Path(__file__).resolve().parents[2] / "corpora" / "cudabeaver"
DUP = "cuda_227__compile_error__d12728ed"  # broken: a kernel defined twice (nvcc error); reference builds
BUILDS = "cuda_104__compile_error__f8160fc8"  # labelled compile_error, but builds with CUDA 13.0

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def variant(corpus: Path, name: str, label: str | None = None, broken_from: str | None = None,
            reference_from: str | None = None) -> str:
    """A copy of cuda_227 under ``corpus`` with its label, broken file or reference replaced."""
    src = CORPUS / DUP
    dst = corpus / name
    shutil.copytree(src, dst)
    info = json.loads((dst / "instance.json").read_text())
    info["id"] = name
    if label:
        info["error_category"] = label
    (dst / "instance.json").write_text(json.dumps(info))
    if broken_from:
        shutil.copy(src / broken_from, dst / "broken_start.cu")
    if reference_from:
        shutil.copy(src / reference_from, dst / "reference.cu")
    return name


def cli(cache: Path, *args: str, timeout: int = 300) -> dict:
    env = dict(os.environ, HERCULES_CACHE_DIR=str(cache))
    proc = subprocess.run([sys.executable, "-m", "hercules.debug.cli", *args, "--json"], capture_output=True,
                          text=True, timeout=timeout, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout) | {"_stderr": proc.stderr}


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    shutil.copytree(CORPUS / DUP, root / DUP)
    shutil.copytree(CORPUS / BUILDS, root / BUILDS)
    return root


def test_validate_rules_on_real_builds_and_cache(corpus, tmp_path):
    defect = variant(corpus, "dup_reference_broken__compile_error", reference_from="broken_start.cu")
    untested = variant(corpus, "dup_fixed__logic_error", label="logic_error", broken_from="reference.cu")
    mislabelled = variant(corpus, "dup__logic_error", label="logic_error")
    # a CUDA library header no machine has: the environment when the reference needs it too, the
    # candidate's own error when the reference builds without it
    absent = "#include <cublas_hercules_absent.h>\n"
    lib_env = variant(corpus, "dup_lib_both__compile_error")
    lib_own = variant(corpus, "dup_lib_broken__compile_error", broken_from="reference.cu")
    for name, files in ((lib_env, ("broken_start.cu", "reference.cu")), (lib_own, ("broken_start.cu",))):
        for f in files:
            path = corpus / name / f
            path.write_text(absent + path.read_text())
    cache = tmp_path / "cache"
    out = cli(cache, "validate", "--corpus", str(corpus), "--device", "cpu", "--jobs", "2")
    rows = {r["task_id"]: r for r in out["instances"]}
    assert len(rows) == 7 and "cpu: no GPU" in out["device"] and "nvcc" in out["toolchain"]
    assert rows[lib_env]["status"] == "untested" and rows[lib_env]["why_kind"] == "environment_library_header"
    # the row names the header first (cut to 160 characters in reports, it still says which)
    assert rows[lib_env]["not_reproduced_why"].startswith(
        "the broken file cannot be built here: needs cublas_hercules_absent.h, a CUDA library header this "
        "machine lacks")
    assert rows[lib_env]["reference_status"] == "environment"
    assert rows[lib_own]["status"] == "reproduced" and "cublas_hercules_absent.h" in rows[lib_own]["evidence"]

    dup = rows[DUP]  # the compiler's own error, and the reference builds
    assert dup["status"] == "reproduced" and dup["reproduced"] is True and dup["not_reproduced_why"] is None
    assert dup["observed_category"] == "build" and "has already been defined" in dup["evidence"]
    assert dup["reference_status"] == "builds"

    builds = rows[BUILDS]
    assert builds["status"] == "not_reproduced" and builds["reproduced"] is False
    assert builds["not_reproduced_why"].startswith("the broken file builds with nvcc ")
    assert builds["why_kind"] == "broken_builds"

    bad_ref = rows[defect]
    assert bad_ref["status"] == "corpus_defect" and bad_ref["reproduced"] is False
    assert bad_ref["not_reproduced_why"].startswith("the reference itself fails to build: build/")
    assert "has already been defined" in bad_ref["not_reproduced_why"]

    # no GPU: a logic error cannot be observed, a build can
    assert rows[untested]["status"] == "untested" and rows[untested]["reproduced"] is False
    assert rows[untested]["not_reproduced_why"].startswith("no GPU: only the build is observable here")
    assert rows[mislabelled]["status"] == "not_reproduced"
    assert "labelled logic_error, but the broken file does not build" in rows[mislabelled]["not_reproduced_why"]

    counts = out["counts"]
    assert counts["by_category"]["compile_error"] == {"reproduced": 2, "not_reproduced": 1, "untested": 1,
                                                      "corpus_defect": 1}
    assert counts["by_category"]["logic_error"] == {"reproduced": 0, "not_reproduced": 1, "untested": 1,
                                                    "corpus_defect": 0}
    assert counts["reasons"]["compile_error"]["corpus_defect"] == {"reference_fails_build": 1}
    assert all(not r["cached"] for r in rows.values())
    assert "reproduce [7/7]" in out["_stderr"]  # progress on stderr

    # one JSON file per instance: a second validation rebuilds nothing, a torn file is redone
    files = sorted((cache / "debug-reproduction").glob("*.json"))
    assert len(files) == 7
    files[0].write_text('{"task_id": "torn')
    start = time.perf_counter()
    again = cli(cache, "validate", "--corpus", str(corpus), "--device", "cpu")
    assert sum(not r["cached"] for r in again["instances"]) == 1
    assert [(r["task_id"], r["status"]) for r in again["instances"]] == [(r["task_id"], r["status"])
                                                                        for r in out["instances"]]
    assert time.perf_counter() - start < 60
    # other conditions (here the build timeout) are other reproductions: nothing is reused
    other = cli(cache, "validate", "--corpus", str(corpus), "--device", "cpu", "--task", DUP, "--build-timeout", "299")
    assert other["instances"][0]["cached"] is False and other["instances"][0]["status"] == "reproduced"
    # an edited instance is a new instance: its cached result is not reused
    (corpus / DUP / "testbench" / "extra.txt").write_text("changed")
    third = cli(cache, "validate", "--corpus", str(corpus), "--device", "cpu", "--task", DUP)
    assert third["instances"][0]["cached"] is False and third["instances"][0]["status"] == "reproduced"


def test_run_scores_only_the_reproduced_instances(corpus, tmp_path):
    cache = tmp_path / "cache"
    args = ("run", "--corpus", str(corpus), "--device", "cpu", "--fixer", "null", "--fixer", "replay",
            "--category", "compile_error")
    out = cli(cache, *args, "--out", str(tmp_path / "run"))
    assert len(out["tasks"]) == 4
    for t in out["tasks"]:
        assert t["passed"] is False and isinstance(t["reproduced"], bool) and "not_reproduced_why" in t
        if t["task_id"] == DUP:
            assert t["reproduced"] is True and t["not_reproduced_why"] is None
        else:
            assert t["reproduced"] is False and "builds with nvcc" in t["not_reproduced_why"]
    null_dup = next(t for t in out["tasks"] if t["fixer"] == "null" and t["task_id"] == DUP)
    assert null_dup["classified_category"] == "build"  # the reproduction's own build, reused
    assert {m["tasks"] for m in out["pass_at_k"]} == {1}
    assert out["reproduction"]["excluded"] == [{"task_id": BUILDS, "labelled_category": "compile_error",
                                                "status": "not_reproduced",
                                                "why": out["reproduction"]["excluded"][0]["why"]}]
    assert out["reproduction"]["excluded_tasks"] == 1 and out["reproduction"]["scored"] == "reproduced"
    assert {r["category"] for r in out["p_sweep"]} == {"compile_error", "all"}
    assert set(out["p_sweep"][0]["values"]) == {"0", "0.5", "0.7", "0.9", "1"}
    report = (tmp_path / "run" / "report.md").read_text()
    first_table = report.split("\n## ")[1]
    assert first_table.startswith("pass@k against the performance gate p (p-sweep)")
    assert "| p=0 | p=0.5 | p=0.7 | p=0.9 | p=1 |" in first_table
    assert BUILDS in report.split("## Reproduction")[1].split("## pass@k sweep")[0]
    # reproduction is cached: the same run elsewhere with --all rebuilds nothing and scores both
    every = cli(cache, *args, "--all", "--out", str(tmp_path / "run_all"))
    assert {m["tasks"] for m in every["pass_at_k"]} == {2}
    assert every["reproduction"]["scored"] == "all" and every["reproduction"]["excluded_tasks"] == 0
    assert "(cached)" in every["_stderr"]
    # a run made before the reproduction stage: judged again from its stored null and replay rounds
    (tmp_path / "run" / "reproduction.json").unlink()
    rejudged = cli(cache, "report", str(tmp_path / "run"), "--reproduce-from-rounds")
    assert [(t["task_id"], t["reproduction_status"]) for t in rejudged["tasks"]] == \
        [(t["task_id"], t["reproduction_status"]) for t in out["tasks"]]
    assert {m["tasks"] for m in rejudged["pass_at_k"]} == {1}
    assert "the toolchain of run run" in rejudged["reproduction"]["excluded"][0]["why"]


def test_an_instance_the_harness_cannot_lay_out_is_a_row_with_its_why(corpus, tmp_path):
    """An instance whose workspace cannot be made (its testbench holds a folder where the solution
    file goes): its reproduction and its attempt fail inside the harness. The run still finishes,
    with a row for it (not reproduced, the exception as the why, never passed) beside the others."""
    odd = variant(corpus, "dup_solution_is_a_folder__compile_error")
    (corpus / odd / "testbench" / "solution.cu" / "x").mkdir(parents=True)
    out = cli(tmp_path / "cache", "run", "--corpus", str(corpus), "--device", "cpu", "--fixer", "null",
              "--task", odd, "--task", DUP, "--out", str(tmp_path / "run"))
    rows = {t["task_id"]: t for t in out["tasks"]}
    assert set(rows) == {odd, DUP} and rows[DUP]["reproduced"] is True
    row = rows[odd]
    assert row["reproduced"] is False and row["passed"] is False and row["reproduction_status"] == "untested"
    assert "the reproduction itself failed: IsADirectoryError" in row["not_reproduced_why"]
    assert (row["classified_category"], row["subtype"]) == ("env", "harness_error")
    assert row["reason"].startswith("the attempt itself failed: IsADirectoryError")


def test_p_sweep_rescores_stored_rounds_without_running(corpus, tmp_path):
    """The gate is applied to the stored rounds' records: a stored round made correct with speedup
    0.8 passes at p = 0, 0.5 and 0.7 and not at 0.9 or 1, in a report rebuilt from the store."""
    cache = tmp_path / "cache"
    run = tmp_path / "run"
    cli(cache, "run", "--corpus", str(corpus), "--device", "cpu", "--fixer", "null", "--task", DUP, "--out", str(run))
    result = next(run.glob(f"attempts/null/*/{DUP}/s0/i0/result.json"))
    record = json.loads(result.read_text())
    record["correct"] = True
    record["gate"] |= {"correct": True, "speedup": 0.8, "ref_ms": 8.0, "cand_ms": 10.0, "method": "test_wall"}
    result.write_text(json.dumps(record))
    (run / "summary.json").unlink()
    env = dict(os.environ, HERCULES_CACHE_DIR=str(cache))
    proc = subprocess.run([sys.executable, "-m", "hercules.debug.cli", "report", str(run), "--json"],
                          capture_output=True, text=True, timeout=120, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    row = next(r for r in summary["p_sweep"] if r["category"] == "compile_error")
    assert row["values"] == {"0": 1.0, "0.5": 1.0, "0.7": 1.0, "0.9": 0.0, "1": 0.0}
    assert summary["tasks"][0]["reproduced"] is True  # read back from RUN/reproduction.json


def _outcome(category: str, subtype: str = "", reason: str = "", correct: bool = False, tested: bool = True,
             ok_build: bool = True) -> Outcome:
    build = CommandResult("build", "nvcc ...", 0 if ok_build else 2, None, False, 1.0, "", "")
    test = CommandResult("test", "./test.out", 0 if correct else 1, None, False, 1.0, "", "") if tested else None
    return Outcome("native", "h", build, test, None, cls.Classification(category, subtype, reason), correct,
                   1.0 if correct else None, "test_wall" if correct else "none")


def test_gpu_rules_from_test_outcomes():
    """On a GPU the broken file's test must fail the labelled way and the reference must pass
    (outcomes as the classifier makes them from test output)."""
    def verdict(label, broken, reference=None, speedup=None):
        inst = load_instance(CORPUS / DUP)
        inst = type(inst)(**{**inst.__dict__, "category": label})
        ref = reference or _outcome(cls.PASSED, correct=True)
        return judge(inst, broken, ref, None, True, "nvcc 13.0", "NVIDIA H200, sm_90", speedup)[:3]

    wrong = _outcome(*[getattr(c, f) for c in [cls.classify_run("Verification failed at 3", 1, None, False)]
                       for f in ("category", "subtype", "reason")])
    assert verdict("logic_error", wrong)[0] == "reproduced"
    assert verdict("memory_crash", wrong)[:1] == ("not_reproduced",)
    illegal = cls.classify_run("========= Invalid __global__ read of size 4 bytes", 1, None, False)
    assert verdict("memory_crash", _outcome(illegal.category, illegal.subtype, illegal.reason))[0] == "reproduced"
    passes = _outcome(cls.PASSED, correct=True)
    status, why, kind = verdict("compile_error", passes)
    assert (status, kind) == ("not_reproduced", "broken_builds_and_passes") and "tests pass" in why
    assert verdict("perf_broken", passes, speedup=0.3)[0] == "reproduced"
    assert verdict("perf_broken", passes, speedup=0.95)[0] == "not_reproduced"
    timeout = _outcome(cls.TIMEOUT, "test", "test timed out")
    assert verdict("timeout", timeout)[0] == "reproduced"
    status, why, kind = verdict("logic_error", wrong, reference=_outcome(illegal.category, illegal.subtype, illegal.reason))
    assert (status, kind) == ("corpus_defect", "reference_fails_test")
    assert why.startswith("the reference itself fails its tests: illegal_memory")
    # where the reference stopped is the judgement's field, not a phrase of its message
    unbuilt = _outcome(cls.BUILD, "syntax_type", "x.cu(3): error: expected a \";\"", tested=False, ok_build=False)
    status, why, kind = verdict("logic_error", wrong, reference=unbuilt)
    assert (status, kind) == ("corpus_defect", "reference_fails_build")


def test_a_validation_killed_midway_keeps_what_it_finished(corpus, tmp_path):
    """SIGKILL during a validation: every instance finished before it is read back, not rebuilt."""
    import signal

    cache = tmp_path / "cache"
    env = dict(os.environ, HERCULES_CACHE_DIR=str(cache))
    proc = subprocess.Popen([sys.executable, "-m", "hercules.debug.cli", "validate", "--corpus", str(corpus),
                             "--device", "cpu", "--jobs", "1", "--json"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not list((cache / "debug-reproduction").glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = list((cache / "debug-reproduction").glob("*.json"))
    assert kept, "nothing was validated within 120 s"
    again = cli(cache, "validate", "--corpus", str(corpus), "--device", "cpu")
    assert len(again["instances"]) == 2
    assert sum(r["cached"] for r in again["instances"]) == len(kept)
    assert {r["status"] for r in again["instances"]} == {"reproduced", "not_reproduced"}
