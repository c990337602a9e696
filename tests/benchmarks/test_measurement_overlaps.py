"""benchmarks/measurement_overlaps.py on verdict files written for the test: what overlapped a
measurement, and only for evaluations outside the band."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import measurement_overlaps  # noqa: E402


def _verdict(path: Path, eager: float, cand: float, spans: list) -> None:
    path.mkdir(parents=True)
    (path / "verdict.json").write_text(json.dumps({
        "baselines_ms": {"eager": eager}, "cand_ms": cand, "spans": spans,
        "timing": {"event_median_ms": cand, "wall_ms": cand}}))


def test_neighbour_phases_inside_a_measurement_are_listed_and_in_band_runs_skipped(tmp_path, capsys, monkeypatch):
    _verdict(tmp_path / "slow", 1.0, 2.0, [["timing", 10.0, 12.0], ["measuring", 10.0, 12.0]])
    _verdict(tmp_path / "busy", 1.0, 1.0, [["baselines", 11.0, 20.0], ["lock_wait", 9.0, 13.0],
                                             ["measuring", 15.0, 16.0]])
    _verdict(tmp_path / "away", 1.0, 1.0, [["reference_setup", 30.0, 31.0]])
    found = measurement_overlaps.overlaps(measurement_overlaps.load(tmp_path), "slow")
    # Times from the run's first span; lock waits and other measurements are not work beside it.
    assert found == [(1.0, 3.0, ["busy:baselines"])]
    monkeypatch.setattr(sys, "argv", ["measurement_overlaps.py", str(tmp_path)])
    measurement_overlaps.main()
    printed = capsys.readouterr().out
    assert "slow: self-speedup 0.500" in printed and "busy: self-speedup" not in printed
    assert "1 of 3 evaluations outside [0.95, 1.05]" in printed and "baselines 1" in printed
