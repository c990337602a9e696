"""The optimisation loop: per problem, rounds of sample -> prompt -> complete -> extract -> evaluate.

Problems run concurrently (one coroutine each) and so do the samples of a round; model calls
wait in threads (``backends``), evaluations in the executor (bounded per GPU). Every sample of a
round sees the same pool (the one left by the previous round) through its own exemplars: the
random generator of a slot is seeded by (run seed, problem, round, sample), so a resumed run
renders the very prompts it would have rendered.

Resume: a slot whose variant is stored is done; a stored completion is evaluated again without a
model call; identical code is never evaluated twice within a problem (its verdict is reused).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from hercules import interrupt
from hercules.executor import EvalExecutor
from hercules.harness.evaluate import EvalOptions
from hercules.harness.records import Verdict
from hercules.optimize.backends import Backend
from hercules.optimize.budget import Budget, Spend, problem_stop, run_exhausted
from hercules.optimize.extract import extract_code
from hercules.optimize.hardware import HardwareFacts
from hercules.optimize.pool import Pool, reference_variant
from hercules.optimize.prompt import render_prompt
from hercules.optimize.records import NO_CODE, Completion, Objective, Slot, Variant
from hercules.optimize.sampling import sample_exemplars
from hercules.optimize.storage import RunStore
from hercules.optimize.tags import technique_tags
from hercules.problems.model import Candidate, Problem, code_hash

# (event, slot, variant or None): "variant" when a slot is done, "round" when a round is, "lost"
# when a slot is left for a resumed run (its model call or its evaluation's infrastructure failed).
Progress = Callable[[str, Slot, Variant | None], None]
DONE, EXHAUSTED, FAILED_CALL = "done", "exhausted", "model call failed"


@dataclass(frozen=True)
class LoopConfig:
    samples: int = 2
    exemplars: int = 4
    temperature: float = 1.0
    objective: Objective = "eager"
    seed: int = 0
    budget: Budget = field(default_factory=Budget)
    eval_options: EvalOptions = field(default_factory=EvalOptions)
    keep_artifacts: bool = True  # evaluation logs under each slot's folder (local executors only)


@dataclass
class ProblemState:
    pool: Pool
    best_so_far: list[float | None] = field(default_factory=list)
    rounds_done: int = 0
    stop_reason: str = ""


def reason_of(verdict: Verdict) -> str | None:
    """What the model is told about a rejected variant (the flags are shown beside it)."""
    if verdict.status.value == "ok" and not verdict.flags:
        return None
    return verdict.error or verdict.status.value


class Optimizer:
    def __init__(self, problems: Sequence[Problem], backend: Backend, executor: EvalExecutor, store: RunStore,
                 hardware: HardwareFacts, config: LoopConfig, seeds: dict[str, Sequence[Candidate]] | None = None,
                 progress: Progress | None = None) -> None:
        self.problems = list(problems)
        self.backend = backend
        self.executor = executor
        self.store = store
        self.hardware = hardware
        self.config = config
        self.seeds = seeds or {}
        self.progress = progress or (lambda *a: None)
        self.spend = Spend(tokens=store.tokens_spent(), eval_seconds=store.eval_seconds())
        self.states: dict[str, ProblemState] = {}

    # ---- the run -------------------------------------------------------------------------
    async def run(self) -> dict[str, ProblemState]:
        await asyncio.gather(*(self._problem(p) for p in self.problems))
        return self.states

    async def _problem(self, problem: Problem) -> None:
        self.store.add_problem(problem)
        stored = self.store.variants(problem.name)
        if not any(v.origin == "reference" for v in stored):
            self.store.record_variant(reference_variant(problem))
        pool = Pool(problem, self.config.objective, variants=stored)
        state = self.states[problem.name] = ProblemState(pool)
        seeds = [(Slot(problem.name, 0, i + 1), c.code, "seed") for i, c in enumerate(self.seeds.get(problem.name, ()))]
        await asyncio.gather(*(self._seed(pool, slot, code, origin) for slot, code, origin in seeds))
        state.best_so_far.append(pool.best_speedup(0))
        round_ = 0
        while True:
            reason = problem_stop(self.config.budget, state.rounds_done, state.best_so_far) \
                or run_exhausted(self.config.budget, self.spend)
            if reason:
                state.stop_reason = reason
                return
            round_ += 1
            slots = [Slot(problem.name, round_, s) for s in range(self.config.samples)]
            outcomes = await asyncio.gather(*(self._slot(pool, slot) for slot in slots))
            if all(o == EXHAUSTED for o in outcomes):  # an empty round is not counted
                state.stop_reason = f"{self.backend.name} backend has nothing more"
                return
            state.rounds_done = round_
            state.best_so_far.append(pool.best_speedup(round_))
            self.progress("round", slots[0], pool.best(round_))
            if all(o.startswith(FAILED_CALL) for o in outcomes):  # the server is down: rerun to resume
                state.stop_reason = outcomes[0]
                return

    # ---- one slot ------------------------------------------------------------------------
    def _done(self, pool: Pool, slot: Slot) -> Variant | None:
        return next((v for v in pool.variants if v.slot == slot), None)

    async def _seed(self, pool: Pool, slot: Slot, code: str, origin: str) -> None:
        variant = self._done(pool, slot) or await self._evaluate_and_add(pool, slot, code, origin)
        if variant is not None:
            self.progress("variant", slot, variant)

    async def _slot(self, pool: Pool, slot: Slot) -> str:
        """DONE, EXHAUSTED (the backend had nothing for this slot), or FAILED_CALL with the error:
        a failed model call leaves no variant, so a resumed run asks again."""
        variant = self._done(pool, slot)
        if variant is None:
            stored = self.store.call(slot)
            if stored is not None and not stored[1].error:
                completion = stored[1]
            else:
                rng = random.Random(f"{self.config.seed}/{slot.problem}/{slot.round}/{slot.sample}")
                exemplars = sample_exemplars(pool, self.config.exemplars, self.config.temperature, rng)
                prompt = render_prompt(pool, exemplars, self.hardware)
                completion = await self.backend.complete(slot, prompt)
                if completion is None:
                    return EXHAUSTED
                self.store.record_call(slot, prompt, completion)
                self.spend = self.spend.add(tokens=completion.total_tokens)
                if completion.error:
                    self.progress("lost", slot, None)
                    return f"{FAILED_CALL}: {completion.error}"
            variant = await self._from_completion(pool, slot, completion)
        if variant is not None:  # None: its evaluation was lost ("lost" already reported)
            self.progress("variant", slot, variant)
        return DONE

    async def _from_completion(self, pool: Pool, slot: Slot, completion: Completion) -> Variant | None:
        origin = "replay" if self.backend.name == "replay" else "model"
        extraction = extract_code(completion.text)
        if extraction.code is None:
            return self._add(pool, Variant(slot=slot, origin=origin, code="", status=NO_CODE, reason=extraction.reason))
        return await self._evaluate_and_add(pool, slot, extraction.code, origin)

    async def _evaluate_and_add(self, pool: Pool, slot: Slot, code: str, origin: str) -> Variant | None:
        tags = technique_tags(code, pool.problem.code)
        twin = pool.by_hash(code_hash(code))
        if twin is not None:
            variant = Variant(slot=slot, origin=origin, code=code, status=twin.status, reason=twin.reason,
                              verdict=twin.verdict, tags=tags, reused=True)
            return self._add(pool, variant)
        verdict = await self._evaluate(pool.problem, slot, code)
        if verdict is None:
            return None
        self.spend = self.spend.add(eval_seconds=verdict.seconds)
        variant = Variant(slot=slot, origin=origin, code=code, status=verdict.status.value,
                          reason=reason_of(verdict), verdict=verdict, tags=tags)
        return self._add(pool, variant)

    async def _evaluate(self, problem: Problem, slot: Slot, code: str) -> Verdict | None:
        folder = self.store.slot_dir(slot)
        candidate = Candidate(name=slot.name, code=code, source=str(folder / "candidate.py"), problem=problem.name)
        options = self.config.eval_options
        if self.config.keep_artifacts:
            options = replace(options, artifacts_dir=folder / "eval")
        row = self.store.evaluation_started(slot, candidate.content_hash)
        try:
            verdict = await asyncio.wrap_future(self.executor.submit(problem, candidate, options))
        except Exception as exc:  # noqa: BLE001 -- the infrastructure failed (not the candidate): left for a resume
            if interrupt.STOP.is_set():  # the stop killed it: the slot stays open for the rerun
                return None
            self.progress("lost", slot, None)
            self.store.set_meta(f"lost/{slot.problem}/{slot.name}", str(exc)[:500])
            return None
        # A stop kills the workers under an evaluation a moment before this coroutine is cancelled:
        # the verdict of a killed evaluation is the stop's doing, not the candidate's, and is
        # dropped so that a rerun evaluates the slot again.
        if await asyncio.to_thread(interrupt.abandoned, verdict):
            return None
        self.store.evaluation_finished(row)
        return verdict

    def _add(self, pool: Pool, variant: Variant) -> Variant:
        pool.add(variant)
        self.store.record_variant(variant)
        return variant
