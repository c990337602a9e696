"""Fixtures for the compiler tests: tiny random models (built once per session) and a private
decision-cache directory per test."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _one_cpu_thread():
    # The CI box has 2 cores shared with other jobs: a 2-thread intra-op pool waits on a
    # descheduled peer and makes tiny-model steps 100x slower and noisy. One thread is steady.
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="session")
def tiny_models():
    from hercules.compile.presets import build_model

    return {name: build_model(name, dtype="fp32", device="cpu", seed=1) for name in ("tiny-llama", "tiny-qwen3")}


@pytest.fixture()
def cache_dir(tmp_path):
    return tmp_path / "hercules-compile-cache"


def prompt(batch: int, length: int, vocab: int = 512, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))
