"""Reproduction: does each instance fail, here, the way its label says, and does its reference work?

Before a fixer's result on an instance can say anything about repair, the instance must be seen
failing (SWE-bench validates every instance the same way: the failing test must fail before the
gold patch and pass after it). For every instance this stage runs the instance's own build and
test commands -- the same workspace, toolchain and classifier code as every attempt
(``attempt.run_solution``) -- on its broken file and on its reference, and compares what happened
with the label:

    reproduced      the broken file fails in the labelled way, and the reference does not fail
    not_reproduced  the broken file does not fail that way here (``why`` says what it did)
    corpus_defect   the reference itself fails (``why`` carries its evidence)
    untested        this machine cannot observe the labelled failure (no GPU: only a build is
                    observable; an environment problem, e.g. a CUDA library header missing here
                    that the reference needs as well; a timed-out build)

On a machine without a GPU a ``compile_error`` instance is reproduced when its broken file fails to
build with a build error (not an environment problem) and its reference builds; the other labels
are ``untested`` unless the build already shows something (the broken file does not build, the
reference does not build). On a GPU the tests run too: the broken file must fail its test in the
labelled way (wrong result, memory fault / crash, timeout, or correct but slower than the gate
for ``perf_broken``) and the reference must pass.

Results are cached per (instance content hash, toolchain identity including the nvcc version,
device, rules version), one JSON file per instance written atomically, so a repeated run rebuilds
nothing and a crash loses only the instances in flight. Timed-out builds, and a reference whose
test timed out, are not cached (the machine may just have been busy). Each record also keeps the
full conditions of its runs (``conditions.Conditions``: options, runtime, the attempt code's
hash), so that an attempt of the same file under the same conditions can take its outcome
(``reuse``) instead of running it again.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
import shutil
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from hercules.debug import classifier as cls
from hercules.debug import interrupt
from hercules.debug.attempt import Outcome, RunOptions, run_solution
from hercules.debug.conditions import run_conditions
from hercules.debug.core_verdict import killed_from_outside
from hercules.debug.corpus import Instance
from hercules.debug.evaluations import device_lock
from hercules.debug.toolchain import Toolchain, toolchain_identity
from hercules.debug.workspace import CommandResult
from hercules.harness.device_lock import DeviceLock

RULES_VERSION = 4  # bump when the judging rules change: older cached results are not reused


class Repro(str, enum.Enum):
    """What the reproduction found (the module's docstring says when each holds)."""

    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not_reproduced"
    UNTESTED = "untested"
    CORPUS_DEFECT = "corpus_defect"


class RefStatus(str, enum.Enum):
    """What the reference's run says, or why it has none."""

    PASSES = "passes"  # builds and passes its tests
    BUILDS = "builds"  # builds; this machine cannot test it
    FAILS = "fails"  # fails to build, or fails its tests
    ENVIRONMENT = "environment"  # cannot be built or run here
    TIMEOUT = "timeout"
    BASELINE_ONLY = "baseline_only"  # the "reference" is the problem itself: no gold check
    MISSING = "missing"  # the instance has none
    NOT_RUN = "not_run"  # not run (a stored run without the replay fixer, a failed reproduction)


STATUSES = tuple(s.value for s in Repro)
PERF_BROKEN_P = 0.7  # perf_broken is reproduced when the correct broken file is below this speedup

# Which classified categories show each labelled failure (a test on a GPU).
SHOWS_LABEL = {
    "compile_error": {cls.BUILD},
    "logic_error": {cls.WRONG, cls.SUSPICIOUS},
    "memory_crash": {cls.OOM, cls.ILLEGAL, cls.LAUNCH, cls.CRASH},
    "timeout": {cls.TIMEOUT},
    "perf_broken": {cls.SLOW},
}


@dataclass(frozen=True)
class Reproduction:
    task_id: str
    labelled_category: str
    status: str  # a Repro value
    # True only for status "reproduced"; False otherwise, ``status`` says which (an untested one:
    # this machine cannot observe the labelled failure) and ``not_reproduced_why`` says why.
    # Records made before it was a strict boolean held None for untested: read back as False.
    reproduced: bool
    observed_category: str  # what the classifier made of the broken file here
    not_reproduced_why: str | None  # set whenever reproduced is not True
    why_kind: str  # a short code for counting reasons (e.g. broken_builds, reference_fails_build)
    evidence: str  # the line that decided the broken file's category
    reference_status: str  # a RefStatus value
    reference_why: str
    toolchain: str  # the toolchain identity the result holds for
    device: str  # "cpu: no GPU, ..." or the GPU's name and architecture
    instance_hash: str
    broken: dict[str, Any] | None  # Outcome.to_json() of the broken file
    reference: dict[str, Any] | None  # Outcome.to_json() of the reference (None when not run)
    seconds: float
    broken_speedup: float | None = None  # on a GPU: reference time / broken time, same method
    observed_subtype: str = ""  # e.g. syntax_type, api_misuse, missing_header, static_check
    # conditions.Conditions of the two runs (options, runtime, code...): what an attempt must share
    # to take one of them as its own outcome (``reuse``); None in records made before they were kept
    conditions: dict[str, Any] | None = None
    cached: bool = False

    def row(self) -> dict[str, Any]:
        """The record without the full outcomes (for JSON output and reports)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("broken", "reference", "conditions")}

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "cached"}

    @classmethod
    def from_json(cls, data: dict[str, Any], cached: bool = False) -> Reproduction:
        names = {f.name for f in fields(cls)}
        values = {"broken": None, "reference": None, "conditions": None} | {k: v for k, v in data.items() if k in names and k != "cached"}
        values["reproduced"] = values.get("reproduced") is True
        return cls(**values, cached=cached)


# -- identities --------------------------------------------------------------------------------

def instance_hash(inst: Instance) -> str:
    """sha256 over every file of the instance folder (relative path and bytes): any change to the
    broken file, the reference, the commands or the testbench makes a new cache key."""
    h = hashlib.sha256()
    for path in sorted(p for p in inst.path.rglob("*") if p.is_file() or p.is_symlink()):
        rel = path.relative_to(inst.path).as_posix()
        h.update(rel.encode() + b"\0")
        try:
            h.update(path.read_bytes() if not path.is_symlink() else ("->" + str(path.readlink())).encode())
        except OSError as exc:
            h.update(f"unreadable:{exc}".encode())
        h.update(b"\0")
    return h.hexdigest()


def cache_key(inst_hash: str, conditions: dict[str, Any]) -> str:
    """The instance and every condition its outcome depends on (``conditions.run_conditions``: the
    rules, toolchain, device, runtime, libraries, the judging code and the timeouts and budget);
    a reproduction under other conditions is not reused."""
    text = json.dumps([inst_hash, conditions], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def instance_key(inst: Instance, tc: Toolchain, opts: RunOptions) -> str:
    """The cache key of an instance's reproduction with this toolchain, device and options."""
    return cache_key(instance_hash(inst), run_conditions(tc, opts, inst.kind, RULES_VERSION).to_json())


# -- outcomes back from JSON (so an attempt can reuse a reproduction's outcome) ------------------

def outcome_from_json(data: dict[str, Any]) -> Outcome:
    def command(raw):
        if raw is None:
            return None
        names = {f.name for f in fields(CommandResult)}
        return CommandResult(**{k: (tuple(v) if k == "notes" else v) for k, v in raw.items() if k in names})

    c = data["classification"]
    return Outcome(kind=data["kind"], code_hash=data["code_hash"], build=command(data.get("build")),
                   test=command(data.get("test")), verdict=data.get("verdict"),
                   classification=cls.Classification(c["category"], c.get("subtype", ""), c.get("reason", ""),
                                                     bool(c.get("environment_suspect"))),
                   correct=bool(data["correct"]), time_ms=data.get("time_ms"), method=data.get("method", "none"),
                   ref_ms=data.get("ref_ms"), notes=tuple(data.get("notes") or ()), wall_ms=data.get("wall_ms"))


def deterministic(outcome: Outcome) -> bool:
    """An outcome a repeat of the same code would only reproduce: a build failure (not a timeout),
    or a build that this machine cannot test. Anything that ran a test is one observation."""
    category = outcome.classification.category
    if category == cls.TIMEOUT and outcome.classification.subtype == "build":
        return False
    return category in (cls.BUILD, cls.UNTESTED) and (outcome.test is None or category == cls.UNTESTED)


# -- judging -----------------------------------------------------------------------------------

def _is_baseline_reference(inst: Instance, reference: str) -> bool:
    """A KernelBench instance whose 'reference' is its own problem.py: the PyTorch baseline the
    candidate is compared with, not a solution of the task (its build command requires a CUDA
    kernel), so there is no gold solution to check."""
    problem = inst.testbench / "problem.py"
    if inst.kind != "kernelbench" or not problem.is_file():
        return False
    def norm(text: str) -> str:
        return "\n".join(line.rstrip() for line in text.strip().splitlines())
    return norm(problem.read_text(encoding="utf-8", errors="replace")) == norm(reference)


@dataclass(frozen=True)
class ReferenceJudgement:
    """What the reference's run says about the instance."""

    status: RefStatus
    why: str
    stage: str = ""  # "build" or "test": where a failing or timed-out reference stopped


def _no_gold_check(inst: Instance, reference: str | None) -> ReferenceJudgement | None:
    """Why the reference cannot be checked (None when it can): none given, or only the baseline."""
    if reference is None:
        return ReferenceJudgement(RefStatus.MISSING, "missing: the instance has no reference solution; only "
                                  "the failure was checked")
    if _is_baseline_reference(inst, reference):
        return ReferenceJudgement(RefStatus.BASELINE_ONLY, "baseline_only: the reference is the task's own "
                                  "PyTorch problem (the baseline the candidate is timed against), not a solution its "
                                  "build command accepts; no gold check")
    return None


def _describe(outcome: Outcome) -> str:
    c = outcome.classification
    return f"{c.category}{'/' + c.subtype if c.subtype else ''}: {c.reason}".strip().rstrip(":")[:300]


def _lacks(outcome: Outcome) -> str:
    """Names the CUDA library header a build missed, first, so that a row says which (scripts/setup
    installs cuBLAS, cuFFT, cuRAND, cuSOLVER and cuSPARSE's; others, cuDNN or NCCL, it does not)."""
    c = outcome.classification
    header = cls.missing_header(c.reason) if c.environment_suspect else None
    return f"needs {header}, a CUDA library header this machine lacks; " if header else ""


def _timeout_s(outcome: Outcome) -> str:
    stage = outcome.build if outcome.build is not None and outcome.build.timed_out else outcome.test
    return f" after {stage.seconds:.0f} s" if stage is not None else ""


_WORKSPACE_PATH = re.compile(r"(?<![\w.])/\S*?/workspace/")


def _inside_testbench(text: str | None) -> str | None:
    """Evidence names files by their workspace path: keep the part inside the testbench."""
    return _WORKSPACE_PATH.sub("", text) if text else text


NOT_JUDGED = ReferenceJudgement(RefStatus.NOT_RUN, "not judged")


def judge_reference(outcome: Outcome | None, unchecked: ReferenceJudgement | None = None) -> ReferenceJudgement:
    """What the reference's outcome says; ``unchecked``: why there is no outcome to judge."""
    if outcome is None:
        return unchecked or NOT_JUDGED
    c = outcome.classification
    if c.category == cls.PASSED:
        return ReferenceJudgement(RefStatus.PASSES, "the reference builds and passes its tests")
    if c.category == cls.UNTESTED:
        return ReferenceJudgement(RefStatus.BUILDS, f"the reference builds ({c.reason})")
    if c.category == cls.ENV or (c.category == cls.BUILD and c.environment_suspect):
        return ReferenceJudgement(RefStatus.ENVIRONMENT, "the reference cannot be built or run here: "
                                  f"{_lacks(outcome)}{_describe(outcome)}")
    if c.category == cls.TIMEOUT:
        stage = "build" if c.subtype == "build" else "test"
        return ReferenceJudgement(RefStatus.TIMEOUT, f"the reference's {stage} timed out{_timeout_s(outcome)}", stage)
    if outcome.test is None or c.category == cls.BUILD:
        return ReferenceJudgement(RefStatus.FAILS, f"the reference itself fails to build: {_describe(outcome)}",
                                  "build")
    return ReferenceJudgement(RefStatus.FAILS, f"the reference itself fails its tests: {_describe(outcome)}", "test")


def judge(inst: Instance, broken: Outcome, reference: Outcome | None, unchecked: ReferenceJudgement | None,
          gpu_present: bool, compiler: str, device: str, broken_speedup: float | None = None
          ) -> tuple[Repro, str | None, str, str]:
    """(status, why, why_kind, observed category) from the two outcomes and the label;
    ``unchecked``: why the reference has no outcome (None when it ran)."""
    label = inst.category
    b = broken.classification
    observed = b.category
    if label == "perf_broken" and broken.correct:
        observed = cls.SLOW if broken_speedup is not None and broken_speedup < PERF_BROKEN_P else cls.PASSED
    ref = judge_reference(reference, unchecked)
    ref_why = ref.why
    where = f"with {compiler} ({device})"
    # 1. what this machine cannot observe
    if b.category == cls.ENV:
        return Repro.UNTESTED, f"the broken file cannot be built or run here: {_describe(broken)}", "environment", observed
    if b.category == cls.TIMEOUT and b.subtype == "build":
        return (Repro.UNTESTED, f"the broken file's build timed out{_timeout_s(broken)}: nothing observed",
                "build_timeout", observed)
    if b.category == cls.BUILD and b.environment_suspect and ref.status not in (RefStatus.BUILDS, RefStatus.PASSES):
        # a CUDA library header this machine lacks: the candidate's fault only if the reference,
        # built here the same way, does without it
        return (Repro.UNTESTED, f"the broken file cannot be built here: {_lacks(broken)}{_describe(broken)} "
                f"({ref_why})", "environment_library_header", observed)
    if ref.status in (RefStatus.ENVIRONMENT, RefStatus.TIMEOUT):
        return Repro.UNTESTED, ref_why, f"reference_{ref.status.value}", observed
    # 2. the reference itself fails: the instance cannot be solved as given
    if ref.status is RefStatus.FAILS:
        kind = f"reference_fails_{ref.stage}"
        return Repro.CORPUS_DEFECT, ref_why, kind, observed
    # 3. the broken file against its label
    if b.category == cls.BUILD:
        if label == "compile_error":
            return Repro.REPRODUCED, None, "", observed
        return (Repro.NOT_REPRODUCED, f"labelled {label}, but the broken file does not build {where}: "
                f"{_describe(broken)}", "broken_does_not_build", observed)
    if label == "compile_error":
        if b.category == cls.UNTESTED:
            return Repro.NOT_REPRODUCED, f"the broken file builds {where}", "broken_builds", observed
        if b.category == cls.PASSED:
            return (Repro.NOT_REPRODUCED, f"the broken file builds and its tests pass {where}",
                    "broken_builds_and_passes", observed)
        return (Repro.NOT_REPRODUCED, f"the broken file builds {where}, then fails as {_describe(broken)}",
                "broken_builds_then_fails", observed)
    if b.category == cls.UNTESTED:
        why = ("no GPU: only the build is observable here, and the broken file builds "
               f"{where}" if not gpu_present else f"the broken file builds but was not tested: {b.reason}")
        return Repro.UNTESTED, why, "no_gpu" if not gpu_present else "not_tested", observed
    if observed in SHOWS_LABEL.get(label, ()):
        return Repro.REPRODUCED, None, "", observed
    if observed == cls.PASSED:
        extra = f" (speedup {broken_speedup:.2f} >= {PERF_BROKEN_P})" if label == "perf_broken" and broken_speedup else ""
        return (Repro.NOT_REPRODUCED, f"labelled {label}, but the broken file builds and its tests pass {where}{extra}",
                "broken_passes", observed)
    return (Repro.NOT_REPRODUCED, f"labelled {label}, but the broken file fails otherwise {where}: {_describe(broken)}",
            f"observed_{observed}", observed)


# -- running -----------------------------------------------------------------------------------

class ReproductionCache:
    """One JSON file per (instance, toolchain, device) under ``root``; written atomically."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def get(self, key: str) -> Reproduction | None:
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            rep = Reproduction.from_json(json.loads(path.read_text()), cached=True)
            sides = [outcome_from_json(o) if o is not None else None for o in (rep.broken, rep.reference)]
        except (json.JSONDecodeError, TypeError, KeyError):
            return None  # torn or foreign: run it again
        # A record cached before ``maybe_load`` refused what it holds (the H100 run's cache held two
        # builds "killed by SIGINT", the stop of their call, read as the broken file failing
        # otherwise) is no result either: run it again.
        return None if retry_later(*sides) else rep

    def put(self, key: str, rep: Reproduction) -> None:
        from hercules.debug.store import write_json_atomic

        write_json_atomic(self.path(key), rep.to_json())


def default_cache_root(cache_dir: Path) -> Path:
    return Path(cache_dir) / "debug-reproduction"


def reproduce(inst: Instance, tc: Toolchain, opts: RunOptions, cache: ReproductionCache,
              gpu_lock: DeviceLock | None = None) -> Reproduction:
    """The reproduction of one instance (from the cache when this instance, toolchain and device
    were validated before)."""
    identity, device, compiler = toolchain_identity(tc)
    ihash = instance_hash(inst)
    conditions = run_conditions(tc, opts, inst.kind, RULES_VERSION).to_json()
    key = cache_key(ihash, conditions)
    cached = cache.get(key)
    if cached is not None:
        return cached
    gpu_lock = gpu_lock or device_lock()
    start = time.perf_counter()
    work = cache.root / "work" / f"{key}.{threading.get_ident()}"
    try:
        broken, _ = run_solution(inst, inst.broken_code(), work / "broken", tc, opts, gpu_lock)
        ref_code = inst.reference_code()
        reference: Outcome | None = None
        unchecked = _no_gold_check(inst, ref_code)
        if unchecked is None:
            reference, _ = run_solution(inst, ref_code, work / "reference", tc, opts, gpu_lock)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    speedup = None
    if broken.correct and reference is not None and reference.correct:
        speedup = broken.gate({"time_ms": reference.time_ms, "method": reference.method,
                               "wall_ms": reference.wall_ms}).speedup
    elif broken.correct and broken.ref_ms is not None:
        speedup = broken.gate(None).speedup
    status, why, kind, observed = judge(inst, broken, reference, unchecked, tc.gpu_present, compiler, device, speedup)
    ref = judge_reference(reference, unchecked)
    why, evidence, ref_why = (_inside_testbench(t) for t in (why, broken.classification.reason, ref.why))
    rep = Reproduction(
        task_id=inst.task_id, labelled_category=inst.category, status=status.value,
        reproduced=status is Repro.REPRODUCED, observed_category=observed,
        not_reproduced_why=why, why_kind=kind, evidence=(evidence or "")[:400],
        reference_status=ref.status.value, reference_why=ref_why, toolchain=identity, device=device,
        instance_hash=ihash, broken=broken.to_json(), reference=reference.to_json() if reference else None,
        seconds=round(time.perf_counter() - start, 3), broken_speedup=speedup,
        observed_subtype=broken.classification.subtype,
        conditions=conditions)
    if not retry_later(broken, reference):
        cache.put(key, rep)
    return rep


def maybe_load(outcome: Outcome | None, side: str) -> bool:
    """A timed-out build (either file) or reference test may be the machine's load, not the code;
    a process killed from outside (the host's OOM killer) is the machine's doing, and one ended by
    the signal that stops the run (SIGINT, SIGTERM) is the stop's: such a result is not cached and no
    attempt takes it, so the next run tries again. The broken file's test timing out is an
    observation."""
    stages = ("build", "test") if side == "reference" else ("build",)
    c = outcome.classification if outcome is not None else None
    return c is not None and (killed_from_outside(c.category, c.subtype)
                              or cls.killed_by_stop_signal(c.reason or "")
                              or (c.category == cls.TIMEOUT and c.subtype in stages))


def retry_later(broken: Outcome | None, reference: Outcome | None) -> bool:
    """A reproduction whose broken or reference run ``maybe_load`` refuses: neither cached nor
    taken from the cache."""
    return maybe_load(broken, "broken") or maybe_load(reference, "reference")


def reproduce_all(instances: Sequence[Instance], tc: Toolchain, opts: RunOptions, cache: ReproductionCache,
                  jobs: int = 2, progress: Callable[[int, int, Reproduction], None] | None = None,
                  gpu_lock: DeviceLock | None = None) -> list[Reproduction]:
    """Every instance's reproduction, in the instances' order; each one cached as soon as it is done.
    A stopped run (``interrupt.STOP``) returns the ones finished, the others left out."""
    gpu_lock = gpu_lock or device_lock()
    results: list[Reproduction | None] = [None] * len(instances)
    done = 0

    def one(inst: Instance) -> Reproduction:
        try:
            return reproduce(inst, tc, opts, cache, gpu_lock)
        except Exception as exc:  # noqa: BLE001 -- a failure is data: the other instances go on (not cached)
            if interrupt.STOP.is_set():
                raise
            identity, device, _ = toolchain_identity(tc)
            why = f"the reproduction itself failed: {type(exc).__name__}: {exc}"[:400]
            return Reproduction(inst.task_id, inst.category, Repro.UNTESTED.value, False, cls.UNTESTED, why, "error",
                                "", RefStatus.NOT_RUN.value, why, identity, device, "", None, None, 0.0)

    for i, rep in interrupt.map_until_stopped(one, instances, jobs):
        results[i] = rep
        done += 1
        if progress:
            progress(done, len(instances), rep)
    return [r for r in results if r is not None]


def cached_count(instances: Sequence[Instance], tc: Toolchain, opts: RunOptions, cache: ReproductionCache) -> int:
    """How many of the instances have a reusable reproduction in the cache (for these conditions)."""
    return sum(cache.get(instance_key(inst, tc, opts)) is not None for inst in instances)


def counts(reproductions: Sequence[Reproduction]) -> dict[str, Any]:
    """Per labelled category: how many of each status, and the reasons (why_kind) counted."""
    by_cat: dict[str, Counter] = defaultdict(Counter)
    reasons: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    for r in reproductions:
        by_cat[r.labelled_category][r.status] += 1
        if r.status != Repro.REPRODUCED:
            reasons[r.labelled_category][r.status][r.why_kind] += 1
    total = Counter(r.status for r in reproductions)
    return {
        "total": {s: total[s] for s in STATUSES} | {"instances": len(reproductions)},
        "by_category": {c: {s: by_cat[c][s] for s in STATUSES} for c in sorted(by_cat)},
        "reasons": {c: {s: dict(v) for s, v in reasons[c].items()} for c in sorted(reasons)},
    }


def progress_line(done: int, total: int, rep: Reproduction) -> str:
    why = f" ({rep.not_reproduced_why[:140]})" if rep.not_reproduced_why else ""
    return f"[{done}/{total}] {rep.task_id}: {rep.status}{' (cached)' if rep.cached else ''}{why}"




# -- reproduction from a run's stored rounds ---------------------------------------------------

def reproductions_from_rounds(records: Sequence[dict[str, Any]], instances: Sequence[Instance], gpu_present: bool,
                              toolchain_note: str, device: str) -> list[Reproduction]:
    """The reproduction of each instance judged from rounds a run already stored: a round whose
    code is the broken file (the null fixer's) and one whose code is the reference (the replay
    fixer's), with the same rules as ``reproduce``. For runs made before the reproduction stage
    (their evidence is kept; nothing is built or run again). An instance without a stored round
    of its broken file is ``untested``; one without a stored round of its reference is judged on
    the broken file alone (``reference_status`` not_run)."""
    from hercules.debug.fixers import kernelbench_alias
    from hercules.problems.model import code_hash

    by_task: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for rec in records:  # the first stored round of each code wins
        by_task[rec["task_id"]].setdefault(rec["code_hash"], rec)
    out: list[Reproduction] = []
    for inst in instances:
        rounds = by_task.get(inst.task_id, {})
        ihash = instance_hash(inst)
        broken_rec = rounds.get(code_hash(inst.broken_code()))
        ref_code = inst.reference_code()
        unchecked, ref_rec = _no_gold_check(inst, ref_code), None
        if unchecked is None:
            ref_rec = rounds.get(code_hash(ref_code)) or rounds.get(code_hash(kernelbench_alias(ref_code)))
            if ref_rec is None:
                unchecked = ReferenceJudgement(RefStatus.NOT_RUN, "not_run: no stored round ran the reference (the replay "
                                               "fixer); judged on the broken file alone")
        if broken_rec is None:
            why = "no stored round ran the broken file (the null fixer) in this run"
            out.append(Reproduction(inst.task_id, inst.category, Repro.UNTESTED.value, False, cls.UNTESTED, why,
                                    "not_run", "", RefStatus.NOT_RUN.value, (unchecked or NOT_JUDGED).why, toolchain_note, device, ihash, None,
                                    None, 0.0))
            continue
        broken = outcome_from_json(broken_rec["outcome"])
        reference = outcome_from_json(ref_rec["outcome"]) if ref_rec else None
        gate = broken_rec.get("gate") or {}
        speedup = gate.get("speedup") if broken.correct else None
        status, why, kind, observed = judge(inst, broken, reference, unchecked, gpu_present, toolchain_note, device,
                                            speedup)
        ref = judge_reference(reference, unchecked)
        why, ref_why = _inside_testbench(why), _inside_testbench(ref.why)
        out.append(Reproduction(
            task_id=inst.task_id, labelled_category=inst.category, status=status.value,
            reproduced=status is Repro.REPRODUCED, observed_category=observed,
            not_reproduced_why=why, why_kind=kind, evidence=(_inside_testbench(broken.classification.reason) or "")[:400],
            reference_status=ref.status.value, reference_why=ref_why, toolchain=toolchain_note, device=device,
            instance_hash=ihash, broken=broken_rec["outcome"], reference=ref_rec["outcome"] if ref_rec else None,
            seconds=0.0, broken_speedup=speedup, observed_subtype=broken.classification.subtype))
    return out
