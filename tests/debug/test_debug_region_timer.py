"""The task's own benchmark region as the gate's measure: the NVTX injection library really times
an NVTX range of a real compiled program (host-only here: no GPU needed for NVTX), ``--perf``
runs are recognised from the testbench, and a reference timed another way falls back to wall time."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hercules.debug import classifier as cls
from hercules.debug.attempt import Outcome
from hercules.debug.corpus import load_instance
from hercules.debug.region_timer import perf_command, read_region_ms, region_environment, timer_library
from hercules.debug.toolchain import toolchain

CORPUS = Path(__file__).resolve().parents[2] / "corpora" / "cudabeaver"

PROGRAM = r"""
#include <nvtx3/nvToolsExt.h>
#include <unistd.h>
int main(int argc, char** argv) {
    nvtxRangePushA("setup"); usleep(30000); nvtxRangePop();            // not the bench region
    for (int i = 0; i < 2; ++i) {
        nvtxRangePushA("bench_region");
        nvtxRangePushA("inner"); usleep(40000); nvtxRangePop();       // nested ranges count inside it
        nvtxRangePop();
    }
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
def test_nvtx_region_timer_times_the_bench_region_of_a_real_program(tmp_path):
    tc = toolchain("cpu", tmp_path / "cache")
    lib, why = timer_library(tc, tmp_path / "cache")
    if lib is None:
        pytest.skip(why)
    (tmp_path / "prog.c").write_text(PROGRAM)
    cc = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([cc, f"-I{tc.cuda_home / 'include'}", "prog.c", "-o", "prog", "-ldl"], cwd=tmp_path, check=True)
    out = tmp_path / "regions.txt"
    plain = subprocess.run(["./prog"], cwd=tmp_path, check=False)
    assert plain.returncode == 0 and not out.exists()  # without the injection nothing is recorded
    subprocess.run(["./prog"], cwd=tmp_path, env={**tc.environ(), **region_environment(lib, out)}, check=True)
    lines = out.read_text().splitlines()
    assert len(lines) == 2 and all(line.startswith("bench_region ") for line in lines)
    ms = read_region_ms(out)
    assert 80.0 <= ms < 400.0  # two regions of ~40 ms each; the 30 ms setup range is left out


def test_perf_command_needs_the_flag_and_the_region_in_the_testbench():
    lib_task = load_instance(next(CORPUS.glob("cusolver_6__*")))
    assert perf_command(lib_task, "./test.out") == "./test.out --perf"
    no_region = load_instance(next(CORPUS.glob("cuda_21__*")))  # its test has neither
    assert perf_command(no_region, "./test.out") is None
    assert perf_command(lib_task, "./a.out && ./b.out") is None  # not a single program invocation
    # a sanitizer wrapper checks memory; the timing runs the program itself
    assert perf_command(lib_task, "python test/run_sanitizer.py ./test.out") == "./test.out --perf"


def _passing(method: str, time_ms: float, wall_ms: float) -> Outcome:
    return Outcome("native", "h", None, None, None, cls.Classification(cls.PASSED), True, time_ms, method,
                   wall_ms=wall_ms)


def test_gate_compares_like_with_like():
    cand = _passing("nvtx_region", 50.0, 1500.0)
    same = cand.gate({"method": "nvtx_region", "time_ms": 100.0, "wall_ms": 1000.0})
    assert same.method == "nvtx_region" and same.speedup == pytest.approx(2.0)
    other = cand.gate({"method": "test_wall", "time_ms": 1200.0, "wall_ms": 1200.0})
    assert other.method == "test_wall" and other.speedup == pytest.approx(0.8)
    assert cand.gate(None).speedup is None and not cand.gate(None).passes(0.7) and cand.gate(None).passes(0)
