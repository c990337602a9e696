"""One attempt: a solution file in a fresh workspace -> build -> test -> classified, timed result.

Three ways to run, chosen by the instance's layout (``Instance.kind``):
  native       the instance's own build and test commands (arch flags adapted)
  kernelbench  the evaluation core (problem.py + the solution as ModelNew); on a machine without
               a GPU a CUDA candidate's sources are compiled by ``kbbuild`` for real build evidence
  defpy        ``def.py`` tasks (signature + PyTorch reference): built into a shared library with
               nvcc, run and timed against the testbench's ``reference.cu`` by ``defpy_driver``
Without a GPU nothing native runs: a clean build is ``untested``, never a pass.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hercules.debug import classifier as cls
from hercules.debug import interrupt, kbbuild
from hercules.debug.core_verdict import classify_verdict
from hercules.debug.corpus import Instance
from hercules.debug.gate import GateResult, parse_task_timing
from hercules.debug.region_timer import REGION, perf_command, read_region_ms, region_environment, timer_library
from hercules.debug.toolchain import Toolchain, adapt_command
from hercules.debug.workspace import CommandResult, prepare, run_command, skipped
from hercules.harness.device_lock import DeviceLock
from hercules.harness.records import Status
from hercules.problems.model import code_hash


@dataclass(frozen=True)
class RunOptions:
    device: str = "cpu"  # "cpu" | "cuda" | "auto"
    build_timeout_s: float = 300.0
    test_timeout_s: float = 180.0
    timing_budget_s: float = 0.3
    cache_dir: Path = field(default_factory=lambda: Path.home() / ".cache" / "hercules")


@dataclass(frozen=True)
class Outcome:
    """What running one solution file produced (before the gate compares it with the reference)."""

    kind: str
    code_hash: str
    build: CommandResult | None
    test: CommandResult | None
    verdict: dict[str, Any] | None
    classification: cls.Classification
    correct: bool
    time_ms: float | None  # the candidate's time by ``method`` (None: not timed)
    method: str
    ref_ms: float | None = None  # only where the same run times the reference too (core, defpy)
    notes: tuple[str, ...] = ()
    wall_ms: float | None = None  # native: the test's wall time, the measure every passing run has

    def gate(self, reference: dict[str, Any] | None) -> GateResult:
        """Speedup against the reference measured the same way; ``reference`` is the reference
        run's record (``time_ms``, ``method``, ``wall_ms``) for tasks whose run does not time it."""
        if self.ref_ms is not None:
            ref, cand, method = self.ref_ms, self.time_ms, self.method
        elif reference is None:
            ref, cand, method = None, self.time_ms, self.method
        elif reference.get("method") == self.method:
            ref, cand, method = reference.get("time_ms"), self.time_ms, self.method
        else:  # e.g. the region timing failed for one of them: fall back to what both have
            ref, cand, method = reference.get("wall_ms"), self.wall_ms, "test_wall"
        speedup = ref / cand if ref and cand else None
        return GateResult(self.correct, speedup, ref, cand, method)

    def to_json(self) -> dict[str, Any]:
        from hercules.harness.records import to_jsonable

        return to_jsonable(self)


