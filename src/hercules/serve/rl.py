"""Reward functions for RL trainers: TRL's GRPO trainer and verl.

Contracts followed (read from the trainers' sources):

* **TRL** ``GRPOTrainer(reward_funcs=[fn])`` calls
  ``fn(prompts=[...], completions=[...], completion_ids=[...], trainer_state=..., **columns)`` with one
  list entry per generation, every dataset column except ``prompt`` passed through by name, and
  completions as strings (standard format) or as lists of chat messages ``[{"role": "assistant",
  "content": ...}]`` (conversational format). It returns ``list[float | None]``; None becomes NaN
  and is left out of the sum (here: an evaluation lost after its retries). The trainer logs the
  function under ``fn.__name__``.
* **verl** (``custom_reward_function.path=<this file>``, ``name=compute_score``) calls
  ``compute_score(data_source, solution_str, ground_truth, extra_info=None)`` per response and
  accepts a float or a dict with a ``"score"`` key (other keys are logged). Its batch reward manager
  calls ``compute_score(data_sources=, solution_strs=, ground_truths=, extra_infos=)``:
  ``compute_score_batch`` here.

The problem is a built-in suite name or KernelBench source: TRL reads it from a dataset column
(default ``problem``); verl from ``extra_info["problem"]``, else ``ground_truth``.

Both evaluate through a running ``hercules serve`` (``url=``, or ``HERCULES_REWARD_URL`` for verl)
or in this process (a ``RewardService`` on a private event loop: the same cache, de-duplication and
retries as the server, without HTTP).
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any, Protocol

from hercules.harness.records import Status
from hercules.reward import RewardConfig
from hercules.serve.client import submission_item


class Backend(Protocol):
    def score(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Answers (as ``/v1/evaluate`` gives them) in the order of the submissions."""


