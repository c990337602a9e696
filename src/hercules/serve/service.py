"""The reward service without HTTP: admission queue, cache, de-duplication, executor, reward.

One submission flows like this:

    parse (problem by name or code, candidate code or a completion to extract it from, options)
      -> content key -> cache hit?            answer from SQLite
                     -> same key in flight?   wait for that evaluation (never evaluated twice)
                     -> bounded queue         (full for admission_timeout_s: QueueFull, HTTP 429)
                     -> dispatcher -> executor (retries dead workers itself) -> cache -> answer

Dispatchers are as many as the host can time honestly at once (``admission.py``: on a CPU host one
per ``HERCULES_WORKER_THREADS`` cores, on GPUs the executor's capacity, each measurement holding
its device's lock), so the queue holds exactly what waits; each answer says how many were ahead
of it and how long it waited.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hercules import interrupt
from hercules.executor import (
    EvalExecutor,
    EvaluationLost,
    Tracked,
    infrastructure_failure,
)
from hercules.harness.baselines import known_baselines
from hercules.harness.evaluate import EvalOptions, device_key, resolve_device
from hercules.harness.records import Verdict
from hercules.problems.model import Candidate, Problem
from hercules.reward import Reward, RewardConfig, RunningNormalizer, compute_reward
from hercules.serve.admission import TimedLimit, chosen_limit
from hercules.serve.cache import VerdictCache, submission_key
from hercules.serve.metrics import Metrics
from hercules.serve.problems import BadRequest, resolve_problem


def _baseline_names(value: Any) -> tuple[str, ...]:
    """A list of known baseline names (a bare string would become a tuple of its letters)."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError("baselines must be a list of names")
    return known_baselines(value)


@dataclass(frozen=True)
class _Number:
    """A number a request may set, between bounds: a request's trials or budget beyond them (or
    infinite) would hold one of the host's few timed evaluations for hours, and a fraction where a
    count is meant would be cut silently."""

    integer: bool
    low: float
    high: float
    low_open: bool = False  # the low bound itself excluded (a budget of 0 s times nothing)

    def __call__(self, value: Any) -> int | float:
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (self.integer and not whole):
            raise ValueError(f"must be {'an integer' if self.integer else 'a number'} (got {value!r})")
        below = value <= self.low if self.low_open else value < self.low
        if math.isnan(value) or below or value > self.high:
            low = f"above {self.low:g}" if self.low_open else f"at least {self.low:g}"
            raise ValueError(f"must be {low} and at most {self.high:g} (got {value!r})")
        return int(value) if self.integer else float(value)


# Evaluation options a request may set; the device, folders and timeouts stay the server's.
REQUEST_OPTIONS = {"trials": _Number(True, 1, 100), "timing_budget_s": _Number(False, 0, 60, low_open=True),
                   "warmup_s": _Number(False, 0, 10), "revalidation_sets": _Number(True, 1, 16),
                   "baselines": _baseline_names}


def default_options(executor: EvalExecutor, *, budget_s: float = 0.3, trials: int = 5,
                    baselines: tuple[str, ...] | None = None, base: EvalOptions | None = None) -> EvalOptions:
    """The server's evaluation options: ``base`` (the command line's evaluation flags) or the given
    budget, trials and baselines. On the CPU only eager is timed beside each submission (compiling
    the other baselines takes minutes there); on a GPU every baseline (cached per problem). The
    device is the executor's slot's."""
    if base is not None:
        budget_s, trials, baselines = base.timing_budget_s, base.trials, base.baselines
    if baselines is None and executor.devices[0].endswith("cpu"):
        baselines = ("eager",)
    return replace(base or EvalOptions(), device="auto", trials=trials, timing_budget_s=budget_s,
                   warmup_s=min(0.05, budget_s / 4), baselines=baselines)


def build_service(executor: EvalExecutor, *, reward: RewardConfig | None = None, cache_path: Path | None = None,
                  budget_s: float = 0.3, trials: int = 5, baselines: tuple[str, ...] | None = None,
                  queue_size: int = 256, admission_timeout_s: float = 30.0,
                  base: EvalOptions | None = None, max_timed: int | None = None) -> RewardService:
    """The service as the CLI and the in-process trainer backend run it (no cache without a path);
    ``base``: evaluation options from the command line, in place of budget, trials and baselines;
    ``max_timed``: timed evaluations at once (default: what the host can time honestly)."""
    limit = chosen_limit(executor.devices, executor.capacity, max_timed)
    return RewardService(executor, options=default_options(executor, budget_s=budget_s, trials=trials,
                                                           baselines=baselines, base=base),
                         reward=reward, cache=VerdictCache(cache_path) if cache_path is not None else None,
                         queue_size=queue_size, admission_timeout_s=admission_timeout_s, limit=limit)


