"""Files written whole or not at all: readers (a resumed run, a concurrent evaluation, a browser)
never see half of one."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def write_text_atomic(path: Path | str, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file beside it (unique per process and thread,
    so concurrent writers of the same file do not trample each other's); parents are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