class HttpBackend:
    def __init__(self, url: str, timeout_s: float = 3600.0, retries: int = 4):
        from hercules.serve.client import ServeClient

        self.client = ServeClient(url, timeout_s=timeout_s, retries=retries)

    def score(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self.client.batch(items)

    def close(self) -> None:
        pass


class InProcessBackend:
    """A RewardService on an event loop in a daemon thread, fed from the trainer's thread."""

    def __init__(self, *, device: str = "auto", workers: int | None = None, ray_address: str | None = None,
                 cache_path: Path | None = None, reward: RewardConfig | None = None, budget_s: float = 0.3,
                 trials: int = 5, baselines: tuple[str, ...] | None = None, queue_size: int = 4096):
        from hercules.executor import make_executor
        from hercules.serve.service import build_service

        executor = make_executor(ray_address=ray_address, device=device, workers=workers)
        self.service = build_service(executor, reward=reward, cache_path=cache_path, budget_s=budget_s,
                                     trials=trials, baselines=baselines, queue_size=queue_size)
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, name="hercules-reward", daemon=True).start()
        self._call(self.service.start())

    def _call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def score(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        submissions = [self.service.parse(item) for item in items]
        return [a.to_json() for a in self._call(self.service.evaluate_many(submissions))]

    def close(self) -> None:
        self._call(self.service.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)


def completion_text(completion: Any) -> str:
    """A TRL completion as text: a string, or the assistant messages of a conversation."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    if isinstance(completion, (list, tuple)):
        parts = [m.get("content") or "" for m in completion
                 if isinstance(m, dict) and m.get("role", "assistant") == "assistant"]
        return "\n".join(str(p) for p in parts)
    raise TypeError(f"a completion must be a string or a list of chat messages (got {type(completion).__name__})")


class HerculesReward:
    """A TRL GRPO reward function: ``GRPOTrainer(reward_funcs=[HerculesReward(url=...)], ...)``.

    ``reward`` and ``options`` are sent with every submission (see ``hercules.reward.RewardConfig``
    and ``hercules serve --help``); ``problem_column`` names the dataset column holding the problem.
    """

    def __init__(self, backend: Backend | None = None, *, url: str | None = None, problem_column: str = "problem",
                 reward: dict[str, Any] | None = None, options: dict[str, Any] | None = None,
                 name: str = "hercules_speedup"):
        if backend is None and url is None:
            raise ValueError("give a backend, or the url of a running hercules serve")
        self.backend = backend or HttpBackend(url)
        self.problem_column = problem_column
        self.reward = reward
        self.options = options
        self.__name__ = name  # TRL logs each reward function under its __name__

    def __call__(self, prompts: list[Any] | None = None, completions: list[Any] | None = None,
                 **kwargs: Any) -> list[float | None]:
        completions = list(completions or [])
        problems = kwargs.get(self.problem_column)
        if problems is None:
            raise ValueError(f"the dataset has no {self.problem_column!r} column (a built-in problem name or "
                             "KernelBench source per row); set problem_column=")
        if len(problems) != len(completions):
            raise ValueError(f"{len(completions)} completions but {len(problems)} {self.problem_column!r} values")
        items = [submission_item(p, None, completion_text(c), self.options, self.reward)
                 for p, c in zip(problems, completions)]
        return [answer["reward"] for answer in self.backend.score(items)] if items else []


# ---- verl ------------------------------------------------------------------------------------
_default: Backend | None = None
_default_lock = threading.Lock()


def default_backend() -> Backend:
    """``HERCULES_REWARD_URL`` set: that server; else in-process on ``HERCULES_REWARD_DEVICE`` (auto),
    caching verdicts in ``HERCULES_REWARD_CACHE`` (default ``hercules-reward.sqlite``)."""
    global _default
    with _default_lock:
        if _default is None:
            url = os.environ.get("HERCULES_REWARD_URL")
            if url:
                _default = HttpBackend(url)
            else:
                _default = InProcessBackend(device=os.environ.get("HERCULES_REWARD_DEVICE", "auto"),
                                            cache_path=Path(os.environ.get("HERCULES_REWARD_CACHE",
                                                                           "hercules-reward.sqlite")))
        return _default


def reset_default_backend() -> None:
    global _default
    with _default_lock:
        backend, _default = _default, None
    if backend is not None:
        backend.close()


def _verl_score(answer: dict[str, Any]) -> dict[str, float]:
    # verl needs a number for every response: an evaluation lost after its retries scores 0
    # (a 1x speedup under the log transform) and is marked lost=1 in the logged extras.
    status = answer.get("status")
    reward = answer.get("reward")
    return {
        "score": float(reward) if reward is not None else 0.0,
        "speedup": float(answer.get("speedup") or 0.0),
        "correct": float(status in (Status.OK.value, Status.SUSPICIOUS.value)),
        "flagged": float(status == Status.SUSPICIOUS.value),
        "lost": float(status == "error"),
    }


def _verl_item(solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None) -> dict[str, Any]:
    extra = extra_info or {}
    return submission_item(extra.get("problem") or ground_truth, None, solution_str, extra.get("options"),
                           extra.get("reward"))


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None,
                  **kwargs: Any) -> dict[str, float]:
    """verl's per-response reward: ``{"score": reward, "speedup", "correct", "flagged", "lost"}``."""
    return _verl_score(default_backend().score([_verl_item(solution_str, ground_truth, extra_info)])[0])


def compute_score_batch(data_sources: list[str], solution_strs: list[str], ground_truths: list[Any],
                        extra_infos: list[dict[str, Any] | None] | None = None, **kwargs: Any) -> list[dict[str, float]]:
    """verl's batch reward manager form: every response of the batch evaluated concurrently."""
    extras = extra_infos or [None] * len(solution_strs)
    items = [_verl_item(s, g, e) for s, g, e in zip(solution_strs, ground_truths, extras)]
    return [_verl_score(a) for a in default_backend().score(items)]
