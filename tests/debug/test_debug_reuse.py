"""Attempts that take the reproduction's recorded run (``reuse``), on CPU with real nvcc builds.

cuda_227's broken file fails to build (an nvcc error) and its reference builds; cuda_104's broken
file builds: the two outcomes a CPU machine sees, a second or so of nvcc each. A reused attempt
must be the record a real attempt makes, field by field, apart from the time it took now and
the reuse marker; anything that makes it another run (the toolchain, the instance's files, the
options) must make the attempt run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hercules.debug import classifier as cls
from hercules.debug.attempt import Outcome, RunOptions
from hercules.debug.corpus import load_instance
from hercules.debug.fixers import NullFixer
from hercules.debug.protocol import Protocol
from hercules.debug.reproduce import ReproductionCache, reproduce
from hercules.debug.reuse import RecordedRuns, current_conditions
from hercules.debug.runner import Benchmark
from hercules.debug.store import DebugStore
from hercules.debug.toolchain import toolchain
from hercules.debug.workspace import CommandResult

CORPUS = Path(__file__).resolve().parents[2] / "corpora" / "cudabeaver"
DUP = "cuda_227__compile_error__d12728ed"  # broken: a kernel defined twice; reference builds
BUILDS = "cuda_104__compile_error__f8160fc8"  # the broken file builds with CUDA 13.0

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def _cli(cache: Path, *args: str) -> dict:
    env = dict(os.environ, HERCULES_CACHE_DIR=str(cache))
    proc = subprocess.run([sys.executable, "-m", "hercules.debug.cli", *args, "--json"], capture_output=True,
                          text=True, timeout=600, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _rounds(run: Path) -> dict[tuple[str, str], dict]:
    out = {}
    for path in run.glob("attempts/*/*/*/s0/i0/result.json"):
        record = json.loads(path.read_text())
        out[(record["fixer"], record["task_id"])] = record
    return out


def _without(value, keys: set[str]):
    """The record without the keys that differ between two runs of the same thing by nature."""
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


def test_reused_attempts_equal_real_ones_and_no_reuse_runs_them(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in (DUP, BUILDS):
        shutil.copytree(CORPUS / name, corpus / name)
    cache, run = tmp_path / "cache", tmp_path / "run"
    args = ("run", "--corpus", str(corpus), "--device", "cpu", "--fixer", "null", "--fixer", "replay", "--out", str(run))
    reused = _cli(cache, *args)
    taken = _rounds(run)
    assert len(taken) == 4 and {r["reused_from"] for r in taken.values()} == {"reproduction"}
    assert {(k[0], r["reused"]["run"]) for k, r in taken.items()} == {("null", "broken"), ("replay", "reference")}
    assert not list(run.rglob("build.stdout"))  # nothing was built for the attempts
    assert {t["reused_from"] for t in reused["tasks"]} == {"reproduction"}
    assert reused["reuse"]["reused"] == {"reproduction": 4} and reused["reuse"]["enabled"] is True
    assert "## Reused runs" in (run / "report.md").read_text()

    # the same run folder with --no-reuse: the rounds that took a recorded run run for real now
    real = _cli(cache, *args, "--no-reuse")
    ran = _rounds(run)
    assert {r["reused_from"] for r in ran.values()} == {None}
    assert len(list(run.rglob("build.stdout"))) == 4
    assert real["reuse"] == {"rounds": 4, "reused": {}, "run": 4, "enabled": False, "refused": {}}
    markers = {"reused_from", "reused", "seconds"}  # seconds: the attempt's and each command's time
    for key, record in taken.items():
        assert _without(record, markers) == _without(ran[key], markers), key
    assert taken[("null", DUP)]["category"] == "build" and taken[("null", BUILDS)]["category"] == "untested"
    row = {"reused_from", "reused_rounds"}
    assert [_without(t, row) for t in reused["tasks"]] == [_without(t, row) for t in real["tasks"]]


def _bench(tmp_path: Path, tc, opts: RunOptions) -> Benchmark:
    return Benchmark(DebugStore(tmp_path / f"run-{len(list(tmp_path.glob('run-*')))}"), tc, opts,
                     {"null": NullFixer()}, [Protocol.parse("n=1,iter=1")], jobs=1)


@pytest.fixture
def reproduced(tmp_path):
    """cuda_227 reproduced here for real: (toolchain, options, instance, reproduction)."""
    cache_dir = tmp_path / "cache"
    tc = toolchain("cpu", cache_dir)
    opts = RunOptions(device="cpu", cache_dir=cache_dir)
    inst = load_instance(CORPUS / DUP)
    rep = reproduce(inst, tc, opts, ReproductionCache(tmp_path / "repro"))
    assert rep.status == "reproduced" and rep.conditions is not None
    return tc, opts, inst, rep


def test_another_toolchain_other_files_or_options_make_the_attempt_run(tmp_path, reproduced):
    tc, opts, inst, rep = reproduced

    same = _bench(tmp_path, tc, opts)
    assert same.use_reproductions([inst], [rep]) == {}
    traj = same.trajectory("null", same.protocols[0], inst, 0)
    assert traj.final["reused_from"] == "reproduction" and traj.final["category"] == "build"

    # the same CUDA toolkit reached through another folder is another toolchain identity
    other_cuda = tmp_path / "cuda"
    other_cuda.symlink_to(tc.cuda_home)
    env = dict(tc.env) | {"CUDA_HOME": str(other_cuda), "PATH": f"{other_cuda}/bin{os.pathsep}{dict(tc.env)['PATH']}"}
    other_tc = dataclasses.replace(tc, cuda_home=other_cuda, env=tuple(sorted(env.items())))
    bench = _bench(tmp_path, other_tc, opts)
    refused = bench.use_reproductions([inst], [rep])
    assert "toolchain:" in refused[DUP] and str(other_cuda) in refused[DUP]
    traj = bench.trajectory("null", bench.protocols[0], inst, 0)
    assert traj.final["reused_from"] is None and traj.final["category"] == "build"  # built for real
    assert traj.final["outcome"]["build"]["stdout"] + traj.final["outcome"]["build"]["stderr"]

    # another test timeout: the outcome of a test may depend on it
    refused = _bench(tmp_path, tc, dataclasses.replace(opts, test_timeout_s=60.0)).use_reproductions([inst], [rep])
    assert "test_timeout_s: 60.0 vs 180.0" in refused[DUP]

    # the instance's files: its broken file edited, or only its testbench (the same broken file)
    for what, path in (("broken", "broken_start.cu"), ("testbench", "testbench/extra.txt")):
        copy = tmp_path / what / DUP
        shutil.copytree(CORPUS / DUP, copy)
        (copy / path).write_text(((copy / path).read_text() if (copy / path).exists() else "") + "\n// edited\n")
        edited = load_instance(copy)
        bench = _bench(tmp_path, tc, opts)
        assert bench.use_reproductions([edited], [rep]) == {DUP: "the instance's files changed since its reproduction"}
        traj = bench.trajectory("null", bench.protocols[0], edited, 0)
        assert traj.final["reused_from"] is None and traj.final["category"] == "build", what


def test_a_tested_outcome_stands_for_one_attempt_a_build_failure_for_all(reproduced):
    """A recorded test run is one observation: a second sample of the same file runs."""
    tc, opts, inst, rep = reproduced
    build = CommandResult("build", "nvcc ...", 0, None, False, 1.0, "", "")
    test = CommandResult("test", "./test.out", 1, None, False, 2.0, "Verification failed at 3", "")
    wrong = cls.classify_run(test.text, 1, None, False)
    tested = Outcome("native", rep.broken["code_hash"], build, test, None, wrong, False, None, "none")
    recorded = RecordedRuns()
    now = current_conditions(tc, opts, inst.kind)
    assert recorded.admit(inst, dataclasses.replace(rep, broken=tested.to_json()), now) is None
    first = recorded.take(DUP, tested.code_hash)
    assert first is not None and first.outcome == tested and not first.repeatable
    assert recorded.take(DUP, tested.code_hash) is None
    # the reproduction's own (build failure) record: every attempt of the file may take it
    again = RecordedRuns()
    assert again.admit(inst, rep, now) is None
    assert all(again.take(DUP, rep.broken["code_hash"]).repeatable for _ in range(3))
