"""Helpers shared by the compiler tests (a plain module: conftest modules are not importable by
name when several test folders have one)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch


def prompt(batch: int, length: int, vocab: int = 512, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


def _load_scripted_server():
    name = "scripted_llm_server"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parent.parent / "llm" / "scripted_llm_server.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


_srv = _load_scripted_server()
ScriptedServer = _srv.ScriptedServer
Scripted = _srv.Scripted
