"""One evaluation: problem + candidate -> Verdict.

Two worker processes per evaluation: the reference (trusted problem code: inputs made on the
device from seeds the parent draws, Model, float64 truth, the comparison, baselines, roofline) and
the candidate (untrusted, sandboxed: import, build, run, time). Tensors travel between them as
sealed memory files the parent hands over without reading (datapath.py); only figures come back.

Nothing the candidate's process reports reaches the score unverified: correctness is judged by the
reference worker from the outputs themselves, and the time is bounded by the parent's own clock
around back-to-back calls whose last outputs arrive in the reply and are checked (measure.py, its
decisions in policy.py). Baselines are timed the same way, after every process of the candidate has
been ended.

The parent's way through an evaluation is a chain of stage calls (``_Evaluation._run``): each
takes the typed records earlier stages returned (``Trials``, ``CheckOutcome``, ``MeasureOutcome``)
and returns its own; requests and replies are typed (requests.py, protocol.py) and travel through
the ``Session``; ``decide`` alone makes the verdict, ``classify`` alone names a failed request's
status and cause.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from hercules.fileio import write_text_atomic
from hercules.harness import build as build_mod
from hercules.harness import oracle, priority, requests
from hercules.harness.baselines import COMPILED, available_baselines
from hercules.harness.beside import Beside, trusted_burst_ms
from hercules.harness.checks import KERNELBENCH_TOLERANCE, is_downcast, tolerance_for
from hercules.harness.classify import Ending, WorkerEvent
from hercules.harness.decide import (
    BaselineOutcome,
    CheckOutcome,
    Context,
    Finding,
    IntegrityOutcome,
    MeasureOutcome,
    ScanOutcome,
    decide,
)
from hercules.harness.device_lock import DeviceLock, shared_section
from hercules.harness.ipc import Worker, package_pythonpath, private_dir
from hercules.harness.judge import Judge
from hercules.harness.measure import (
    OVERWRITTEN_FINDING,
    Measurement,
    MeasureSettings,
    Transfers,
    detect_interpreted,
    unique,
)
from hercules.harness.policy import (
    BASELINE_ROUNDS,
    LONG_BURSTS,
    baseline_confirmed,
    baselines_to_cache,
    burst_calls,
    device_busy,
    output_bytes,
)
from hercules.harness.protocol import BuildReply, IntegrityReply, PackReply, RunReply
from hercules.harness.records import (
    BuildResult,
    Cause,
    CheckResult,
    Flag,
    SideBySide,
    Verdict,
    to_jsonable,
)
from hercules.harness.roofline import floor_bytes, sol_figures
from hercules.harness.sandbox import DEFAULT_CPU_SHARES, CpuGroup
from hercules.harness.session import (
    Abort,
    Deadlines,
    Session,
    Trials,
    abort_for,
    close_fds,
)
from hercules.harness.timing import device_memory_bytes
from hercules.problems import degenerate
from hercules.problems.model import Candidate, Problem

# Deadlines derived from the reference's own cost: a hung candidate is ended after the base plus
# this many times the reference's call for every call a request makes.
CALL_BASE_S = 20.0
CALL_FACTOR = 100.0
# The first call may compile (Triton JIT, torch.compile inside the candidate): it gets this much
# more, extended while a compiler runs in the sandbox.
FIRST_CALL_EXTRA_S = 30.0
# An import that runs no compiler for this long is hung, whatever the build cap; longer for a
# problem whose own model takes long to build: BUILD_IDLE_PER_SETUP times the reference's setup
# (which builds the model, its float64 copy and their perturbed versions). On the H200, level 3 #1
# (three 16384 x 16384 layers) took the reference 113 s, and its own code as the candidate was
# ended after 60 s with "no build in progress".
BUILD_IDLE_S = 60.0
BUILD_IDLE_PER_SETUP = 2.0


def build_idle_s(reference_setup_s: float) -> float:
    return max(BUILD_IDLE_S, BUILD_IDLE_PER_SETUP * reference_setup_s)


# An evaluation whose one input set, one call's outputs and weights take more than this share of
# the device's memory runs with no other evaluation in flight: its reference alone holds the inputs,
# their float64 copies, the outputs and their float64 truth (~6x inputs + outputs at its peak), and
# the candidate its own sets. 1/12 of the H200's 140 GB is 11.6 GB: 21_Sigmoid and 26_GELU (12.9 GB)
# run alone, 11_4D_tensor_matrix_multiplication (4.2 GB) does not.
ALONE_SHARE = 1 / 12
FOOTPRINT_KEYS = ("input_bytes", "output_bytes", "weight_bytes")  # what the comparison with it adds up
# Bumped whenever cached baselines or device ceilings are measured differently.
CACHE_FORMAT = 5  # 5: baselines bounded by the parent's wall clock, as candidates are


TOLERANCE_MODES = ("strict", "kernelbench")



@dataclass(frozen=True)
class EvalOptions:
    device: str = "auto"
    trials: int = 5
    revalidation_sets: int = 2
    timing_budget_s: float = 0.3
    warmup_s: float = 0.05
    baselines: tuple[str, ...] | None = None  # None: every baseline the device supports
    build_timeout_s: float = 900.0
    run_timeout_s: float = 300.0  # cap of the per-call deadline derived from the reference's cost
    cache_dir: Path = field(default_factory=build_mod.default_cache_dir)
    artifacts_dir: Path | None = None  # keep source, logs and verdict here; temporary otherwise
    time_candidate: bool = True
    sandbox: bool = True  # False only for debugging the harness itself; the verdict says so
    # Device packs between the workers where the driver supports them (CUDA only; the probe at the
    # start of every evaluation decides); False keeps every hand-over in host memory files.
    device_packs: bool = True
    # What decides correctness (TOLERANCE_MODES): "strict", Hercules' own tolerances against the
    # float64 truth; "kernelbench", upstream KernelBench's atol = rtol = 1e-2 and nothing else
    # (precision is then not judged), to reproduce published results. Both are reported either way.
    tolerance: str = "strict"


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class _Cache:
    """Small JSON files under the cache root: baseline times, device ceilings, FLOP counts."""

    def __init__(self, root: Path):
        self.root = root

    def get(self, kind: str, key: str) -> Any:
        path = self.root / kind / f"{key}.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def put(self, kind: str, key: str, value: Any) -> None:
        write_text_atomic(self.root / kind / f"{key}.json", json.dumps(value, indent=1))  # writers may race


# Ceilings this process has read or measured, by cache entry: a machine's facts, asked for by
# every evaluation (on the CPU a measurement costs 0.8 s, and each test has its own cache root).
_CEILINGS_SEEN: dict[str, dict[str, Any]] = {}


def cached_ceilings(cache_dir: Path, device: torch.device, measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The device's copy bandwidth and matmul rates: read from the cache, else ``measure()`` once
    and kept (the evaluations and the optimiser's hardware facts share this entry); a cache root
    without the entry gets the one this process already holds."""
    cache = _Cache(Path(cache_dir))
    key = f"{device_key(device)}-v{CACHE_FORMAT}"
    stored = cache.get("devices", key)
    ceilings = stored or _CEILINGS_SEEN.get(key) or measure()
    if stored is None:
        cache.put("devices", key, ceilings)
    _CEILINGS_SEEN[key] = ceilings
    return ceilings


