"""What evaluations found about a problem's dependence on its inputs, kept for ``hercules list``.

Whether a problem's outputs ignore some of its inputs (a degenerate problem, dependence.py) is
found by running its reference, which listing never does: every evaluation records its finding
under the cache root by the problem's content hash, and ``hercules list`` shows what was found
on this machine. ``known`` is a dict for a degenerate problem (as ``Verdict.degenerate_problem``),
False for one found to use every input it could test, None for one never evaluated here.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

KIND = "degenerate"


def _path(cache_dir: Path, content_hash: str) -> Path:
    return Path(cache_dir) / KIND / f"{content_hash}.json"


def record(cache_dir: Path, content_hash: str, found: dict[str, Any] | None) -> None:
    """Keep an evaluation's finding (``found``: the degeneracy as JSON, None when there is none).
    Best effort: a cache that cannot be written loses only this listing detail."""
    from hercules.fileio import write_text_atomic

    with contextlib.suppress(OSError):
        write_text_atomic(_path(cache_dir, content_hash), json.dumps({"degenerate_problem": found}))


def known(content_hash: str, cache_dir: Path | None = None) -> dict[str, Any] | bool | None:
    if cache_dir is None:
        from hercules.harness.build import default_cache_dir

        cache_dir = default_cache_dir()
    try:
        found = json.loads(_path(cache_dir, content_hash).read_text()).get("degenerate_problem")
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, dict) and found else False
