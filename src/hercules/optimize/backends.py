"""Model backends: where completions come from.

``OpenAIBackend`` talks to any OpenAI-compatible chat-completions server (vLLM, SGLang, hosted
APIs) through ``hercules.llm.client.ChatClient`` (which retries transport errors, 429 and 5xx with
exponential back-off). Calls run in threads under asyncio, so many problems and samples wait on
the server at once; a semaphore bounds the requests in flight and a limiter spaces their starts
(requests per second). Token usage is taken from the server's ``usage`` field, or estimated at
four characters a token when the server sends none (and marked as estimated).

``ReplayBackend`` answers with recorded programs instead of a model: each problem's recorded
programs in order, one per request, then nothing (the problem stops with "replay exhausted").
With a CUDA-L1 release file this runs the whole pipeline on real RL-written kernels.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from hercules.llm.client import ChatClient, LLMError
from hercules.optimize.records import Completion, Prompt, Slot
from hercules.problems.model import Problem, ProblemFormatError


class Backend(Protocol):
    name: str

    async def complete(self, slot: Slot, prompt: Prompt) -> Completion | None:
        """A completion for this slot; None when the backend has nothing more for the problem."""


class RateLimiter:
    """Spaces request starts at least ``1 / rate`` seconds apart (rate <= 0: no limit)."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self._next = 0.0
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        if not self.interval:
            return
        async with self._lock:
            now = time.monotonic()
            delay = self._next - now
            self._next = max(now, self._next) + self.interval
        if delay > 0:
            await asyncio.sleep(delay)


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.7
    max_tokens: int | None = None
    top_p: float | None = None


class OpenAIBackend:
    name = "openai"

    def __init__(self, client: ChatClient, sampling: Sampling = Sampling(), concurrency: int = 8,
                 requests_per_s: float = 0.0) -> None:
        self.client = client
        self.sampling = sampling
        self._slots = asyncio.Semaphore(max(1, concurrency))
        # Threads of its own: asyncio's default pool has min(32, cores + 4) threads, which would
        # cap the requests in flight on a small machine below --concurrency.
        self._threads = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="hercules-llm")
        self._limiter = RateLimiter(requests_per_s)

    async def complete(self, slot: Slot, prompt: Prompt) -> Completion:
        extra = {"top_p": self.sampling.top_p} if self.sampling.top_p is not None else None
        async with self._slots:
            await self._limiter.wait()
            started = time.perf_counter()
            try:
                call = functools.partial(self.client.chat, prompt.messages(), temperature=self.sampling.temperature,
                                         max_tokens=self.sampling.max_tokens, extra=extra)
                result = await asyncio.get_running_loop().run_in_executor(self._threads, call)
            except LLMError as exc:
                # After the client's own retries: recorded as a failed slot, the run goes on.
                return Completion(text="", model=self.client.model, latency_s=time.perf_counter() - started,
                                  attempts=self.client.retries + 1, error=str(exc)[:500])
        usage = result.usage or {}
        prompt_tokens, completion_tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")
        estimated = not isinstance(prompt_tokens, int) or not isinstance(completion_tokens, int)
        if estimated:
            prompt_tokens = (len(prompt.system) + len(prompt.user)) // 4
            completion_tokens = len(result.text) // 4
        return Completion(text=result.text, model=result.model, prompt_tokens=int(prompt_tokens),
                          completion_tokens=int(completion_tokens), latency_s=result.latency_s,
                          attempts=result.attempts, tokens_estimated=estimated)


class ReplayBackend:
    name = "replay"

    def __init__(self, programs: dict[str, Sequence[str]], samples_per_round: int = 1, label: str = "replay") -> None:
        self.programs = {k: list(v) for k, v in programs.items()}
        self.samples_per_round = samples_per_round
        self.label = label

    async def complete(self, slot: Slot, prompt: Prompt) -> Completion | None:
        # Slots are numbered the same on a resumed run, so slot -> program is stable across kills.
        recorded = self.programs.get(slot.problem, [])
        index = (slot.round - 1) * self.samples_per_round + slot.sample
        if index >= len(recorded):
            return None
        return Completion(text=f"Recorded program {index + 1} of {len(recorded)}.\n\n```python\n{recorded[index]}\n```\n",
                          model=self.label)


def replay_programs(path: str | Path, problems: Sequence[Problem]) -> dict[str, list[str]]:
    """Recorded programs per problem name: the candidates a ``load_source`` file carries (a CUDA-L1
    release's ``custom_code``), or a folder with one sub-folder of ``*.py`` files per problem."""
    from hercules.problems.loaders import load_source

    path = Path(path)
    if path.is_dir() and not any(path.glob("*.py")):
        found = {p.name: [f.read_text() for f in sorted(p.glob("*.py"))] for p in sorted(path.iterdir()) if p.is_dir()}
    else:
        loaded = load_source(path)
        found = {}
        for candidate in loaded.candidates:
            found.setdefault(candidate.problem, []).append(candidate.code)
    names = {p.name for p in problems}
    matched = {k: v for k, v in found.items() if k in names}
    if not matched:
        raise ProblemFormatError(f"{path}: no recorded program for any of the {len(names)} problems")
    return matched