def run_native(inst: Instance, code: str, where: Path, tc: Toolchain, opts: RunOptions,
               gpu_lock: DeviceLock) -> Outcome:
    ws = prepare(inst, code, where)
    build_cmd, notes = adapt_command(inst.build_command, tc)
    build = run_command("build", build_cmd, ws, tc.environ(), opts.build_timeout_s, where, notes)
    h = code_hash(code)
    if not build.ok:
        return Outcome("native", h, build, None, None, cls.classify_build(build.text, build.timed_out), False,
                       None, "none", notes=notes)
    test_cmd, tnotes = adapt_command(inst.test_command, tc)
    if not test_cmd.strip():
        test = skipped("test", test_cmd, "the instance has no test command")
        return Outcome("native", h, build, test, None, cls.Classification(cls.UNTESTED, "no_test", test.skipped),
                       False, None, "none", notes=notes)
    if not tc.gpu_present:
        why = f"no GPU: built for sm_{tc.arch} as a compile-only check, not run"
        test = skipped("test", test_cmd, why, tnotes)
        return Outcome("native", h, build, test, None, cls.Classification(cls.UNTESTED, "no_device", why),
                       False, None, "none", notes=notes + tnotes)
    with gpu_lock:  # one test on the GPU at a time: its wall time is the gate's measurement
        test = run_command("test", test_cmd, ws, tc.environ(), opts.test_timeout_s, where, tnotes)
    printed_failure = cls.test_printed_failure(test.stdout) if test.ok else None
    if test.ok and printed_failure is None:
        method, ms, perf_notes = _native_time(inst, test, test_cmd, ws, where, tc, opts, gpu_lock)
        return Outcome("native", h, build, test, None, cls.Classification(cls.PASSED), True, ms, method,
                       notes=notes + tnotes + perf_notes, wall_ms=test.seconds * 1e3)
    found = cls.classify_run(test.text, test.returncode, test.signal, test.timed_out)
    if printed_failure is not None:  # exit 0 but the harness printed a failure
        found = cls.Classification(cls.WRONG, "test_output", printed_failure)
    return Outcome("native", h, build, test, None, found, False, None, "none", notes=notes + tnotes)


def _native_time(inst: Instance, test: CommandResult, test_cmd: str, ws: Path, where: Path, tc: Toolchain,
                 opts: RunOptions, gpu_lock: DeviceLock) -> tuple[str, float, tuple[str, ...]]:
    """The gate's measurement of a passing native solution, best first: the task's own benchmark
    region (its ``--perf`` mode, NVTX range timed with the device synchronised at both ends), the
    timings its test printed, the test's wall time."""
    perf = perf_command(inst, test_cmd)
    why = "the test program has no --perf mode with an NVTX bench region"
    if perf:
        lib, why = timer_library(tc, opts.cache_dir)
        if lib is not None:
            out_file = where / "bench_region.txt"
            out_file.unlink(missing_ok=True)
            env = dict(tc.environ(), **region_environment(lib, out_file))
            with gpu_lock:
                run = run_command("perf", perf, ws, env, opts.test_timeout_s, where)
            ms = read_region_ms(out_file) if run.ok else None
            if ms is not None:
                return "nvtx_region", ms, (f"timed: {perf} (NVTX {REGION}, device synchronised at both ends)",)
            why = (f"{perf}: exit status {run.returncode}, timed out {run.timed_out}" if not run.ok
                   else f"{perf}: no {REGION} range recorded")
    own = parse_task_timing(test.stdout)
    if own:
        return "task_output", own, (f"timed by the test's printed timings ({why})",)
    return "test_wall", test.seconds * 1e3, (f"timed by the test's wall time ({why})",)


# Static findings that KernelBench's build-time checker also rejects outright (its strict checks):
# exception handlers that fall back to PyTorch, patched timers, threads, lazy tensor subclasses.
STATIC_REJECT_FLAGS = frozenset({"reference_fallback", "monkey_patch", "background_thread", "tensor_subclass"})

# The checker's backend requirement, named by the task's own build command (``backend='cuda'``):
# a solution for that backend must contain its kind of kernel. Enforced because the command says
# so; the consequence is that a PyTorch-only file (the corpus' KernelBench references among them)
# does not build for such a task, which is also how CUDABeaver's own harness treats it.
_BACKEND_ARG = re.compile(r"backend\s*=\s*['\"](\w+)['\"]")
_BACKEND_KERNEL = {
    "cuda": (("__global__",), ("load_inline", "cpp_extension"), "a __global__ kernel built with load_inline/cpp_extension"),
    "triton": (("@triton.jit", "@triton.autotune"), ("tl.",), "a @triton.jit kernel using tl.* operations"),
}


def required_backend(build_command: str) -> str | None:
    m = _BACKEND_ARG.search(build_command)
    return m.group(1).lower() if m and m.group(1).lower() in _BACKEND_KERNEL else None


def runs_kernelbench_checker(build_command: str) -> bool:
    return "validate_kernel_static" in build_command


def _without_comments(code: str) -> str:
    """Lines cut at ``#`` and ``//`` (``#include`` lines kept), the way KernelBench's checker reads
    a file: its rules are text patterns, so this is what they see."""
    return "\n".join(line if line.lstrip().startswith("#include") else line.split("#", 1)[0].split("//", 1)[0]
                     for line in code.splitlines())


