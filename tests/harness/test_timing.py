"""How many input sets timing keeps and rotates through."""

from __future__ import annotations

import torch

from hercules.harness.timing import L2_FLUSH_BYTES, rotation_sets, sets_to_keep


def test_a_gpu_keeps_enough_sets_to_exceed_twice_the_flush_and_no_more():
    cuda = torch.device("cuda")
    assert sets_to_keep(int(6.4e9), cuda) == 1  # one multi-GB set already misses the cache
    assert sets_to_keep(L2_FLUSH_BYTES, cuda) == 2
    assert sets_to_keep(L2_FLUSH_BYTES - 1, cuda) == 3
    assert sets_to_keep(1 << 20, cuda) == 16  # capped
    assert sets_to_keep(0, cuda) == 16


def test_the_cpu_rotates_through_every_trial_set_unchanged():
    sets = [(torch.ones(4),), (torch.zeros(4),)]
    assert sets_to_keep(1 << 40, torch.device("cpu")) > 1000
    assert rotation_sets(sets, torch.device("cpu")) == sets
