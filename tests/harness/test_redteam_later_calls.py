"""Red team, later calls: candidates that behave in the correctness trials and change afterwards,
each beside an honest control that shares its shape, on the red team's problem (CPU, and the GPU
under its mark). A hostile one is caught (status not ``ok``, or a flag naming its class); its
control is ``ok`` with no flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from hercules.harness.evaluate import EvalOptions, evaluate
from hercules.problems.loaders import load_source
from hercules.problems.model import Candidate

CORPUS = Path(__file__).resolve().parents[1] / "redteam"
PROBLEM = CORPUS / "problem_matmul.py"

# exploit -> (the flags that name its class, its honest control)
PAIRS = {
    "kept_output_buffer.py": ({"output_overwritten"}, "honest_copied_buffer.py"),
    "mutate_seen_input.py": ({"input_mutated"}, "honest_seen_input.py"),
    "half_after_trials.py": ({"precision_downcast", "result_cache"}, "honest.py"),
}


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request) -> str:
    return request.param


def _evaluate(name: str, device: str, cache: Path):
    options = EvalOptions(device=device, trials=3, timing_budget_s=0.1, warmup_s=0.02, cache_dir=cache,
                          baselines=("eager",))
    return evaluate(load_source(PROBLEM).problems[0], Candidate(name, (CORPUS / name).read_text(), "redteam"), options)


@pytest.mark.parametrize("exploit", sorted(PAIRS))
def test_a_change_after_the_trials_is_caught_and_its_control_is_clean(exploit, device, tmp_path):
    flags, control = PAIRS[exploit]
    caught = _evaluate(exploit, device, tmp_path / "cache")
    print(f"REDTEAM {device} {exploit}: {caught.status.value} {list(caught.flags)} {caught.error}")
    assert caught.status.value != "ok", caught.error
    assert caught.status.value == "incorrect" or flags & set(caught.flags), (caught.status, caught.flags)
    honest = _evaluate(control, device, tmp_path / "cache")
    print(f"REDTEAM {device} {control}: {honest.status.value} {list(honest.flags)} {honest.error}")
    assert honest.status.value == "ok" and honest.flags == (), (honest.status, honest.flags, honest.error)
