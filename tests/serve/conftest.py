"""A real ``hercules serve`` process on loopback (CPU, two evaluations at once, SQLite cache)."""

from __future__ import annotations

from pathlib import Path

import pytest
from serve_helpers import PROBLEM, SERVE_ARGS

from hercules.serve.client import LaunchedServer


@pytest.fixture(scope="session")
def problem_code() -> str:
    return PROBLEM["code"]


@pytest.fixture(scope="session")
def serve_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("serve") / "verdicts.sqlite"


@pytest.fixture(scope="session")
def server(serve_cache):
    log = serve_cache.parent / "serve.log"
    with LaunchedServer([*SERVE_ARGS, "--cache", str(serve_cache)], log_path=str(log)) as launched:
        yield launched
