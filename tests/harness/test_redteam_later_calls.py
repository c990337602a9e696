"""Red team, later calls: candidates that behave in the correctness trials and change afterwards,
each beside an honest control that shares its shape, on the red team's problem (CPU, and the GPU
under its mark). A hostile one is caught (status not ``ok``, or a flag naming its class); its
control is ``ok`` with no flag. The evaluations of a device share one cache root (the problem's
FLOP counts and footprint measured once). ``half_after_trials``'s control is the red team's own
honest control, which test_redteam.py evaluates on the same problem at the same trials and timing
budget (``test_honest_control_is_ok_with_no_flag_and_its_sandbox_is_recorded``): it is not
evaluated a second time here."""

from __future__ import annotations

from pathlib import Path

import pytest

from hercules.harness.evaluate import EvalOptions, evaluate
from hercules.problems.loaders import load_source
from hercules.problems.model import Candidate

CORPUS = Path(__file__).resolve().parents[1] / "redteam"
PROBLEM = CORPUS / "problem_matmul.py"

# exploit -> (the flags that name its class, its honest control; None: test_redteam.py's honest.py)
PAIRS = {
    "kept_output_buffer.py": ({"output_overwritten"}, "honest_copied_buffer.py"),
    "mutate_seen_input.py": ({"input_mutated"}, "honest_seen_input.py"),
    "half_after_trials.py": ({"precision_downcast", "result_cache"}, None),
}


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def cache(tmp_path_factory, device) -> Path:
    return tmp_path_factory.mktemp(f"later-calls-{device}") / "cache"


def _evaluate(name: str, device: str, cache: Path):
    options = EvalOptions(device=device, trials=3, timing_budget_s=0.1, warmup_s=0.02, cache_dir=cache,
                          baselines=("eager",))
    return evaluate(load_source(PROBLEM).problems[0], Candidate(name, (CORPUS / name).read_text(), "redteam"), options)


@pytest.mark.parametrize("exploit", sorted(PAIRS))
def test_a_change_after_the_trials_is_caught_and_its_control_is_clean(exploit, device, cache):
    flags, control = PAIRS[exploit]
    caught = _evaluate(exploit, device, cache)
    print(f"REDTEAM {device} {exploit}: {caught.status.value} {list(caught.flags)} {caught.error}")
    assert caught.status.value != "ok", caught.error
    assert caught.status.value == "incorrect" or flags & set(caught.flags), (caught.status, caught.flags)
    if control is None:
        return
    honest = _evaluate(control, device, cache)
    print(f"REDTEAM {device} {control}: {honest.status.value} {list(honest.flags)} {honest.error}")
    assert honest.status.value == "ok" and honest.flags == (), (honest.status, honest.flags, honest.error)
