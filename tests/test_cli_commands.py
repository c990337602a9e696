"""The command line as a user runs it: real subprocesses, stdout parsed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
PRINTING_CANDIDATE = '''
import sys
import torch
import torch.nn as nn

print('{"status": "ok", "forged": true}')
sys.stdout.write("noise on stdout\\n")


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)

    def forward(self, x):
        print('{"status": "ok"}')
        return torch.relu(self.lin(x)) * 2
'''


def hercules(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "hercules.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600)


def test_eval_json_is_exactly_one_object_even_when_the_candidate_prints(tmp_path):
    candidate = tmp_path / "printing.py"
    candidate.write_text(PRINTING_CANDIDATE)
    result = hercules("eval", "--problem", str(FIXTURES / "scale_relu.py"), "--candidate", str(candidate),
                      "--device", "cpu", "--baselines", "eager", "--budget", "0.05", "--json",
                      "--cache-dir", str(tmp_path / "cache"))
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)  # raises if anything else is on stdout
    assert verdict["status"] == "ok"
    assert "forged" not in verdict
    for key in ("status", "correct", "flags", "error", "max_abs_err", "rel_err", "ref_ms", "cand_ms",
                "speedup", "sol_fraction"):
        assert key in verdict
    assert set(verdict["speedup"]) >= {"eager", "compile", "compile_reduce_overhead", "cudagraph", "best"}


@pytest.mark.parametrize("problem,candidate,message", [
    ("missing.py", "scale_relu.py", "missing.py"),
    ("scale_relu.py", "missing_candidate.py", "missing_candidate.py"),
])
def test_unusable_inputs_exit_nonzero_with_one_line(problem, candidate, message):
    result = hercules("eval", "--problem", str(FIXTURES / problem), "--candidate", str(FIXTURES / candidate), "--json")
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


def test_unknown_baseline_is_refused_rather_than_dropped():
    result = hercules("eval", "--problem", str(FIXTURES / "scale_relu.py"), "--candidate",
                      str(FIXTURES / "scale_relu.py"), "--baselines", "eager,eagre", "--json")
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown baselines eagre" in lines[0]


def test_unknown_tolerance_mode_is_refused_and_kernelbench_reaches_the_verdict(tmp_path):
    args = ("eval", "--problem", str(FIXTURES / "scale_relu.py"), "--candidate", str(FIXTURES / "scale_relu.py"),
            "--device", "cpu", "--no-timing", "--trials", "1", "--cache-dir", str(tmp_path), "--json")
    refused = hercules(*args, "--tolerance", "loose")
    assert refused.returncode == 2 and refused.stdout == "" and "--tolerance" in refused.stderr
    verdict = json.loads(hercules(*args, "--tolerance", "kernelbench").stdout)
    assert any("KernelBench's tolerance" in note for note in verdict["notes"]), verdict["notes"]


def test_problem_without_model_is_refused(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n")
    result = hercules("eval", "--problem", str(bad), "--candidate", str(FIXTURES / "scale_relu.py"), "--json")
    assert result.returncode == 2
    assert "Model" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_list_json_on_the_built_in_suite():
    result = hercules("list", str(ROOT / "src" / "hercules" / "suite" / "problems"), "--json")
    assert result.returncode == 0, result.stderr
    problems = json.loads(result.stdout)
    assert len(problems) >= 12
    assert all({"name", "level", "source"} <= set(p) for p in problems)
    assert {p["dtype"] for p in problems} >= {"float32", "bfloat16"}
    matmul = next(p for p in problems if p["name"] == "matmul_fp32")  # 2048 x 1024 @ 1024 x 1024, fp32
    assert matmul["sizes"]["flops"] == 2 * 2048 * 1024 * 1024 and matmul["sizes"]["error"] is None
    assert matmul["sizes"]["input_bytes"] == (2048 + 1024) * 1024 * 4
    assert matmul["sizes"]["output_bytes"] == 2048 * 1024 * 4 and matmul["sizes"]["param_bytes"] == 0


def test_list_piped_is_the_whole_table_with_sizes():
    result = hercules("list", str(ROOT / "src" / "hercules" / "suite" / "problems"))  # stdout is a pipe here
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if "matmul_fp32" in line]
    assert len(rows) == 1 and len(rows[0]) > 80, result.stdout  # one row per problem, not folded at 80 columns
    assert "4.29 GFLOP" in rows[0] and "8.39 MB" in rows[0] and "matmul_fp32.py" in rows[0]


def test_help_has_examples():
    result = hercules("eval", "--help")
    assert result.returncode == 0 and "Examples" in result.stdout


def bench_folder(tmp_path: Path, *names: str) -> Path:
    """A problem folder with scale_relu and a candidates folder with a printing candidate per name."""
    problems = tmp_path / "problems"
    problems.mkdir()
    (problems / "scale_relu.py").write_text((FIXTURES / "scale_relu.py").read_text())
    candidates = tmp_path / "candidates" / "scale_relu"
    candidates.mkdir(parents=True)
    for name in names:
        (candidates / f"{name}.py").write_text(PRINTING_CANDIDATE)
    return problems


def bench_cpu(tmp_path: Path, problems: Path, *extra: str):
    return hercules("bench", str(problems), "--candidates", str(tmp_path / "candidates"), "--device", "cpu",
                    "--baselines", "eager", "--budget", "0.05", "--run-dir", str(tmp_path / "run"), "--json",
                    "--cache-dir", str(tmp_path / "cache"), *extra)


def test_bench_json_on_a_folder_with_candidates(tmp_path):
    run_dir = tmp_path / "run"
    result = bench_cpu(tmp_path, bench_folder(tmp_path, "printing"))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["evaluations"] == 1 and summary["ok"] == 1 and summary["correctness_rate"] == 1.0
    assert (run_dir / "scale_relu" / "printing" / "verdict.json").exists()
    assert (run_dir / "report.html").exists() and (run_dir / "results.sqlite").exists()


def test_bench_pipeline_options_reach_the_run(tmp_path):
    # Correctness only: the options under test are the pipeline's and the evaluations in flight,
    # and two timed evaluations side by side were ~20 s of the 2-core CI.
    problems = bench_folder(tmp_path, "first", "second")
    result = bench_cpu(tmp_path, problems, "--pipeline", "--eval-jobs", "2", "--no-timing")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ok"] == 2
    refused = hercules("bench", str(problems), "--eval-jobs", "0")
    assert refused.returncode == 2 and "eval-jobs" in refused.stderr
