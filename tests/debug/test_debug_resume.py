"""A debug run over several short calls: stopped promptly by SIGINT, resumed from what came back.

Real nvcc builds (cuda_227 builds in about a second each way), real subprocesses: the CLI and
benchmarks/debug_h200.sh as the GPU machine runs them, with DEVICE=cpu.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "corpora" / "cudabeaver"
DUP = "cuda_227__compile_error__d12728ed"

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def _script(out: Path, work: Path, corpus: Path, **env: str) -> subprocess.CompletedProcess:
    full = dict(os.environ, OUT=str(out), WORK=str(work), DEVICE="cpu", FIXERS="null", JOBS="1", **env)
    full.pop("HERCULES_CACHE_DIR", None)
    full.pop("RUN_DIR", None)
    return subprocess.run(["bash", str(ROOT / "benchmarks" / "debug_h200.sh"), str(corpus)], capture_output=True,
                          text=True, timeout=120, check=False, env=full)


def _first_call(tmp_path: Path) -> Path:
    """One instance's corpus, run once into tmp_path/out1; returns the corpus folder."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copytree(CORPUS / DUP, corpus / DUP)
    first = _script(tmp_path / "out1", tmp_path / "work1", corpus)
    assert first.returncode == 0, first.stderr[-3000:]
    return corpus


def test_script_packs_its_cache_and_a_second_call_reuses_it(tmp_path):
    corpus = _first_call(tmp_path)
    out1 = tmp_path / "out1"
    files = sorted(p.name for p in out1.iterdir())
    assert files == ["debug_h200_tables.json", "debug_h200_tables.md", "report.md", "repro_cache.tgz", "run.log",
                     "run_slim.tgz", "summary.json"]  # the run folder and the cache stay outside $OUT
    with tarfile.open(out1 / "repro_cache.tgz") as tar:
        assert [Path(n).suffix for n in tar.getnames() if tar.getmember(n).isfile()] == [".json"]
    log1 = (out1 / "run.log").read_text()
    assert f"reproduce [1/1] {DUP}: reproduced\n" in log1
    assert "progress: reproductions 1/1 cached (0 to do); attempts 1/1 finished (0 to do); complete" in log1

    carry = tmp_path / "carry"  # what the next call carries: the two archives, nothing else
    carry.mkdir()
    for name in ("repro_cache.tgz", "run_slim.tgz"):
        shutil.copy(out1 / name, carry / name)
    second = _script(tmp_path / "out2", tmp_path / "work2", corpus, CARRY=str(carry))
    assert second.returncode == 0, second.stderr[-3000:]
    assert "carried: 1 reproduction records, 1 stored rounds" in second.stderr
    log2 = (tmp_path / "out2" / "run.log").read_text()
    assert f"reproduce [1/1] {DUP}: reproduced (cached)" in log2  # a fresh cache folder, filled from the archive
    assert f"attempt [1/1] [null] {DUP}: build (stored)" in log2  # the round read back, not built again
    assert not list((tmp_path / "work2" / "run" / "attempts").rglob("build.stdout"))
    summary = json.loads((tmp_path / "out2" / "summary.json").read_text())
    assert summary["progress"]["attempts"] == {"trajectories": 1, "finished": 1, "to_do": 0}


def test_sigint_stops_a_run_in_seconds_and_keeps_what_finished(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copytree(CORPUS / DUP, corpus / DUP)
    slow = "slow_build__compile_error"  # its build sleeps a minute: in flight when the stop comes
    shutil.copytree(CORPUS / DUP, corpus / slow)
    pid_file = tmp_path / "slow.pid"
    for name, key, value in (("instance.json", "id", slow), ("input.json", "task_id", slow),
                             ("input.json", "build_command", f"echo $$ > {pid_file}; exec sleep 60")):
        info = json.loads((corpus / slow / name).read_text())
        info[key] = value
        (corpus / slow / name).write_text(json.dumps(info))
    cache = tmp_path / "cache"
    env = dict(os.environ, HERCULES_CACHE_DIR=str(cache))
    proc = subprocess.Popen([sys.executable, "-m", "hercules.debug.cli", "run", "--corpus", str(corpus), "--fixer",
                             "null", "--device", "cpu", "--jobs", "2", "--out", str(tmp_path / "run"), "--json"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    records = cache / "debug-reproduction"
    deadline = time.monotonic() + 120
    while not (pid_file.is_file() and list(records.glob("*.json"))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid_file.is_file(), "the slow build never started"
    sleeper = int(pid_file.read_text())
    stopped = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # what ``timeout --signal=INT`` does: the run's group
    out, err = proc.communicate(timeout=30)
    took = time.monotonic() - stopped
    assert proc.returncode == 130, err[-3000:]
    assert took < 10, f"{took:.1f} s from SIGINT to exit"
    try:  # the build's own session was killed, not left sleeping
        state = Path(f"/proc/{sleeper}/status").read_text()
        assert "State:\tZ" in state, state
    except FileNotFoundError:
        pass
    assert len(list(records.glob("*.json"))) == 1  # the finished one kept, the killed one not recorded
    summary = json.loads(out)
    assert summary["progress"]["interrupted"] is True
    assert summary["progress"]["reproductions"] == {"instances": 2, "cached": 1, "to_do": 1}
    assert summary["progress"]["attempts"] == {"trajectories": 2, "finished": 0, "to_do": 2}
    assert "debug run progress: reproductions 1/2 cached (1 to do)" in err
    assert (tmp_path / "run" / "report.md").is_file()


def test_a_carried_round_stored_as_killed_by_the_stop_is_run_again(tmp_path):
    """A round kept as 'worker killed by SIGINT' (the call's time guard, stored by a run whose stop
    came late) is the stop, not the fixer's outcome: the next call builds it again and counts it."""
    corpus = _first_call(tmp_path)
    slim = tmp_path / "slim"
    with tarfile.open(tmp_path / "out1" / "run_slim.tgz") as tar:
        tar.extractall(slim, filter="data")
    [stored] = list(slim.rglob("attempts/null/*/*/s0/i0/result.json"))
    record = json.loads(stored.read_text())
    honest_category = record["category"]
    record |= {"category": "crash", "reason": "build: worker killed by SIGINT ([1/3] g++ ...)"}
    stored.write_text(json.dumps(record))
    carry = tmp_path / "carry"
    carry.mkdir()
    shutil.copy(tmp_path / "out1" / "repro_cache.tgz", carry / "repro_cache.tgz")
    with tarfile.open(carry / "run_slim.tgz", "w:gz") as tar:
        tar.add(slim, arcname=".")
    second = _script(tmp_path / "out2", tmp_path / "work2", corpus, CARRY=str(carry))
    assert second.returncode == 0, second.stderr[-3000:]
    log2 = (tmp_path / "out2" / "run.log").read_text()
    assert f"attempt [1/1] [null] {DUP}: {honest_category} (" in log2  # run again: not "(stored)", not a crash
    assert "killed by SIGINT" not in (tmp_path / "out2" / "debug_h200_tables.md").read_text()
    summary = json.loads((tmp_path / "out2" / "summary.json").read_text())
    assert summary["progress"]["attempts"] == {"trajectories": 1, "finished": 1, "to_do": 0}
