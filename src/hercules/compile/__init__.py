"""LLM-advised inference compiler for Hugging Face Llama / Qwen3 decoders.

``compile_model(model, ...) -> CompiledDecoder`` (see ``api.py``); presets and checkpoint loading
in ``presets.py``; region records in ``regions.py``; the decode runtime in ``runtime.py``; kernel
templates in ``templates/``; constraints, advisors and measured selection in their own modules.
"""

from __future__ import annotations

from typing import Any

__all__ = ["compile_model", "CompiledDecoder", "build_model", "load_checkpoint", "get_preset", "PRESETS"]


def __getattr__(name: str) -> Any:  # lazy: importing the package does not import transformers/triton
    if name in ("compile_model", "CompiledDecoder"):
        from . import api

        return getattr(api, name)
    if name in ("build_model", "load_checkpoint", "get_preset", "PRESETS"):
        from . import presets

        return getattr(presets, name)
    raise AttributeError(name)
