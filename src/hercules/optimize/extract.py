"""The program out of a completion, robustly.

Models wrap code in many ways: ```python fences (or ```py, ```Python, ~~~), several blocks (a
CUDA source in a ```cpp block beside the Python one), an answer cut off before its closing fence,
reasoning inside <think> tags that holds drafts, or no fence at all. The rule: drop reasoning
blocks; among the fenced blocks take the last one that defines ``ModelNew`` and parses as Python;
else the last unterminated block; else the text from the first import/class line on. A block that
does not parse is still returned when nothing better exists (the build error then says why).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hercules import pyparse

_THINK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([\w+.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.DOTALL | re.MULTILINE)
_OPEN_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([\w+.-]*)[^\n]*\n", re.MULTILINE)
_CODE_START = re.compile(r"^(import |from \S+ import |class ModelNew|@triton)", re.MULTILINE)
_PYTHON_TAGS = {"", "python", "py", "python3", "pytorch"}


@dataclass(frozen=True)
class Extraction:
    code: str | None
    reason: str  # how it was found, or why nothing was


def _parses(code: str) -> bool:
    try:
        pyparse.parse(code)
    except SyntaxError:
        return False
    return True


def _defines_model_new(code: str) -> bool:
    return re.search(r"^\s*class\s+ModelNew\b", code, re.MULTILINE) is not None


def extract_code(text: str | None) -> Extraction:
    if not text or not text.strip():
        return Extraction(None, "empty completion")
    text = _THINK.sub("", text.replace("\r\n", "\n"))
    blocks = [(m.group(2).lower(), m.group(3)) for m in _FENCE.finditer(text)]
    python = [code for tag, code in blocks if tag in _PYTHON_TAGS and _defines_model_new(code)]
    for code in reversed(python):
        if _parses(code):
            return Extraction(code.strip() + "\n", "fenced block")
    if python:
        return Extraction(python[-1].strip() + "\n", "fenced block (does not parse)")
    # An answer cut off inside its code block: everything after the last opening fence.
    opens = list(_OPEN_FENCE.finditer(text))
    if opens:
        tail = text[opens[-1].end():]
        if _defines_model_new(tail) and "```" not in tail:
            return Extraction(tail.strip() + "\n", "unterminated fenced block")
    if not blocks and _defines_model_new(text):
        start = _CODE_START.search(text)
        if start:
            return Extraction(text[start.start():].strip() + "\n", "unfenced code")
    return Extraction(None, "no code block defining class ModelNew")
