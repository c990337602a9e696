"""Helpers shared by the reward-service tests (a plain module: conftest modules are not importable
by name when several exist)."""

from __future__ import annotations

from hercules.serve.examples import VARIANTS, example_candidate, example_problem

# Cheap CPU evaluations: two trials, 50 ms of timing, eager only (the server's CPU default).
SERVE_ARGS = ["--device", "cpu", "--workers", "2", "--trials", "2", "--budget", "0.05"]
PROBLEM = example_problem(64)
HONEST, WRONG = VARIANTS[0][1], VARIANTS[-1][1]


def candidate_code(forward: str = HONEST, init_extra: str = "") -> str:
    return example_candidate(forward, init_extra)
