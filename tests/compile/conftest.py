"""Fixtures for the compiler tests: tiny random models (built once per session) and a private
decision-cache directory per test."""

from __future__ import annotations

import shutil

import pytest
import side_by_side
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


@pytest.fixture()
def llm_server():
    """A scripted local OpenAI-compatible server on 127.0.0.1 (random port); no real model."""
    from compile_helpers import ScriptedServer

    with ScriptedServer() as s:
        yield s


def _build_sm90(request):
    """The CUDA sources of test_cuda_templates and test_cuda_gemv_splitk_pdl in ONE translation
    unit, compiled for sm_90 by nvcc once: (ok, compiler output, the bodies compiled)."""
    from compile_helpers import cuda_template_bodies, gemv_split_pdl_bodies

    from hercules.compile.templates import cuda_build

    bodies = list(dict.fromkeys(cuda_template_bodies() + gemv_split_pdl_bodies()))
    ok, log = cuda_build.syntax_check("\n".join(bodies))
    return ok, log, set(bodies)


side_by_side.register(
    "sm_90 unit of the CUDA templates",
    lambda session: shutil.which("nvcc") is not None
    and any("sm90_build" in getattr(item, "fixturenames", ()) for item in session.items),
    _build_sm90)


@pytest.fixture(scope="session")
def sm90_build(request):
    return side_by_side.result("sm_90 unit of the CUDA templates", request)
