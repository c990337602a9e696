"""The adversarial corpus through the whole pipeline: ``hercules eval ... --device cpu --json``.

For every entry of tests/adversarial/manifest.json, one CLI run in a subprocess (repository root
as working directory, PYTHONPATH=src). Its stdout must be exactly one JSON object carrying the
verdict contract. Honest candidates must come out ``ok`` with no flag; exploits must not come out
``ok``, and must be caught for the reason the manifest names (see tests/adversarial/README.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "adversarial"
MANIFEST: dict[str, dict] = json.loads((CORPUS / "manifest.json").read_text())
CONTRACT_KEYS = {"status", "correct", "flags", "error", "max_abs_err", "rel_err", "ref_ms", "cand_ms", "speedup",
                 "sol_fraction"}
STATUSES = {"build_error", "runtime_error", "timeout", "crash", "incorrect", "suspicious", "ok", "skipped"}
EVAL_TIMEOUT_S = 600


def _run_eval(problem: Path, candidate: Path) -> tuple[dict, subprocess.CompletedProcess]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = subprocess.run(
        [sys.executable, "-m", "hercules.cli", "eval", "--problem", str(problem), "--candidate", str(candidate),
         "--device", "cpu", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=EVAL_TIMEOUT_S,
    )
    context = f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, f"an evaluation happened, so exit status 0 is expected; {context}"
    text = proc.stdout.strip()
    try:
        verdict, end = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"stdout is not one JSON object ({exc}); {context}") from None
    assert text[end:].strip() == "", f"stdout holds more than one JSON object; {context}"
    assert isinstance(verdict, dict), f"stdout is JSON but not an object; {context}"
    return verdict, proc


def _check_contract(verdict: dict) -> None:
    missing = CONTRACT_KEYS - set(verdict)
    assert not missing, f"verdict lacks {sorted(missing)}: {verdict}"
    assert verdict["status"] in STATUSES, verdict["status"]
    assert isinstance(verdict["correct"], bool)
    assert isinstance(verdict["flags"], list) and all(isinstance(f, str) for f in verdict["flags"])
    assert verdict["error"] is None or isinstance(verdict["error"], str)


def _summary(verdict: dict) -> str:
    return f"status={verdict.get('status')!r} flags={verdict.get('flags')} error={str(verdict.get('error'))[:400]!r}"


@pytest.mark.slow
@pytest.mark.timeout(EVAL_TIMEOUT_S + 60)
@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_corpus_entry(name: str) -> None:
    entry = MANIFEST[name]
    verdict, _ = _run_eval(CORPUS / "problems" / f"{entry['problem']}.py", CORPUS / name)
    _check_contract(verdict)
    status, flags = verdict["status"], set(verdict["flags"])

    if entry["expect"] == "ok":
        assert status == "ok" and verdict["flags"] == [], f"honest candidate {name} not clean: {_summary(verdict)}"
        assert verdict["correct"] is True
        return

    assert status != "ok", f"{name} ({entry['threat']}) was scored as ok: {_summary(verdict)}"
    flags_any, or_status = set(entry["flags_any"]), set(entry["or_status"])
    if flags_any or or_status:
        assert flags & flags_any or status in or_status, (
            f"{name} ({entry['threat']}) not caught for the expected reason: wanted one of flags "
            f"{sorted(flags_any)}" + (f" or a status in {sorted(or_status)}" if or_status else "")
            + f"; got {_summary(verdict)}")
