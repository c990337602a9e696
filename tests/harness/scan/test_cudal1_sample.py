"""The static scan on released, LLM-written kernels (CUDA-L1's A100 records, vendored in
tests/fixtures/cudal1/): guarded fallbacks are conditional on running, casts are hints, and no
static-only flag is raised on a GPU or a CPU. The whole corpus: benchmarks/cudal1_scan.py."""

from __future__ import annotations

from pathlib import Path

from hercules.harness.scan import dynamic_check_for, scan_candidate
from hercules.problems.loaders import load_source

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "tests" / "fixtures" / "cudal1" / "a100_sample.jsonl"


def _scanned(path: Path):
    loaded = load_source(path)
    dtypes = {p.name: p.dtype_name for p in loaded.problems}
    return [(c.problem, c.code, scan_candidate(c.code, dtypes[c.problem])) for c in loaded.candidates]


def test_released_guarded_fallbacks_raise_no_static_only_flag():
    records = _scanned(SAMPLE)
    assert len(records) == 6
    for name, code, findings in records:
        lines = code.splitlines()
        flagged = [f"{f.flag}@{f.line}: {lines[f.line - 1].strip()}" for f in findings for device in ("cuda", "cpu")
                   if f.decisive and dynamic_check_for(f.flag, device) is None]
        assert not flagged, (name, flagged)
        # Each falls back to PyTorch when its kernel fails: a flag only if the fallback runs.
        fallbacks = [f for f in findings if f.flag == "reference_fallback"]
        assert fallbacks and all(f.conditional and f.fallback_lines for f in fallbacks), name

