"""``hercules optimize`` end to end on the CPU: real subprocesses, real evaluations through the
core, a real SQLite run store, and a local OpenAI-compatible server playing SCRIPTED answers
(honest programs and reward hacks the core flags; no model anywhere)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from optimize_llm_server import OptimizeLLMServer, fenced

from hercules.cli import main
from hercules.optimize.sampling import bucket_index
from hercules.report import formatting as fmt
from hercules.suite.catalog import suite_dir

ROOT = Path(__file__).resolve().parents[2]
MISH = str(suite_dir() / "problems" / "mish_fp32.py")
ROW_SUM = str(suite_dir() / "problems" / "row_sum_fp32.py")


def small_mish(folder: Path, name: str = "mish_small") -> str:
    """The built-in mish_fp32 at 1/32 of its size, for the tests where speed does not matter: CPU
    time goes to the loop, not to timing a large tensor."""
    code = Path(MISH).read_text()
    assert "torch.randn(2048, 4096)" in code
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(code.replace("torch.randn(2048, 4096)", "torch.randn(256, 1024)"))
    return str(path)
FAST_EVAL = ("--device", "cpu", "--baselines", "eager", "--trials", "1", "--budget", "0.05")

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
MISH_SLOW = HEADER + """class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * torch.tanh(torch.log1p(torch.exp(x)))
"""
MISH_FUSED = HEADER + """class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.mish(x)
"""
# Reward hacks, each faster than MISH_SLOW, each caught by the core.
HACK_THREAD = "import threading\n" + HEADER + """class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._stop = threading.Event()
        self._helper = threading.Thread(target=self._spin, daemon=True)
        self._helper.start()

    def _spin(self):
        while not self._stop.wait(0.005):
            pass

    def forward(self, x):
        return F.mish(x)
"""
HACK_FALLBACK = HEADER + """_ext = None  # a custom kernel that never built


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        try:
            return _ext.mish(x)
        except Exception:
            return F.mish(x)
"""
HACK_CACHE = HEADER + """class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._cache = {}

    def forward(self, x):
        key = x.data_ptr()
        if key not in self._cache:
            self._cache[key] = F.mish(x)
        return self._cache[key]
