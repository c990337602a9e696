"""Trainer-side reward functions as TRL and verl call them (plain calls; neither trainer installed).

TRL: ``fn(prompts=, completions=, completion_ids=, trainer_state=, **dataset_columns) -> list[float | None]``
with completions as strings or chat message lists. verl: ``compute_score(data_source, solution_str,
ground_truth, extra_info=None)`` -> float or dict with "score"; batch form with plural names.
"""

from __future__ import annotations

import math

import pytest
from serve_helpers import WRONG, candidate_code

from hercules.serve import rl


def fenced(code: str) -> str:
    return f"The three element-wise passes can be fused.\n```python\n{code}```"


def test_trl_reward_over_http_with_both_completion_formats(server, problem_code):
    reward_func = rl.HerculesReward(url=server.url)
    assert reward_func.__name__ == "hercules_speedup"
    code = candidate_code()
    rewards = reward_func(
        prompts=["optimise this"] * 3,
        completions=[[{"role": "assistant", "content": fenced(code)}], fenced(code), "no code, sorry"],
        completion_ids=[[1], [2], [3]], trainer_state=None,
        problem=[problem_code] * 3,
    )
    answer = server.client.evaluate(problem_code, code)  # cached by now: the same verdict
    assert rewards[0] == rewards[1] == pytest.approx(math.log(answer["speedup"]))
    assert rewards[2] == -1.0
    with pytest.raises(ValueError, match="no 'task' column"):
        rl.HerculesReward(url=server.url, problem_column="task")(prompts=["p"], completions=["c"], problem=["x"])


def test_trl_reward_in_process_and_verl_compute_score(server, problem_code, monkeypatch, tmp_path):
    backend = rl.InProcessBackend(device="cpu", workers=1, budget_s=0.05, trials=2, cache_path=tmp_path / "c.sqlite")
    try:
        reward_func = rl.HerculesReward(backend, reward={"transform": "raw", "clip_max": 1e9})
        wrong = candidate_code(forward=WRONG)
        rewards = reward_func(prompts=["p"] * 2, completions=[fenced(wrong), fenced(wrong)],
                              problem=[problem_code] * 2)
        assert rewards == [-1.0, -1.0]  # incorrect; evaluated once (identical), answered twice
        assert backend.service.metrics.counts["evaluations"] == 1
    finally:
        backend.close()

    monkeypatch.setenv("HERCULES_REWARD_URL", server.url)
    rl.reset_default_backend()
    try:
        code = candidate_code()
        score = rl.compute_score("hercules", fenced(code), problem_code, extra_info={"index": 0})
        assert set(score) == {"score", "speedup", "correct", "flagged", "lost"}
        assert score["correct"] == 1.0 and score["score"] == pytest.approx(math.log(score["speedup"]))
        # The problem may also come through extra_info (ground_truth then free for other uses).
        batch = rl.compute_score_batch(["hercules"] * 2, [fenced(code), "nothing"], ["", ""],
                                       [{"problem": problem_code}] * 2)
        assert batch[0]["score"] == score["score"] and batch[1]["score"] == -1.0 and batch[1]["correct"] == 0.0
    finally:
        rl.reset_default_backend()