def evaluation_scope(executor: EvalExecutor) -> str:
    """The devices and software verdicts come from (part of every cache key): the executor's
    devices and the core's own device key (GPU name, torch and Triton versions)."""
    return f"{','.join(sorted(set(executor.devices)))}|{device_key(resolve_device('auto'))}"


class QueueFull(RuntimeError):
    """No room in the queue within the admission timeout (HTTP 429: try again later)."""


@dataclass(frozen=True)
class Submission:
    problem: Problem
    candidate: Candidate | None  # None: no code could be extracted from the completion
    options: EvalOptions
    reward: RewardConfig
    key: str
    extraction: str = ""


@dataclass(frozen=True)
class Queued:
    """An evaluation's wait for a slot: submissions ahead of it when it was queued (running or
    waiting) and the seconds until it started."""

    position: int = 0
    waited_s: float = 0.0


@dataclass(frozen=True)
class Answer:
    key: str
    status: str  # the verdict's status, "no_code", or "error" (the evaluation was lost)
    reward: float | None
    speedup: float | None
    cached: bool = False
    # The speedup's 95% interval where it was measured side by side with its baseline: a trainer
    # can tell a reward inside the noise from a real gain.
    interval: tuple[float, float] | None = None
    deduplicated: bool = False
    attempts: int = 0
    latency_s: float = 0.0
    verdict: Verdict | None = None
    error: str | None = None
    note: str = ""
    queued: Queued | None = None  # None: answered without an evaluation slot (cache, no code)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key, "status": self.status, "reward": self.reward, "speedup": self.speedup,
            "interval": list(self.interval) if self.interval else None, "cached": self.cached, "deduplicated": self.deduplicated, "attempts": self.attempts,
            "latency_ms": round(self.latency_s * 1e3, 2), "error": self.error, "note": self.note,
            "queue_position": self.queued.position if self.queued else None,
            "queue_wait_ms": round(self.queued.waited_s * 1e3, 2) if self.queued else None,
            "verdict": self.verdict.to_json() if self.verdict else None,
        }


@dataclass(frozen=True)
class _Evaluated:
    tracked: Tracked
    queued: Queued


@dataclass
class _Job:
    submission: Submission
    future: asyncio.Future = field(repr=False)
    position: int = 0
    queued_at: float = field(default_factory=time.perf_counter)