# The checker's "code bypass" rule, strict in every version: any try/except block (a fallback to
# PyTorch when the kernel fails) and any ``pass`` statement (a ModelNew that inherits the reference
# and does nothing) reject the file, whatever it is for.
_BYPASS = ((re.compile(r"\btry\s*:|\bexcept\s*:|\bexcept\s+\w+"), "a try/except block (a fallback bypass)"),
           (re.compile(r"\bpass\b"), "a 'pass' statement (an inheritance bypass)"))


def bypass_rejection(code: str) -> str | None:
    text = _without_comments(code)
    found = [why for pattern, why in _BYPASS if pattern.search(text)]
    return f"KernelBench's checker rejects {' and '.join(found)}" if found else None


def backend_rejection(code: str, backend: str | None) -> str | None:
    if backend is None:
        return None
    kernel_marks, build_marks, what = _BACKEND_KERNEL[backend]
    text = _without_comments(code)
    if any(m in text for m in kernel_marks) and any(m in text for m in build_marks):
        return None
    return f"backend '{backend}' requires {what}; none found"


def static_rejection(code: str, backend: str | None = None, checker: bool = False) -> str | None:
    """The reason to reject a KernelBench candidate before building, if any: the static scan's
    strict findings, then, for a task whose build command runs KernelBench's checker, its bypass
    rule, then the backend requirement that command names."""
    from hercules.harness.static_scan import scan_candidate

    found = [f"line {f.line}: {f.reason}" for f in scan_candidate(code) if f.flag in STATIC_REJECT_FLAGS]
    extra = [bypass_rejection(code) if checker else None, backend_rejection(code, backend)]
    return "; ".join(found + [x for x in extra if x]) or None


def run_kernelbench(inst: Instance, code: str, where: Path, tc: Toolchain, opts: RunOptions,
                    gpu_lock: DeviceLock) -> Outcome:
    from hercules.harness.evaluate import EvalOptions, evaluate
    from hercules.problems.model import Candidate, Problem

    ws = prepare(inst, code, where)
    h = code_hash(code)
    rejected = static_rejection(code, required_backend(inst.build_command), runs_kernelbench_checker(inst.build_command))
    if rejected:
        # The task's build command is KernelBench's static checker, which rejects fallback bypasses
        # before anything compiles; Hercules' own static scan plays that part here.
        build = CommandResult("build", "hercules static scan", 1, None, False, 0.0, "", rejected, (), None)
        return Outcome("kernelbench", h, build, None, None, cls.Classification(cls.BUILD, "static_check", rejected),
                       False, None, "none", notes=("rejected by the static scan before building",))
    problem_code = (ws / "problem.py").read_text(encoding="utf-8")
    problem = Problem(name=inst.task_id, code=problem_code, source=str(inst.testbench / "problem.py"))
    candidate = Candidate(name=f"{inst.task_id}:{h}", code=code, source=inst.solution_file,
                          problem=inst.task_id)
    device = "cpu" if not tc.gpu_present else "cuda"
    options = EvalOptions(device=device, baselines=("eager",), timing_budget_s=opts.timing_budget_s,
                          artifacts_dir=where / "eval", build_timeout_s=opts.build_timeout_s,
                          run_timeout_s=opts.test_timeout_s, cache_dir=opts.cache_dir)
    verdict = evaluate(problem, candidate, options, gpu_lock=gpu_lock)
    data = verdict.to_json()
    if verdict.status is Status.SKIPPED:
        # No GPU: compile the candidate's native sources for real (compile-only, sm_90).
        cmd = (f"{shlex.quote(sys.executable)} -m hercules.debug.kbbuild {shlex.quote(inst.solution_file)} "
               f"{shlex.quote(str(where / 'kbbuild'))} --arch {tc.arch}")
        note = (f"CUDA candidate skipped by the core (no GPU); sources compiled for sm_{tc.arch} and checked for "
                "unresolved own symbols; not loaded or run")
        build = run_command("build", cmd, ws, tc.environ(), opts.build_timeout_s, where, (note,))
        if build.ok:
            found = cls.Classification(cls.UNTESTED, "no_device", note)
        elif build.returncode == kbbuild.IMPORT_FAILED:  # compiled, then the module's own import code failed
            found = cls.classify_run(build.text, None, None, False)
        else:
            found = cls.classify_build(build.text, build.timed_out)
        return Outcome("kernelbench", h, build, None, data, found, False, None, "none", notes=(note,))
    found = classify_verdict(verdict)
    correct = verdict.status is Status.OK
    # KernelBench references are the PyTorch problem itself: eager, timed beside the candidate.
    return Outcome("kernelbench", h, None, None, data, found, correct, verdict.cand_ms if correct else None,
                   "core:eager", ref_ms=verdict.ref_ms if correct else None)