def device_key(device: torch.device) -> str:
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    versions = build_mod.software_versions()
    raw = f"{name}-torch{versions['torch']}-triton{versions['triton']}"
    return "".join(c if c.isalnum() or c in ".-" else "_" for c in raw)


def input_signature(signature: list[str]) -> str:
    """A short digest of the inputs' shapes and dtypes (and of any non-tensor value)."""
    return hashlib.sha256("|".join(signature).encode()).hexdigest()[:16]


@contextlib.contextmanager
def _workdir(options: EvalOptions) -> Iterator[Path]:
    if options.artifacts_dir is not None:
        options.artifacts_dir.mkdir(parents=True, exist_ok=True)
        yield options.artifacts_dir
    else:
        with private_dir("hercules-eval-") as path:
            yield path


def evaluate(problem: Problem, candidate: Candidate, options: EvalOptions = EvalOptions(),
             gpu_lock: DeviceLock | threading.Lock | None = None) -> Verdict:
    """Evaluate one candidate; never raises for anything the candidate does."""
    started = time.perf_counter()
    device = resolve_device(options.device)
    with _workdir(options) as workdir:
        lock = gpu_lock or DeviceLock()
        # Only an evaluation that may have neighbours (a lock given by the caller) needs a place
        # among them: alone by construction, it skips the footprint request (0.9 s on the CPU).
        shared = gpu_lock is not None and isinstance(lock, DeviceLock)
        with lock.evaluation() if shared else contextlib.nullcontext() as occupancy:
            run = _Evaluation(problem, candidate, options, device, workdir, lock, occupancy)
            verdict = run.execute()
        verdict = replace(verdict, seconds=time.perf_counter() - started)
        if options.artifacts_dir is not None:
            write_text_atomic(workdir / "verdict.json", json.dumps(verdict.to_json(), indent=1))
    return verdict


# ---- the candidate's sandbox --------------------------------------------------------------


def start_candidate_worker(log_path: Path, plan: build_mod.BuildPlan, private: Path, device: torch.device,
                           options: EvalOptions, hidden: tuple[Path, ...] = ()) -> tuple[Worker, dict[str, Any]]:
    """The candidate's worker, inside its sandbox: it may write its private folder and the build
    cache entry it is building, read the Python installation and this package, and nothing of the
    run folder, the store, the cache or other candidates. Returns the worker and the sandbox's
    description for the verdict."""
    from hercules.harness import sandbox as sandbox_mod

    if not options.sandbox:
        info = {"mechanism": "none", "isolated": [], "missing": ["all"], "reason": "switched off (sandbox=False)"}
        warnings.warn("candidate evaluated without a sandbox (switched off)", stacklevel=2)
        return Worker.start("candidate", log_path, env=plan.env, cwd=private), info
    plan.extensions_dir.mkdir(parents=True, exist_ok=True)
    package_root = Path(package_pythonpath().split(":")[0])
    box = sandbox_mod.Sandbox(private, writable=(plan.extensions_dir,), readable=(package_root,),
                              hidden=(Path(options.cache_dir), *hidden), gpu=device.type == "cuda")
    sandbox_mod.warn_if_unsandboxed(box.info)
    env = {**plan.env, "HOME": str(private), "TMPDIR": "/tmp"}
    worker = Worker.start("candidate", log_path, env=env, cwd=private, sandbox=box)
    info = {"mechanism": box.info.mechanism, "isolated": list(box.info.isolated), "missing": list(box.info.missing),
            "reason": box.info.reason, "cgroups": list(box.cgroups),
            "cgroups_missing": box.cgroups_missing}
    return worker, info


# ---- the evaluation -----------------------------------------------------------------------


@dataclass
class Stages:
    """The stage results so far, for the verdict: a failure part-way keeps what finished."""

    build: BuildResult | None = None
    check: CheckOutcome | None = None
    measure: MeasureOutcome | None = None
    integrity: IntegrityOutcome | None = None
    baselines: BaselineOutcome | None = None
    sol: dict[str, Any] | None = None