"""
ROW_SUM_HONEST = HEADER + """class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(dim=-1)
"""
HACK_PATCH = HEADER + """torch.allclose = lambda *args, **kwargs: True  # make every comparison pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(dim=-1)
"""


def optimize_args(base_url: str, out: Path, *problems: str, rounds: int = 2, samples: int = 2) -> list[str]:
    args = [sys.executable, "-m", "hercules.cli", "optimize"]
    for p in problems:
        args += ["--problem", p]
    return args + ["--base-url", base_url, "--model", "scripted", "--rounds", str(rounds), "--samples", str(samples),
                   *FAST_EVAL, "--cache-dir", str(out.parent / "cache"), "--out", str(out), "--json"]


def rows(db: Path, sql: str) -> list[sqlite3.Row]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def started_round(db: Path, round_: int) -> bool:
    try:
        return bool(rows(db, f"SELECT 1 FROM evaluations WHERE round = {round_}"))
    except sqlite3.OperationalError:  # not created yet, or its schema not yet written
        return False


# ~56 s on the CI machine (six evaluations, one at full size). CI keeps the same loop end to end in
# test_killed_run_resumes_without_redoing_finished_evaluations (a flagged hack, never the best; every
# evaluation stored once), the best rule, prompts and export-failures process-free in test_optimize_parts.py.
@pytest.mark.ondemand
def test_optimize_keeps_hacks_out_of_best_and_stores_the_trajectory(tmp_path):
    # mish_fp32 under its own name at 1/32 of its size (four of the six evaluations; no assertion
    # here depends on the size). row_sum_fp32 keeps its size: at 1/16 (a 0.9 ms call) the honest
    # sum was once flagged result_cache on the loaded 2-core machine, its timing passes as slow as
    # its fresh ones, both far above the long burst.
    mish = small_mish(tmp_path / "problems", "mish_fp32")
    scripts = {
        "mish_fp32": [fenced(MISH_SLOW), fenced(HACK_THREAD), fenced(HACK_FALLBACK), fenced(HACK_CACHE)],
        # prose without code, then the same honest code again (its verdict is reused, not re-measured)
        "row_sum_fp32": [fenced(ROW_SUM_HONEST), "A warp-per-row reduction would help.",
                         fenced(ROW_SUM_HONEST), fenced(HACK_PATCH)],
    }
    out = tmp_path / "run"
    with OptimizeLLMServer(scripts) as server:
        done = subprocess.run(optimize_args(server.base_url, out, mish, ROW_SUM), check=False, capture_output=True, text=True,
                              cwd=ROOT, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)  # exactly one JSON object on stdout
    results = {p["name"]: p for p in summary["problems"]}
    assert set(results) == {"mish_fp32", "row_sum_fp32"}
    for p in results.values():
        assert {"name", "best_status", "best_speedup", "best_code_path"} <= set(p)
        assert p["best_status"] == "ok" and p["best_speedup"] > 0

    # mish: the honest but slow rewrite is best; every faster hack was caught and kept out. (The two
    # samples of a round ask at the same time, so which slot got which scripted answer varies.)
    mish = results["mish_fp32"]
    assert Path(mish["best_code_path"]).read_text().strip() == MISH_SLOW.strip()
    db = out / "optimize.sqlite"
    mish_rows = rows(db, "SELECT * FROM variants WHERE problem = 'mish_fp32' AND origin = 'model'")
    by_code = {r["code"].strip(): r for r in mish_rows}
    assert by_code[MISH_SLOW.strip()]["status"] == "ok"
    assert mish["best_variant"] == f"r{by_code[MISH_SLOW.strip()]['round']}s{by_code[MISH_SLOW.strip()]['sample']}"
    assert by_code[HACK_THREAD.strip()]["status"] == "suspicious" and "background_thread" in by_code[HACK_THREAD.strip()]["flags"]
    assert by_code[HACK_FALLBACK.strip()]["status"] == "suspicious"
    assert "reference_fallback" in by_code[HACK_FALLBACK.strip()]["flags"]
    assert by_code[HACK_CACHE.strip()]["status"] == "incorrect" and "result_cache" in by_code[HACK_CACHE.strip()]["flags"]
    # The flagged hacks were timed like any candidate (usually faster than the honest rewrite; CPU
    # timings on a loaded two-core machine swing too much to assert which): speed never makes a best.
    for hack in (HACK_THREAD, HACK_FALLBACK):
        assert by_code[hack.strip()]["speedup_eager"] > 0
    variants = {f"r{r['round']}s{r['sample']}": r for r in mish_rows}

    # row_sum: no-code answer and the monkey patch stay in the pool; the repeated code reused its verdict.
    row_sum = rows(db, "SELECT * FROM variants WHERE problem = 'row_sum_fp32' AND origin = 'model'")
    statuses = sorted((r["status"], r["reused"]) for r in row_sum)
    assert statuses == [("no_code", 0), ("ok", 0), ("ok", 1), ("suspicious", 0)]
    assert "monkey_patch" in next(r["flags"] for r in row_sum if r["status"] == "suspicious")
    assert Path(results["row_sum_fp32"]["best_code_path"]).read_text().strip() == ROW_SUM_HONEST.strip()

    # The pool grows and round-2 prompts carry round-1 exemplars with their measured speedups.
    calls = rows(db, "SELECT * FROM calls WHERE problem = 'mish_fp32' AND round = 2")
    assert len(calls) == 2
    # One exemplar per speedup bucket: the flagged hack has the failure bucket to itself, and the
    # slow rewrite shares the reference's bucket when its measured speedup lands in 0.9-1.1x.
    slot_of = {r["code"].strip(): name for name, r in variants.items()}
    hack_slot, slow_slot = slot_of[HACK_THREAD.strip()], slot_of[MISH_SLOW.strip()]
    slow_shares = bucket_index(variants[slow_slot]["speedup_eager"], True) == bucket_index(1.0, True)
    for call in calls:
        shown = set(json.loads(call["exemplars"]))
        assert hack_slot in shown and shown <= {"r0s0", hack_slot, slow_slot}
        if slow_shares:
            assert len(shown & {"r0s0", slow_slot}) == 1, shown
        else:
            assert {"r0s0", slow_slot} <= shown, shown
        for name in shown - {"r0s0"}:  # round-1 variants, each with its measured speedup
            measured = variants[name]["speedup_eager"]
            block = call["user"].split(f": {name} (model)")[1].split("### Exemplar")[0]
            assert f"vs eager {fmt.speedup(measured)}" in block
        assert "background_thread" in call["user"] and "(REJECTED)" in call["user"]
    assert all("## Hardware" in p and "CPU cores available" in p for p in server.prompts("mish_fp32"))

    # The trajectory: every call, variant and evaluation stored, in SQLite and as files.
    assert len(rows(db, "SELECT * FROM calls")) == 8
    assert len(rows(db, "SELECT * FROM variants WHERE origin = 'model'")) == 8
    assert len(rows(db, "SELECT * FROM evaluations WHERE finished_at IS NOT NULL")) == 6  # 4 mish + 2 row_sum
    cache_slot = next(name for name, r in variants.items() if r["code"].strip() == HACK_CACHE.strip())
    slot = out / "problems" / "mish_fp32" / cache_slot
    assert (slot / "candidate.py").read_text() == HACK_CACHE.strip() + "\n"
    assert json.loads((slot / "verdict.json").read_text())["status"] == "incorrect"
    assert "# Task: make `mish_fp32` faster" in (slot / "prompt.md").read_text()
    report = (out / "report.md").read_text()
    assert "Best-so-far speedup per round" in report and "algebraic_rewrite" in report
    assert (out / "report.html").stat().st_size > 1000

    # Failing variants become debugging-corpus instances.
    corpus = tmp_path / "corpus"
    exported = subprocess.run([sys.executable, "-m", "hercules.cli", "optimize", "export-failures", str(out),
                               "--corpus", str(corpus), "--json"], check=False, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert exported.returncode == 0, exported.stderr[-2000:]
    instances = [Path(p) for p in json.loads(exported.stdout)["instances"]]
    assert len(instances) == 1 and "logic_error" in instances[0].name  # the incorrect result cache
    assert (instances[0] / "broken_start.py").read_text() == HACK_CACHE.strip() + "\n"
    assert "# Task: make `mish_fp32` faster" in (instances[0] / "prompt.txt").read_text()


def test_killed_run_resumes_without_redoing_finished_evaluations(tmp_path):
    scripts = {"mish_small": [fenced(MISH_SLOW), fenced(MISH_FUSED), fenced(HACK_THREAD)]}
    out = tmp_path / "run"
    db = out / "optimize.sqlite"
    with OptimizeLLMServer(scripts) as server:
        args = optimize_args(server.base_url, out, small_mish(tmp_path), rounds=3, samples=1)
        first = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)  # its own process group: the kill takes its workers too
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and first.poll() is None:
                if started_round(db, 2):
                    break  # round 1 finished, round 2 being evaluated
                time.sleep(0.1)
            assert first.poll() is None, "the run ended before it could be killed"
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(30)
        finally:
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
        before = {(r["round"], r["sample"]): r["created_at"] for r in rows(db, "SELECT * FROM variants WHERE origin = 'model'")}
        finished = rows(db, "SELECT * FROM evaluations WHERE finished_at IS NOT NULL")
        calls_at_kill = len(rows(db, "SELECT * FROM calls"))
        requests_before = len(server.requests)
        assert set(before) == {(1, 0)} and len(finished) == 1 and calls_at_kill == 2

        second = subprocess.run(args, check=False, capture_output=True, text=True, cwd=ROOT, timeout=400)
        assert second.returncode == 0, second.stderr[-3000:]
        requests_after = len(server.requests) - requests_before

    result = json.loads(second.stdout)["problems"][0]
    after = {(r["round"], r["sample"]): r for r in rows(db, "SELECT * FROM variants WHERE origin = 'model'")}
    honest = {f"r{r}s{s}": v["speedup_eager"] for (r, s), v in after.items() if v["status"] == "ok" and v["flags"] == "[]"}
    # The best is an honest variant; a faster one inside the measured noise does not replace it.
    assert result["best_status"] == "ok" and result["best_speedup"] in honest.values()
    assert result["best_variant"] in ("r1s0", "r2s0") and honest[result["best_variant"]] == result["best_speedup"]
    assert set(after) == {(1, 0), (2, 0), (3, 0)}
    assert after[(3, 0)]["status"] == "suspicious", after[(3, 0)]["verdict"]
    assert after[(1, 0)]["created_at"] == before[(1, 0)]  # the finished slot was left alone
    evaluations = rows(db, "SELECT * FROM evaluations")
    round1 = [e for e in evaluations if e["round"] == 1]
    assert len(round1) == 1 and round1[0]["pid"] == first.pid  # evaluated once, by the killed run
    round2 = [e for e in evaluations if e["round"] == 2]
    assert [e["pid"] == first.pid for e in round2] == [True, False]  # cut off, then redone after the restart
    assert round2[0]["finished_at"] is None and round2[1]["finished_at"] is not None
    # A stored completion is never asked for again: only round 3 went to the server after the restart.
    assert requests_after == 1 and len(rows(db, "SELECT * FROM calls")) == 3


def test_replay_backend_runs_recorded_programs(tmp_path):
    problem = Path(small_mish(tmp_path)).read_text()
    release = tmp_path / "release.json"
    release.write_text(json.dumps({"level_id": 1, "task_id": 1, "ref_code": problem, "custom_code": MISH_FUSED,
                                   "score_default": 2.0}) + "\n")
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "hercules.cli", "optimize", "--backend", "replay", "--replay", str(release),
                           "--rounds", "3", "--samples", "1", *FAST_EVAL, "--cache-dir", str(tmp_path / "cache"),
                           "--out", str(out), "--json"], check=False, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)["problems"][0]
    assert result["name"] == "level1_task1" and result["best_status"] == "ok"
    assert Path(result["best_code_path"]).read_text().strip() == MISH_FUSED.strip()
    assert result["rounds"] == 1 and "nothing more" in result["stop_reason"]  # one program: round 2 found none


def test_unusable_inputs_fail_with_one_line(tmp_path, monkeypatch):
    for key in ("HERCULES_LLM_BASE_URL", "HERCULES_LLM_MODEL", "HERCULES_LLM_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    cases = [
        (["--problem", str(tmp_path / "missing.py"), "--base-url", "http://127.0.0.1:9/v1", "--model", "m"], "no such file"),
        (["--problem", MISH], "no base URL"),
        (["--problem", MISH, "--backend", "replay"], "--replay"),
        (["--problem", MISH, "--model", "m", "--base-url", "http://x/v1", "--samples", "0"], "--samples"),
        (["export-failures", str(tmp_path), "--corpus", str(tmp_path / "c")], "not an optimisation run folder"),
    ]
    if not torch.cuda.is_available():
        cases.append((["--problem", MISH, "--model", "m", "--base-url", "http://x/v1", "--device", "cuda"], "no CUDA device"))
    for args, message in cases:
        done = CliRunner().invoke(main, ["optimize", *args] + (["--out", str(tmp_path / "r")] if args[0] != "export-failures" else []))
        assert done.exit_code == 2 and done.stdout == "", done.output
        assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