def run_defpy(inst: Instance, code: str, where: Path, tc: Toolchain, opts: RunOptions,
              gpu_lock: DeviceLock) -> Outcome:
    ws = prepare(inst, code, where)
    py = shlex.quote(sys.executable)
    build_cmd = f"{py} -m hercules.debug.defpy_driver build {shlex.quote(inst.solution_file)} --arch {tc.arch}"
    note = f"def.py task: built as a shared library for sm_{tc.arch} by hercules.debug.defpy_driver"
    build = run_command("build", build_cmd, ws, tc.environ(), opts.build_timeout_s, where, (note,))
    h = code_hash(code)
    if not build.ok:
        return Outcome("defpy", h, build, None, None, cls.classify_build(build.text, build.timed_out), False,
                       None, "none", notes=(note,))
    if not tc.gpu_present:
        why = f"no GPU: built for sm_{tc.arch} as a compile-only check, not run"
        return Outcome("defpy", h, build, skipped("test", "", why), None,
                       cls.Classification(cls.UNTESTED, "no_device", why), False, None, "none", notes=(note,))
    test_cmd = f"{py} -m hercules.debug.defpy_driver test {shlex.quote(inst.solution_file)} --arch {tc.arch}"
    with gpu_lock:
        test = run_command("test", test_cmd, ws, tc.environ(), opts.test_timeout_s, where, (note,))
    report = _last_json(test.stdout)
    if test.ok and report and report.get("correct"):
        return Outcome("defpy", h, build, test, None, cls.Classification(cls.PASSED), True, report["cand_ms"],
                       "defpy_events", ref_ms=report.get("ref_ms"), notes=(note,))
    found = cls.classify_run(test.text, test.returncode, test.signal, test.timed_out)
    if report and report.get("correct") is False:
        found = cls.Classification(cls.WRONG, "", str(report.get("error", "outputs differ")))
    return Outcome("defpy", h, build, test, None, found, False, None, "none", notes=(note,))


def _last_json(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


RUNNERS = {"native": run_native, "kernelbench": run_kernelbench, "defpy": run_defpy}


def run_solution(inst: Instance, code: str, where: Path, tc: Toolchain, opts: RunOptions,
                 gpu_lock: DeviceLock) -> tuple[Outcome, float]:
    interrupt.check()  # a stopped run starts nothing new
    start = time.perf_counter()
    outcome = RUNNERS[inst.kind](inst, code, where, tc, opts, gpu_lock)
    return outcome, time.perf_counter() - start


def run_solution_or_failure(inst: Instance, code: str, where: Path, tc: Toolchain, opts: RunOptions,
                            gpu_lock: DeviceLock) -> tuple[Outcome, float]:
    """``run_solution``, with a failure of the harness itself (an instance it cannot lay out or run,
    an unexpected exception) as an outcome of its own: category ``env``, subtype ``harness_error``,
    the exception as the reason. Never the candidate's fault, never a pass; one attempt's failure
    does not stop the others. A stop (``interrupt.STOP``) still ends the run."""
    start = time.perf_counter()
    try:
        return run_solution(inst, code, where, tc, opts, gpu_lock)
    except Exception as exc:  # noqa: BLE001 -- recorded as the attempt's outcome
        if interrupt.STOP.is_set():
            raise
        why = f"the attempt itself failed: {type(exc).__name__}: {exc}"[:400]
        return (Outcome(inst.kind, code_hash(code), None, None, None, cls.Classification(cls.ENV, "harness_error", why),
                        False, None, "none"), time.perf_counter() - start)