class _Evaluation:
    """One evaluation's way through the parent: a chain of stage calls, each taking what the stages
    before it returned (typed records) and returning its own; the evaluation object holds only
    what every stage shares (the session with the two workers, the options) and the verdict's
    bookkeeping (notes, phases, spans, limits)."""

    def __init__(self, problem, candidate, options, device, workdir, gpu_lock, occupancy=None):
        self.problem: Problem = problem
        self.candidate: Candidate = candidate
        self.options: EvalOptions = options
        self.device: torch.device = device
        self.workdir: Path = workdir
        self.gpu_lock = gpu_lock
        self.occupancy = occupancy
        if options.tolerance not in TOLERANCE_MODES:
            raise ValueError(f"tolerance must be one of {TOLERANCE_MODES}, not {options.tolerance!r}")
        # Every comparison (trials, revalidation, the passes) is judged at the mode's tolerance.
        self.tol = tolerance_for(problem) if options.tolerance == "strict" else KERNELBENCH_TOLERANCE
        self.notes: list[str] = [] if options.tolerance == "strict" else [
            "correctness judged at upstream KernelBench's tolerance (atol = rtol = 1e-2; precision not judged)"]
        self.cache = _Cache(options.cache_dir)
        self.phases: dict[str, float] = {}
        self.spans: list[tuple[str, float, float]] = []  # (phase, start, end), Unix seconds
        self._boost_noted = False
        self.workers: dict[str, Worker] = {}
        self.session = Session(self.workers, workdir, options.run_timeout_s)
        self.judge = Judge(self.session, self.tol, strict=options.tolerance == "strict",
                           dtype_name=problem.dtype_name, timeout_s=options.run_timeout_s)
        self.limits: dict[str, float] = {"build_s": options.build_timeout_s, "build_idle_s": BUILD_IDLE_S}
        self.sandbox_info: dict[str, Any] | None = None
        self.datapath = "memfd"  # reported in the verdict; chosen by ``_choose_datapath``
        self.cpu_groups: list[CpuGroup] = []  # the reference's and the sandbox's, weighted alike

    def _group_reference(self) -> None:
        """Where the candidate's sandbox is one cpu cgroup, the reference worker goes into a
        cgroup of its own beside it, at the same weight (both raised alike while a measurement
        holds the device): the two sides of a side-by-side round then get the same share of a
        loaded host (``sandbox.CpuGroup``)."""
        box = getattr(self.workers.get("candidate"), "sandbox", None)
        theirs = getattr(box, "cpu_group", None)
        if theirs is None:
            return
        ours = CpuGroup.make("reference")
        if ours is None:
            return
        if not ours.add(self.workers["reference"].process.pid):
            ours.remove()
            return
        self.cpu_groups = [ours, theirs]
        if self.sandbox_info is not None:
            self.sandbox_info["reference_cpu_group"] = True  # said in the verdict

    # ---- bookkeeping ---------------------------------------------------------------------
    @contextlib.contextmanager
    def _holding(self, section) -> Iterator[None]:
        """Hold a lock section; the wait for it counts as the ``lock_wait`` stage."""
        started = time.perf_counter()
        with section:
            self.phases["lock_wait"] = self.phases.get("lock_wait", 0.0) + time.perf_counter() - started
            if section is not self.gpu_lock:
                yield
                return
            # A measurement: its processes ahead of the host's other work while it lasts.
            pids = [w.process.pid for w in self.workers.values() if w.process.poll() is None]
            with self._phase("measuring"), priority.boosted(pids, groups=self.cpu_groups,
                                                            rest_shares=DEFAULT_CPU_SHARES) as took:
                if not took and not self._boost_noted:
                    self._boost_noted = True
                    self.notes.append("measurements ran at normal priority (raising it needs CAP_SYS_NICE)")
                yield

    @contextlib.contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        started, wall = time.perf_counter(), time.time()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - started
            self.spans.append((name, round(wall, 3), round(time.time(), 3)))

    def _context(self) -> Context:
        return Context(problem=self.problem.name, candidate=self.candidate.name, device=str(self.device),
                       sandbox=self.sandbox_info, limits=self.limits, phases=self.phases,
                       requests=self.session.ledger(), notes=tuple(self.notes), datapath=self.datapath,
                       spans=tuple(self.spans))

    def _deadlines(self, ref_call_s: float) -> Deadlines:
        # Read at the call: a test may scale the bases down (the red team's full-length hang).
        return Deadlines(self.options.run_timeout_s, ref_call_s, base_s=CALL_BASE_S, factor=CALL_FACTOR)

    def _inputs(self, seed: int, transform: str | None = None) -> tuple[int, dict[str, Any], list[str]]:
        """An input set made by the reference from ``seed``: its pack, its layout, its signature. The
        first one tells the session the problem's sizes (for messages that a problem does not fit)."""
        raw = self.session.call("reference", requests.Inputs(seed=seed, transform=transform),
                                self.options.run_timeout_s, "input factory")
        if not self.session.sizes.input_bytes:
            self.session.sizes = replace(self.session.sizes, input_bytes=int(raw["input_bytes"]),
                                         input_shapes=tuple(raw["signature"][:8]))
        return raw["_fds"][0], raw["layout"], list(raw["signature"])

    # ---- orchestration -------------------------------------------------------------------
    def execute(self) -> Verdict:
        scan = stage_scan(self.candidate.code, self.problem.dtype_name,
                          judge_precision=self.options.tolerance == "strict")
        arch = build_mod.gpu_arch(self.device)
        plan = build_mod.plan_build(self.candidate.code, self.device, self.options.cache_dir, arch)
        missing = build_mod.needs_missing_device(plan.language, self.device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            missing = "no CUDA device is present"
        if missing:
            build = BuildResult(ok=False, seconds=0.0, cache_key=plan.cache_key, language=plan.language, error=missing)
            # The build plan refuses for want of the device, as a worker would (classify says what that is).
            refused = abort_for(WorkerEvent("candidate", "build", Ending.REFUSED, kind="device_missing"), missing)
            return decide(self._context(), scan, build, failure=refused.failure)

        (self.workdir / "problem.py").write_text(self.problem.code)
        (self.workdir / "candidate.py").write_text(self.candidate.code)
        stages = Stages()
        failure = None
        with private_dir("hercules-candidate-") as private:
            try:
                with self._phase("start_workers"):
                    # The candidate's first: its process starts (torch's import) while the
                    # reference's comes from the zygote, which may still be importing torch itself.
                    self.workers["candidate"], self.sandbox_info = start_candidate_worker(
                        self.workdir / "build.log", plan, private, self.device, self.options,
                        hidden=(self.workdir.parent, self.workdir))
                    # On the CPU the experts written in Triton (Liger-Kernel) run under its interpreter.
                    self.workers["reference"] = Worker.start(
                        "reference", self.workdir / "reference.log",
                        env={"TRITON_INTERPRET": "1"} if self.device.type == "cpu" else None)
                    self._group_reference()
                self._run(scan, plan, private, stages)
            except Exception as exc:  # noqa: BLE001 - the parent's own fault, reported as such
                abort = exc if isinstance(exc, Abort) else self.session.harness_fault(
                    f"{type(exc).__name__}: {exc}"[:2000], traceback.format_exc()[-4000:], "evaluating")
                failure = abort.failure
                if stages.build is None:
                    log = self.workers["candidate"].log_tail() if "candidate" in self.workers else ""
                    stages.build = BuildResult(ok=False, seconds=0.0, cache_key=plan.cache_key,
                                               language=plan.language, log=log, error=failure.error)
            finally:
                for worker in self.workers.values():
                    worker.close()
                for group in self.cpu_groups[:1]:  # the reference's own (the sandbox removes its)
                    group.remove()
        return decide(self._context(), scan, stages.build, stages.check, stages.measure, stages.integrity,
                      stages.baselines, failure, stages.sol)

    def _run(self, scan: ScanOutcome, plan: build_mod.BuildPlan, private: Path, stages: Stages) -> None:
        """The stages in order, each result recorded in ``stages`` as it comes (what a failure later
        on leaves of the verdict) and handed to the stages that need it."""
        opts = self.options
        init_seed = secrets.randbits(31)
        # Parameters and buffers drawn away from their defaults, the same way in both workers.
        perturb_seed = secrets.randbits(31) if opts.tolerance == "strict" else None
        # The candidate worker starts its CUDA context and lazy imports while the reference sets up.
        self.session.send("candidate", requests.Prepare(device=str(self.device), dtype=self.problem.dtype_name,
                                                        compiler=_may_compile(self.candidate.code)),
                          "candidate setup")
        with self._phase("reference_setup"):
            setup = self.session.call("reference",
                                      requests.Setup(code=self.problem.code, device=str(self.device),
                                                     dtype=self.problem.dtype_name, init_seed=init_seed,
                                                     tolerance=self.tol.__dict__, perturb_seed=perturb_seed),
                                      opts.run_timeout_s, "reference setup")
        param_bytes = int(setup["param_bytes"])
        self.session.sizes = replace(self.session.sizes, param_bytes=param_bytes)
        perturbation = oracle.parameters_result(setup)
        perturb_seed = perturb_seed if setup.get("perturbed") else None
        footprint = self._footprint()
        with self._phase("candidate_setup"):
            self.session.receive("candidate", requests.Prepare.op, 180.0, "candidate setup")
        with self._phase("datapath"):
            datapath = self.datapath = self._choose_datapath()  # said in the verdict
        stages.build = self.stage_build(plan, setup["init_inputs"], init_seed, perturb_seed, private, scan)
        self._share_or_go_alone(footprint)

        # Work that times nothing shares the device with other evaluations' untimed work; only a
        # measurement in progress may not.
        try:
            with self._holding(shared_section(self.gpu_lock)):
                check, trials = self.stage_check()
        except Abort as abort:
            # Out of memory beside other evaluations' trials is the neighbours' doing: run the
            # checks again with the device to itself before blaming anyone (a fresh candidate
            # worker is not needed: the failed request left its process alive).
            if (self.device.type != "cuda" or not isinstance(self.gpu_lock, DeviceLock)
                    or abort.failure.cause is not Cause.OUT_OF_MEMORY or not self.session.alive("candidate")):
                raise
            self.notes.append(f"out of memory while sharing the device ({abort.failure.error[:160]}); "
                              "checks rerun with the device to itself")
            with self._holding(self.gpu_lock):
                check, trials = self.stage_check()
        with self._holding(shared_section(self.gpu_lock)):
            check = self.stage_oracle(check, trials, perturbation)
        stages.check = check
        if not check.result.correct or not opts.time_candidate:
            stages.integrity = self.stage_integrity()
            return
        with self._phase("roofline"), self._holding(shared_section(self.gpu_lock)):
            roof = self._roofline(trials, param_bytes, check.degeneracy)
        transfers = Transfers(self.session, datapath, trials)
        beside = self._beside(trials, transfers)
        with self._holding(self.gpu_lock):
            with self._phase("timing"):
                stages.measure = measure = self.stage_measure(trials, transfers, beside)
        stages.integrity = self.stage_integrity()
        if not measure.revalidated:
            return
        # Baselines and ceilings only once no process of the candidate is alive: a load it left
        # behind must not inflate them (and, cached, every later speedup for this problem).
        with self._phase("end_candidate"):
            self.session.end_candidate()
        with self._phase("baselines"):
            stages.baselines = self.stage_baselines(trials, measure.timing_sets, transfers, beside)
        with self._phase("ceilings"):
            ceilings = cached_ceilings(self.options.cache_dir, self.device, self._measure_ceilings)
        stages.sol = sol_figures(roof["flops"], roof["min_bytes"], self.problem.dtype_name, ceilings,
                                 measure.timing.median_ms, min_flops=self.problem.metadata.get("min_flops"))

    def _measure_ceilings(self) -> dict[str, Any]:
        # The device to itself only when they are measured: a cached entry is read without waiting
        # for the lock (run 4 of the KernelBench sample waited a median 1.8 s per evaluation here).
        with self._holding(self.gpu_lock):
            return self.session.call("reference", requests.Ceilings(device=str(self.device)), 600.0,
                                     "device ceilings")["ceilings"]

    def _choose_datapath(self) -> str:
        """Device packs ("cuda") for this evaluation if a probe crosses both ways intact: the
        reference exports seeded bytes in device memory, the candidate's process (before any of the
        candidate's code has run) imports them and exports its copy, the reference checks the bytes.
        Otherwise every hand-over stays in sealed host memory files ("memfd"), and a note says why."""
        if self.device.type != "cuda" or not self.options.device_packs:
            return "memfd"
        seed = secrets.randbits(31)
        why = None
        try:
            offer = self.session.call("reference", requests.DatapathOffer(seed=seed), 60.0, "data path probe")
        except Abort as abort:
            why = f"the reference's driver cannot export device memory ({abort.failure.error[:200]})"
        if why is None:
            try:
                echo, echo_fds = self.session.candidate(PackReply, requests.DatapathEcho(layout=offer["layout"]), 60.0,
                                                        "data path probe", tuple(offer["_fds"]))
            except Abort as abort:
                if not self.session.alive("candidate"):
                    raise
                why = f"the candidate's process cannot import or export device memory ({abort.failure.error[:200]})"
            finally:
                close_fds(offer["_fds"])
        if why is None:
            try:
                confirm = self.session.call("reference", requests.DatapathConfirm(seed=seed, layout=echo.layout), 60.0,
                                            "data path probe", tuple(echo_fds))
                why = None if confirm.get("same") else str(confirm.get("why") or "the probe did not come back intact")
            except Abort as abort:
                if not self.session.alive("reference"):
                    raise
                why = f"the reference cannot import the candidate's device memory ({abort.failure.error[:200]})"
            finally:
                close_fds(echo_fds)
        if why is not None:
            self.notes.append(f"data path: host memory files ({why})")
            return "memfd"
        for role in ("reference", "candidate"):
            self.session.call(role, requests.Datapath(medium="cuda"), 60.0, "data path")
        return "cuda"

    def _footprint(self) -> dict[str, Any] | None:
        """This problem's bytes (one input set, the weights, one call's outputs) from a forward on
        the meta device, when evaluations share the device: asked while the candidate worker still
        starts (the reference waits for it there; on the H200 this request took 5.2 s of a 19 s
        evaluation on the critical path), kept per problem."""
        if self.occupancy is None:
            return None
        key = f"{self.problem.content_hash}-v{CACHE_FORMAT}"
        found = self.cache.get("footprint", key)
        if found is None:
            try:
                found = self.session.call("reference", requests.Footprint(limit_s=2.0), 120.0, "footprint")
            except Abort as abort:
                if abort.failure.cause is not Cause.REFERENCE:
                    raise
                self.notes.append(f"footprint unknown: {abort.failure.error[:160]}")
                return None
            found = {k: found.get(k) for k in FOOTPRINT_KEYS}
            self.cache.put("footprint", key, found)
        return found

    def _share_or_go_alone(self, found: dict[str, Any] | None) -> None:
        """Go on alone when this problem's data (``found``, from ``_footprint``) fills a large share
        of the device (ALONE_SHARE), before anything large is allocated."""
        if self.occupancy is None or found is None:
            return
        need = sum(int(found.get(k) or 0) for k in FOOTPRINT_KEYS)
        total = device_memory_bytes(self.device)
        if need > ALONE_SHARE * total:
            with self._phase("alone_wait"):
                self.occupancy.go_alone()
            self.notes.append(f"evaluated with no other evaluation in flight: one input set, its outputs and the "
                              f"weights take {need / 1e9:.1f} GB, over 1/{round(1 / ALONE_SHARE)} of the device's "
                              f"{total / 1e9:.0f} GB")

    # ---- stages --------------------------------------------------------------------------
    def stage_build(self, plan: build_mod.BuildPlan, init_inputs: list[Any], init_seed: int,
                    perturb_seed: int | None, private: Path, scan: ScanOutcome) -> BuildResult:
        was_cached = plan.cached
        with self._phase("build"):
            build = requests.Build(code=self.candidate.code, path=str(private / "candidate.py"),
                                   device=str(self.device), dtype=self.problem.dtype_name, init_inputs=init_inputs,
                                   init_seed=init_seed, perturb_seed=perturb_seed,
                                   trace_lines=bool(scan.conditional))
            # Its failures are build errors (classify.BUILD_OPS).
            idle_s = build_idle_s(self.phases.get("reference_setup", 0.0))
            self.limits["build_idle_s"] = idle_s
            built, _ = self.session.candidate(BuildReply, build, self.options.build_timeout_s, "build", idle_s=idle_s)
        return BuildResult(ok=True, seconds=built.seconds, cache_key=plan.cache_key, cache_hit=was_cached,
                           language=plan.language, log=self.workers["candidate"].log_tail(2000))

    def stage_check(self) -> tuple[CheckOutcome, Trials]:
        """Fresh inputs per trial, made by the reference; the candidate's sealed outputs judged by it."""
        opts = self.options
        findings: list[Finding] = []
        executed: set[int] = set()
        max_abs, rel, ref_errs = 0.0, 0.0, []
        ok_kernelbench = True
        flags: set[str] = set()
        error = None
        correct = True
        seeds: list[int] = []
        specs: list[dict[str, Any]] = []
        signature = ""
        deadlines = self._deadlines(0.0)
        with self._phase("trials"):
            for trial in range(opts.trials):
                seed = secrets.randbits(63)
                seeds.append(seed)
                fd, layout, made = self._inputs(seed)
                if trial == 0:
                    signature = input_signature(made)
                    spec = self.session.call("reference", requests.Specs(seed=seed), opts.run_timeout_s, "reference")
                    specs = spec["specs"]
                    self.session.sizes = replace(self.session.sizes, output_bytes=output_bytes(specs))
                    deadlines = self._deadlines(float(spec["call_ms"]) / 1e3)
                    self.limits["call_s"] = deadlines.call_s()
                    self.limits["first_call_s"] = deadlines.call_s() + FIRST_CALL_EXTRA_S
                try:
                    # The first call may compile (JIT): a compiler running in the sandbox extends it.
                    timeout = self.options.build_timeout_s if trial == 0 else deadlines.call_s()
                    idle = deadlines.call_s() + FIRST_CALL_EXTRA_S if trial == 0 else None
                    run, out_fds = self.session.candidate(RunReply,
                                                          requests.Run(layout=layout, specs=specs, trace=trial == 0,
                                                                       first=trial == 0),
                                                          timeout, f"trial {trial}", (fd,), idle)
                finally:
                    close_fds([fd])
                executed.update(run.executed_lines)
                findings.extend(_run_findings(run))
                result = self.judge.compare(seed, run, out_fds, f"comparison, trial {trial}").result
                if result.ref_err is not None:
                    ref_errs.append(result.ref_err)
                max_abs, rel = max(max_abs, result.max_abs_err), max(rel, result.rel_err)
                ok_kernelbench = ok_kernelbench and result.ok_kernelbench
                flags |= set(result.flags)
                if not result.correct:
                    correct = False
                    error = "; ".join(f"trial {trial}: {p}" for p in result.problems[:3])
                    break
        ref_err = max(ref_errs) if ref_errs else None
        findings.extend(Finding(f, f"comparison: {f}") for f in sorted(flags))
        if correct and is_downcast(rel, ref_err, self.tol):
            findings.append(Finding(Flag.PRECISION_DOWNCAST.value,
                                    f"relative error {rel:.2e} against float64, the {self.problem.dtype_name} "
                                    f"reference itself has {ref_err:.2e}"))
        result = CheckResult(correct=correct, trials=opts.trials, max_abs_err=max_abs, rel_err=rel, ref_rel_err=ref_err,
                             flags=tuple(sorted(flags)), error=error, correct_kernelbench=ok_kernelbench)
        trials = Trials(seeds=tuple(seeds), specs=specs, deadlines=deadlines, signature=signature)
        return CheckOutcome(result=result, findings=tuple(unique(findings)), executed_lines=frozenset(executed)), trials

    def stage_oracle(self, check: CheckOutcome, trials: Trials,
                     perturbation: oracle.TransformResult | None) -> CheckOutcome:
        """After the trials: which inputs the problem's outputs ignore (a degenerate problem, said
        in the verdict and left out of the speed-of-light floor); then, at the strict tolerance and
        for a candidate right in the trials, the trials' checks again on each transform of the
        inputs the problem's reference stays right on (oracle.py, transforms.py)."""
        findings, executed = list(check.findings), set(check.executed_lines)
        results = [oracle.after_trials(perturbation, check.result.correct)] if perturbation else []
        if oracle.trials_note(results[0] if results else None):
            self.notes.append(oracle.trials_note(results[0]))
        with self._phase("oracle"):
            degeneracy = self._degeneracy(trials)
            if degeneracy is not None:
                self.notes.append(oracle.degeneracy_note(degeneracy))
            if check.result.correct and self.options.tolerance == "strict":
                for name in oracle.TRANSFORM_NAMES:
                    results.append(self._transformed_trial(name, check.result.ref_rel_err, trials, findings, executed))
                if any(r.name in oracle.TRANSFORM_NAMES and r.outcome != oracle.SKIPPED for r in results):
                    wrong = self._restore_trial_sets(trials)
                    if wrong:
                        check = replace(check, result=replace(check.result, correct=False, error=wrong))
        fragile = oracle.fragile_finding(results)
        if fragile is not None:
            findings.append(fragile)
        skipped = oracle.skipped_note(results)
        if skipped:
            self.notes.append(skipped)
        return replace(check, result=replace(check.result, transforms=oracle.summary(results)),
                       findings=tuple(unique(findings)), executed_lines=frozenset(executed), degeneracy=degeneracy)

    def _degeneracy(self, trials: Trials):
        """The reference's outputs on a trial's set against two other draws (dependence.py): the
        latest trials' seeds, whose outputs the reference still holds, or fresh ones."""
        seeds = list(trials.seeds[-3:])
        seeds += [secrets.randbits(63) for _ in range(3 - len(seeds))]
        found = self.session.call("reference", requests.Dependence(seeds=seeds), self.options.run_timeout_s,
                                  "input dependence")
        if found.get("error"):
            self.notes.append(f"whether the outputs depend on every input is unknown: {str(found['error'])[:200]}")
            return None
        degeneracy = oracle.degeneracy(found)
        degenerate.record(self.options.cache_dir, self.problem.content_hash,
                          to_jsonable(degeneracy) if degeneracy else None)  # for ``hercules list``
        return degeneracy

    def _transformed_trial(self, name: str, usual_err: float | None, trials: Trials, findings: list[Finding],
                           executed: set[int]) -> oracle.TransformResult:
        """One trial on a fresh set under transform ``name``, judged as the trials are, when the
        reference stays right there; a candidate that raises on it (its process alive) fails it."""
        seed = secrets.randbits(63)
        found = self.session.call("reference", requests.TransformCheck(seed=seed, transform=name),
                                  self.options.run_timeout_s, f"reference on transform {name}")
        reason = oracle.skip_reason(oracle.ReferenceOnTransform.from_reply(name, found), usual_err, self.tol,
                                    oracle.has_integer_outputs(trials.specs))
        if reason is not None:
            return oracle.TransformResult(name, oracle.SKIPPED, reason)
        fd, layout, _signature = self._inputs(seed, transform=name)
        try:
            run, out_fds = self.session.candidate(RunReply, requests.Run(layout=layout, specs=trials.specs),
                                                  trials.deadlines.call_s(), f"transform {name}", (fd,))
        except Abort as abort:
            if abort.failure.cause is not Cause.CANDIDATE_ERROR or not self.session.alive("candidate"):
                raise
            return oracle.TransformResult(name, oracle.FAILED, abort.failure.error)
        finally:
            close_fds([fd])
        executed.update(run.executed_lines)
        findings.extend(_run_findings(run))
        result = self.judge.compare(seed, run, out_fds, f"comparison, transform {name}").result
        if result.correct:
            return oracle.TransformResult(name, oracle.PASSED)
        return oracle.TransformResult(name, oracle.FAILED, "; ".join(result.problems[:2]) or "outputs differ")

    def _restore_trial_sets(self, trials: Trials) -> str | None:
        """The trials' sets run again, in order, the first starting the candidate's list of kept
        sets afresh: the candidate keeps every set it runs on for timing, and the parent knows its
        timing buffers by the trials' seeds (``policy.timing_set_seeds``), so the transformed sets
        must not stay among them. Judged again as in the trials; what is wrong, or None."""
        for index, seed in enumerate(trials.seeds):
            fd, layout, _signature = self._inputs(seed)
            try:
                run, out_fds = self.session.candidate(RunReply,
                                                      requests.Run(layout=layout, specs=trials.specs, first=index == 0),
                                                      trials.deadlines.call_s(), f"trial {index} again", (fd,))
            finally:
                close_fds([fd])
            result = self.judge.compare(seed, run, out_fds, f"comparison, trial {index} again").result
            if not result.correct:
                return "; ".join(f"trial {index}, run again after the transformed inputs: {p}"
                                 for p in result.problems[:2])
        return None

    def _beside(self, trials: Trials, transfers: Transfers) -> Beside | None:
        """Eager, to be timed in the same rounds as the candidate, when it is a baseline here."""
        if "eager" not in self._baseline_names():
            return None
        best = (self.cache.get("devices", f"{device_key(self.device)}-probe") or {}).get("ms")
        return Beside(self.session, transfers, trials, self.device, self.options.timing_budget_s,
                      self.options.warmup_s, best_probe_ms=best)

    def _baseline_names(self) -> list[str]:
        names = self.options.baselines or available_baselines(self.device)
        return [n for n in names if n in available_baselines(self.device)]

    def stage_measure(self, trials: Trials, transfers: Transfers, beside: Beside | None = None) -> MeasureOutcome:
        """The candidate's time, bounded by the parent's own clock, and revalidation in its very
        timing buffers (measure.py; the decisions in policy.py)."""
        settings = MeasureSettings(timing_budget_s=self.options.timing_budget_s, warmup_s=self.options.warmup_s,
                                   revalidation_sets=self.options.revalidation_sets,
                                   interpreted=self.device.type == "cpu" and detect_interpreted(self.candidate.code))
        return Measurement(self.session, self.judge, transfers, trials, self.device, settings, self.notes,
                           beside).run()

    def stage_integrity(self) -> IntegrityOutcome:
        """Tripwires inside the candidate's process: patched attributes, settings, threads."""
        if not self.session.alive("candidate"):
            return IntegrityOutcome()
        with self._phase("integrity"):
            try:
                reply, _ = self.session.candidate(IntegrityReply, requests.Integrity(), 60.0, "integrity")
            except Abort as abort:
                return IntegrityOutcome(notes=(f"integrity report unavailable: {abort.failure.error[:200]}",))
        findings = []
        if reply.patched:
            findings.append(Finding(Flag.MONKEY_PATCH.value, "replaced: " + ", ".join(reply.patched[:8])))
        if reply.settings:
            findings.append(Finding(Flag.GLOBAL_STATE.value, "changed settings: " + ", ".join(reply.settings[:8])))
        if reply.persisting_l2_bytes:
            findings.append(Finding(Flag.GLOBAL_STATE.value,
                                    f"the persisting-L2 carve-out was raised by {reply.persisting_l2_bytes} bytes "
                                    "(data kept there survives the L2 flush)"))
        if reply.threads:
            findings.append(Finding(Flag.BACKGROUND_THREAD.value, "threads left running: " + ", ".join(reply.threads[:8])))
        notes = ("process-local settings changed (numerics unaffected): " + ", ".join(reply.neutral_settings[:8]),) \
            if reply.neutral_settings else ()
        return IntegrityOutcome(findings=tuple(findings), notes=notes)

    def stage_baselines(self, trials: Trials, timing_sets: int, transfers: Transfers,
                        beside: Beside | None = None) -> BaselineOutcome:
        """Every baseline timed like the candidate (in-process median bounded by the parent's wall
        figure), over the trials' input sets. Compiled baselines are cached per (problem, device,
        versions) and only when the device was idle; compiling happens outside the exclusive section.
        A baseline already timed beside the candidate (``beside``) keeps that figure."""
        names = self._baseline_names()
        notes: list[str] = []
        op = self.problem.metadata.get("expert")
        if "expert" in names and not op:
            names.remove("expert")
            if self.options.baselines:  # asked for by name: say why there is none
                notes.append("no expert baseline: the problem names no operation (HERCULES = {\"expert\": ...})")
        key = f"{self.problem.content_hash}-{device_key(self.device)}-v{CACHE_FORMAT}"
        if "expert" in names:
            from hercules.experts.registry import versions

            # A cached expert time holds for the library versions it was chosen among.
            key += "-expert-" + hashlib.sha256(json.dumps([op, versions(op)]).encode()).hexdigest()[:12]
        cached = self.cache.get("baselines", key) or {}
        expert_report = cached.get("expert_report")
        # Eager costs no compilation, so it is measured afresh beside every candidate.
        missing = [n for n in names if n not in cached or n == "eager"]
        seeds = list(trials.seeds[:max(1, min(len(trials.seeds), timing_sets))])
        measured: dict[str, float | None] = {}
        paired = beside is not None and beside.figure_ms() is not None
        if paired and beside.name in missing:
            measured[beside.name] = beside.figure_ms()
            missing.remove(beside.name)
        # Baselines timed apart reach the candidate through eager (``Beside.bridge``): a cached
        # bridge holds as the cached time does.
        bridges = {name: SideBySide(*figures) for name, figures in (cached.get("bridges") or {}).items()
                   if paired and name in names and name not in missing}
        uncached: set[str] = set()
        idle = True
        for name in missing:
            if not self.session.alive("reference"):
                measured[name] = None
                notes.append(f"baseline {name} not timed: the reference worker ended with an earlier baseline")
                continue
            try:
                if name in COMPILED and self.device.type == "cuda":
                    # Compiling holds no section of the device: on the H200 a KernelBench run's
                    # measurements waited 18.9 s (median) for the device where they held it ~5.6 s,
                    # behind compilations of 4-10 s in the shared section (the lock prefers writers,
                    # but a writer still waits for the sharers inside). Its device work is one call.
                    self.session.call("reference", requests.BaselineCompile(name=name, seed=seeds[0]),
                                  max(self.options.run_timeout_s, 900.0),
                                  f"baseline {name}")
                with self._holding(shared_section(self.gpu_lock)):
                    prepared = self.session.call("reference",
                                             requests.BaselinePrepare(name=name, seeds=seeds, expert_op=op),
                                             max(self.options.run_timeout_s, 900.0),
                                             f"baseline {name}")
                if name == "expert":
                    from hercules.experts.choose import summary

                    expert_report = prepared["expert"]
                    notes.append(summary(expert_report))
                    if expert_report.get("chosen") is None:  # none available and correct: nothing to time
                        measured[name] = None
                        continue
                with self._holding(self.gpu_lock):
                    if name == missing[0]:
                        idle = self._device_idle(notes)
                    measured[name] = self._baseline_time(name, trials, transfers)
                    if paired:
                        self._bridge(name, measured[name], beside, transfers, bridges, notes)
            except Abort as abort:
                # The candidate was judged and timed already: a baseline that cannot run here (out of
                # memory, unsupported by torch.compile, a fault of its own) is left out of this
                # verdict, never made the candidate's status (KernelBench 31_VisionAttention's
                # cudagraph baseline once ran out of memory on the H200 and its reference, evaluated
                # as its own candidate, came out runtime_error).
                measured[name] = None
                notes.append(f"baseline {name} left out ({abort.failure.cause.value}): {abort.failure.error[:200]}")
                if abort.failure.cause is not Cause.REFERENCE:  # may go another time: not cached as missing
                    uncached.add(name)
            finally:
                if self.session.alive("reference"):
                    with contextlib.suppress(Abort):
                        self.session.call("reference", requests.Release(name=name), 120.0, "baseline release")
        if beside is not None:
            beside.release()
        write = baselines_to_cache(cached, measured, uncached, idle,
                                   {name: bridges[name] for name in measured if name in bridges})
        if write is not None:
            if "expert" in measured:
                write["expert_report"] = expert_report
            self.cache.put("baselines", key, write)
        elif measured:
            notes.append("baselines not cached: the device was not idle while they were timed")
        times = {n: measured.get(n, cached.get(n)) for n in names}
        return BaselineOutcome(times_ms=times, notes=tuple(notes), expert=expert_report if "expert" in names else None,
                               bridges=bridges)

    def _bridge(self, name: str, time_ms: float, beside: Beside, transfers: Transfers,
                bridges: dict[str, SideBySide], notes: list[str]) -> None:
        """``name`` against eager in the same rounds (``Beside.bridge``), into ``bridges``; a
        failure there leaves the baseline's time standing with no interval, and says why."""
        calls = burst_calls(max(time_ms, beside.figure_ms() or 0.0, 1e-4), transfers.overhead_ms(), 1,
                            self.device.type)
        try:
            found = beside.bridge(name, calls)
        except Abort as abort:
            notes.append(f"speedup against {name}: no interval ({beside.name} beside it failed: "
                         f"{abort.failure.error[:160]})")
            return
        if found is None:
            notes.append(f"speedup against {name}: no interval (too few valid rounds beside {beside.name})")
            return
        bridges[name] = found

    def _baseline_time(self, name: str, trials: Trials, transfers: Transfers) -> float:
        """A baseline's time as the candidate's is taken (in-process median bounded by the parent's
        long bursts), the fastest of BASELINE_ROUNDS such figures."""
        opts = self.options
        figures = []
        for _ in range(BASELINE_ROUNDS):
            raw = self.session.call("reference",
                                requests.BaselineTime(name=name, budget_s=opts.timing_budget_s, warmup_s=opts.warmup_s),
                                max(opts.run_timeout_s, 900.0), f"baseline {name}")
            event_ms = float(raw["timing"]["median_ms"])
            calls = burst_calls(max(event_ms, 1e-4), transfers.overhead_ms(), 1, self.device.type)
            # As the candidate's long burst: the faster counts.
            wall_ms = min(trusted_burst_ms(self.session, transfers, name, calls, trials.seeds[0],
                                           max(opts.run_timeout_s, 900.0))
                          for _ in range(LONG_BURSTS))
            figures.append(max(event_ms, wall_ms))
            if baseline_confirmed(self.device.type, name, event_ms, wall_ms):
                break  # the parent's clock confirms the events: another round would read the same
        return min(figures)

    def _device_idle(self, notes: list[str]) -> bool:
        """A fixed workload on the device, against the best it ever did here: slower means busy."""
        probe = self.session.call("reference", requests.Probe(), 120.0, "idle probe").get("ms")
        if probe is None:
            return True
        key = f"{device_key(self.device)}-probe"
        best = (self.cache.get("devices", key) or {}).get("ms")
        if best is None or probe < best:
            self.cache.put("devices", key, {"ms": probe})
        if device_busy(probe, best):
            notes.append(f"idle probe {probe:.3f} ms against a best of {best:.3f} ms")
            return False
        return True

    def _roofline(self, trials: Trials, param_bytes: int, degeneracy) -> dict[str, int]:
        """FLOPs and the fewest bytes one forward must move (on a trial's inputs; times nothing).
        Kept per problem and input shapes: counting FLOPs costs seconds per evaluation."""
        key = f"{self.problem.content_hash}-{self.device.type}-{trials.signature}-v{CACHE_FORMAT}"
        roof = self.cache.get("roofline", key)
        if roof is None:
            roof = self.session.call("reference", requests.Roofline(seed=trials.seeds[0]), self.options.run_timeout_s,
                                 "roofline")
            roof = {k: int(roof[k]) for k in ("flops", "input_bytes", "output_bytes")}
            self.cache.put("roofline", key, roof)
        return {"flops": int(roof["flops"]),
                "min_bytes": floor_bytes(int(roof["input_bytes"]), int(roof["output_bytes"]), param_bytes,
                                         degeneracy)}


# ---- pure helpers of the stages -----------------------------------------------------------


def stage_scan(code: str, dtype_name: str, judge_precision: bool = True) -> ScanOutcome:
    """Static findings; those whose evidence is a code path are conditional on that path running.
    ``judge_precision`` False (upstream KernelBench's tolerance decides): lower precision is said,
    not flagged."""
    from hercules.harness.static_scan import scan_candidate

    findings, conditional, notes = [], [], []
    for f in scan_candidate(code, dtype_name):
        if f.note or (not judge_precision and f.flag == Flag.PRECISION_DOWNCAST.value):
            # numerics-neutral, process-local (e.g. cudnn.benchmark), or precision not judged: said
            notes.append(f"static: line {f.line}: {f.reason}")
        elif f.conditional and f.fallback_lines:
            conditional.append((f.flag, tuple(tuple(r) for r in f.fallback_lines)))
        else:
            findings.append(Finding(f.flag, f"static: line {f.line}: {f.reason}"))
    return ScanOutcome(findings=tuple(findings), conditional=tuple(conditional), notes=tuple(notes))


def _run_findings(run: RunReply) -> list[Finding]:
    found = []
    if run.aliases:
        found.append(Finding(Flag.OUTPUT_ALIASES_INPUT.value, "an output shares memory with an input"))
    if run.mutated:
        found.append(Finding(Flag.INPUT_MUTATED.value, "the candidate modified its inputs"))
    if run.overwrote:
        found.append(OVERWRITTEN_FINDING)
    if run.swallowed:
        found.append(Finding(Flag.SWALLOWED_EXCEPTION.value, "exception raised and hidden inside forward: "
                             + run.swallowed[0]))
    return found


# Words in a candidate's source that say it may run torch's compiler: its worker then imports the
# compiler before the integrity snapshot, as it always does on a GPU. A hint, not a check: a
# candidate that reaches the compiler another way is still judged right (integrity knows the
# compiler's own wrappers), it only pays the import later.
_COMPILER_WORDS = ("compile", "dynamo", "inductor", "export")


def _may_compile(code: str) -> bool:
    return any(word in code for word in _COMPILER_WORDS)
