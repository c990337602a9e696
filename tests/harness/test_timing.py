"""How many input sets timing keeps and rotates through."""

from __future__ import annotations

import pytest
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


def test_the_device_clock_reads_nothing_off_cuda():
    from hercules.harness.timing import DeviceClock

    with DeviceClock(torch.device("cpu"), calls=4) as clock:
        torch.ones(8).sum()
    assert clock.ms() is None


@pytest.mark.gpu
def test_the_device_clock_reads_the_calls_on_the_device_per_call():
    from hercules.harness.timing import DeviceClock

    x = torch.randn(4096, 4096, device="cuda")
    x @ x  # cuBLAS set up outside the clocks
    torch.cuda.synchronize()
    with DeviceClock(torch.device("cuda"), calls=4) as four:
        for _ in range(4):
            x @ x
    with DeviceClock(torch.device("cuda"), calls=1) as one:
        x @ x
    assert 0 < four.ms() and 0.5 < four.ms() / one.ms() < 2.0  # per call: four calls read as one
