"""pass@k against the closed form and brute-force enumeration; stagnation modes; protocol parsing."""

from __future__ import annotations

import itertools
import math

import pytest

from hercules.debug.metrics import PassAtK, mean_pass_at_k, pass_at_k
from hercules.debug.protocol import Protocol
from hercules.debug.stagnation import stagnation_modes


def closed_form(n: int, c: int, k: int) -> float:
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def brute_force(n: int, c: int, k: int) -> float:
    """Fraction of all k-subsets of n samples (c of them correct) holding at least one correct."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_matches_closed_form_and_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            value = pass_at_k(n, c, k)
            assert value == pytest.approx(closed_form(n, c, k), abs=1e-12)
            assert value == pytest.approx(brute_force(n, c, k), abs=1e-12)


def test_pass_at_k_is_stable_for_large_n():
    # math.comb(1000, 500) has ~300 digits: the product form never builds it
    assert pass_at_k(1000, 3, 500) == pytest.approx(closed_form(1000, 3, 500), rel=1e-9)
    assert pass_at_k(200, 0, 10) == 0.0 and pass_at_k(200, 191, 10) == 1.0


def test_pass_at_k_rejects_impossible_inputs():
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError):
        pass_at_k(2, 3, 1)


def test_mean_and_label_name_every_axis():
    assert mean_pass_at_k([(2, 1), (2, 0)], 1) == pytest.approx(0.25)
    label = PassAtK(1, "replay", "cudabeaver", Protocol().describe(), 0.7, 1.0, 3).label
    assert label == "pass@1(M=replay, C=cudabeaver, A=n=1,iter=1,fb=log,hist=1,T=0,seed=0,p=0.7, p=0.7)"


def test_stagnation_modes():
    assert stagnation_modes(["a", "a"], ["build", "build"], False) == ("duplicate_code", "no_progress")
    assert "cycle" in stagnation_modes(["a", "b", "a"], ["build", "wrong_result", "build"], False)
    assert "category_oscillation" in stagnation_modes(["a", "b", "c"], ["build", "wrong_result", "build"], False)
    assert stagnation_modes(["a", "b"], ["build", "passed"], True) == ()


def test_protocol_parse_and_errors():
    p = Protocol.parse("n=3,iter=2,fb=evidence,hist=2,T=0.5,seed=7,p=1.0")
    assert (p.attempts, p.iterations, p.feedback, p.history, p.temperature, p.seed, p.p) == (3, 2, "evidence", 2,
                                                                                            0.5, 7, 1.0)
    assert Protocol.parse(p.describe()) == p
    for bad in ("n=x", "fb=loud", "zz=1", "n"):
        with pytest.raises(ValueError):
            Protocol.parse(bad)
