from __future__ import annotations

import pytest

from scripted_llm_server import ScriptedServer


@pytest.fixture()
def llm_server():
    """A scripted local OpenAI-compatible server on 127.0.0.1 (random port); no real model."""
    with ScriptedServer() as s:
        yield s