class RewardService:
    def __init__(self, executor: EvalExecutor, *, options: EvalOptions, reward: RewardConfig | None = None,
                 cache: VerdictCache | None = None, queue_size: int = 256, admission_timeout_s: float = 30.0,
                 limit: TimedLimit | None = None):
        if queue_size < 1:
            raise ValueError(f"queue size must be at least 1 (got {queue_size})")
        self.limit = limit or chosen_limit(executor.devices, executor.capacity, None)
        self.executor = executor
        self.options = options
        self.reward = reward or RewardConfig()
        self.cache = cache
        self.queue_size = queue_size
        self.admission_timeout_s = admission_timeout_s
        self.metrics = Metrics()
        self._normalizers: dict[tuple[str, str], RunningNormalizer] = {}
        self._inflight: dict[str, asyncio.Future] = {}
        self._queue: asyncio.Queue[_Job] | None = None
        self._dispatchers: list[asyncio.Task] = []
        self._running = 0
        self._running_max = 0  # the most evaluations that ran at once (never above the limit)
        self.scope = evaluation_scope(executor)

    # ---- life cycle ----------------------------------------------------------------------
    async def start(self) -> None:
        self._queue = asyncio.Queue(maxsize=self.queue_size)
        # One dispatcher per evaluation the host can time honestly at once: the rest wait in the queue.
        self._dispatchers = [asyncio.create_task(self._dispatch()) for _ in range(self.limit.at_once)]

    async def stop(self) -> None:
        for task in self._dispatchers:
            task.cancel()
        await asyncio.gather(*self._dispatchers, return_exceptions=True)
        await asyncio.to_thread(self.executor.close)
        if self.cache is not None:
            self.cache.close()

    # ---- requests ------------------------------------------------------------------------
    def parse(self, item: Any, defaults: dict[str, Any] | None = None) -> Submission:
        """One request item -> Submission; BadRequest with a one-line reason otherwise."""
        if not isinstance(item, dict):
            raise BadRequest("each submission must be a JSON object")
        merged = {**(defaults or {}), **item}
        if merged.get("problem") is None:
            raise BadRequest("missing field 'problem': a built-in name (GET /v1/problems), KernelBench source "
                             "code, or {\"code\": ..., \"name\": ...}")
        problem = resolve_problem(merged.get("problem"))
        candidate, extraction = self._candidate(merged, problem)
        options = self._options(merged.get("options"))
        reward = self._reward(merged.get("reward"))
        key = submission_key(problem, candidate.code if candidate else "", options, self.scope)
        return Submission(problem, candidate, options, reward, key, extraction)

    def _reward(self, given: Any) -> RewardConfig:
        if given is None:
            return self.reward
        if not isinstance(given, dict):
            raise BadRequest(f"reward must be an object of reward options (got {type(given).__name__})")
        try:
            return replace(self.reward, **given)
        except (TypeError, ValueError) as exc:
            raise BadRequest(f"reward options: {exc}") from None

    def _candidate(self, item: dict[str, Any], problem: Problem) -> tuple[Candidate | None, str]:
        spec = item.get("candidate")
        name = str(item.get("name") or "candidate")
        if isinstance(spec, dict):
            name, spec = str(spec.get("name") or name), spec.get("code")
        if spec is not None and not isinstance(spec, str):  # present, but not source text
            raise BadRequest(f"'candidate' must be ModelNew source text or {{\"code\": ..., \"name\": ...}} "
                             f"(got {type(spec).__name__})")
        if isinstance(spec, str) and spec.strip():
            return Candidate(name=name, code=spec, source="request", problem=problem.name), "code"
        completion = item.get("completion")
        if completion is not None and not isinstance(completion, str):
            raise BadRequest(f"'completion' must be the model's output as text (got {type(completion).__name__})")
        if isinstance(completion, str):
            from hercules.optimize.extract import extract_code

            found = extract_code(item["completion"])
            if found.code is None:
                return None, found.reason
            return Candidate(name=name, code=found.code, source="completion", problem=problem.name), found.reason
        raise BadRequest("missing field 'candidate': give 'candidate' (ModelNew source) or 'completion' "
                         "(model output holding it)")

    def _options(self, given: Any) -> EvalOptions:
        if given is None:
            return self.options
        if not isinstance(given, dict):
            raise BadRequest("options must be an object")
        unknown = sorted(set(given) - set(REQUEST_OPTIONS))
        if unknown:
            raise BadRequest(f"options not settable per request: {', '.join(unknown)} "
                             f"(settable: {', '.join(REQUEST_OPTIONS)})")
        values = {}
        for name, value in given.items():
            try:
                values[name] = REQUEST_OPTIONS[name](value)
            except (TypeError, ValueError) as exc:
                raise BadRequest(f"options.{name}: {exc}") from None
        return replace(self.options, **values)

    async def evaluate(self, submission: Submission) -> Answer:
        started = time.perf_counter()
        self.metrics.count("submissions")
        answer = await self._answer(submission)
        answer = replace(answer, latency_s=time.perf_counter() - started)
        self.metrics.answered(answer.status, answer.latency_s)
        return answer

    async def evaluate_many(self, submissions: list[Submission]) -> list[Answer]:
        if len(submissions) > self.queue_size:
            raise BadRequest(f"batch of {len(submissions)} exceeds the queue size {self.queue_size}")
        self.metrics.count("batches")
        return list(await asyncio.gather(*(self.evaluate(s) for s in submissions)))

    async def _answer(self, sub: Submission) -> Answer:
        if sub.candidate is None:
            self.metrics.count("no_code")
            reward = compute_reward(None, sub.reward)
            return Answer(sub.key, "no_code", reward.value, None, error=sub.extraction, note=reward.note)
        if self.cache is not None:
            verdict = await asyncio.to_thread(self.cache.get, sub.key)
            if verdict is not None:
                self.metrics.count("cache_hits")
                return self._scored(sub, Tracked(verdict, 0), cached=True)
        shared = self._inflight.get(sub.key)
        deduplicated = shared is not None
        if shared is None:
            shared = self._inflight[sub.key] = asyncio.get_running_loop().create_future()
            # Those ahead of it: running, and waiting (a full queue: as many as it holds).
            job = _Job(sub, shared, position=self._running + self.queue_depth)
            try:
                try:
                    self._queue.put_nowait(job)
                except asyncio.QueueFull:
                    await asyncio.wait_for(self._queue.put(job), self.admission_timeout_s)
            except asyncio.TimeoutError:
                self._inflight.pop(sub.key, None)
                shared.set_exception(QueueFull(
                    f"queue full: {self.queue_size} submission(s) waiting behind {self._running} timed "
                    f"evaluation(s) (at most {self.limit.at_once} at once: what this host can time honestly), "
                    f"no room within {self.admission_timeout_s:g} s; submit again later"))
            except asyncio.CancelledError:  # the request went away before it was queued: so must its
                self._inflight.pop(sub.key, None)  # key, or twins arriving later would wait forever
                shared.set_exception(QueueFull("the submission was withdrawn before it was queued"))
                raise
        else:
            self.metrics.count("deduplicated")
        try:
            done: _Evaluated = await asyncio.shield(shared)
        except EvaluationLost as exc:
            return Answer(sub.key, "error", None, None, deduplicated=deduplicated, error=str(exc))
        return self._scored(sub, done.tracked, deduplicated=deduplicated, queued=done.queued)

    def _scored(self, sub: Submission, tracked: Tracked, cached: bool = False, deduplicated: bool = False,
                queued: Queued | None = None) -> Answer:
        normalizer = self._normalizers.setdefault((sub.reward.transform, sub.reward.baseline), RunningNormalizer())
        reward: Reward = compute_reward(tracked.verdict, sub.reward, normalizer)
        return Answer(sub.key, tracked.verdict.status.value, reward.value, reward.speedup, interval=reward.interval,
                      cached=cached,
                      deduplicated=deduplicated, attempts=tracked.attempts, verdict=tracked.verdict,
                      error=tracked.verdict.error, note=reward.note, queued=queued)

    async def _dispatch(self) -> None:
        while True:
            job = await self._queue.get()
            self._running += 1
            self._running_max = max(self._running_max, self._running)
            queued = Queued(job.position, time.perf_counter() - job.queued_at)
            self.metrics.queued(queued.waited_s)
            sub = job.submission
            try:
                tracked = await asyncio.wrap_future(
                    self.executor.submit_tracked(sub.problem, sub.candidate, sub.options))
                self.metrics.count("evaluations")
                self.metrics.count("retries", tracked.attempts - 1)
                self.metrics.evaluated(tracked.verdict.seconds)
                if await asyncio.to_thread(interrupt.abandoned, tracked.verdict):
                    # The server is stopping: its workers were killed under this evaluation (or a
                    # terminal's Ctrl-C reached them). Nothing of it is cached; the request is
                    # answered as lost (503: try again), never with a verdict the stop caused.
                    raise EvaluationLost("the server is stopping (interrupted); submit again")
                if self.cache is not None and not infrastructure_failure(tracked.verdict):
                    await asyncio.to_thread(self.cache.put, sub.key, tracked.verdict)
                job.future.set_result(_Evaluated(tracked, queued))
            except Exception as exc:  # noqa: BLE001 (a dispatcher must outlive any one job)
                self.metrics.count("lost")
                job.future.set_exception(exc if isinstance(exc, EvaluationLost) else EvaluationLost(str(exc)))
            finally:
                self._inflight.pop(sub.key, None)
                self._running -= 1
                self._queue.task_done()

    # ---- status --------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        return {"ok": all(not t.done() for t in self._dispatchers), "devices": self.executor.devices,
                "capacity": self.executor.capacity, "max_timed": self.limit.at_once,
                "queue_depth": self.queue_depth, "running": self._running}

    @property
    def queue_depth(self) -> int:
        return self._queue.qsize() if self._queue else 0

    def metrics_json(self) -> dict[str, Any]:
        return self.metrics.snapshot(
            queue_depth=self.queue_depth, queue_size=self.queue_size, running=self._running,
            running_max=self._running_max, max_timed=self.limit.at_once, max_timed_why=self.limit.why,
            inflight_keys=len(self._inflight), cache_entries=len(self.cache) if self.cache is not None else 0,
            normalizers={f"{t}/{b}": n.state() for (t, b), n in self._normalizers.items()},
        )
