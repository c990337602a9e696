"""The adversarial corpus through the whole pipeline: ``hercules eval ... --device cpu --json``.

For every entry of tests/adversarial/manifest.json, one run of that command line (repository root
as working directory, PYTHONPATH=src). Its stdout must be exactly one JSON object carrying the
verdict contract. Honest candidates must come out ``ok`` with no flag; exploits must not come out
``ok``, and must be caught for the reason the manifest names (see tests/adversarial/README.md).

The command lines run one after another in one driver process (tests/cli_batch.py): each one
through ``hercules.cli.main`` with its own stdout and stderr descriptors, without the ~2.5 s of a
process start each. They evaluate at 3 trials, a 0.1 s timing budget and the eager baseline (the
red team's settings): at the defaults (5 trials, 0.3 s, eager and torch.compile) an entry took
~6.5 s on the 2-core CI machine and the corpus 230 s; no entry is caught by its timing, and each
catch is a flag or a status the manifest names, which these settings leave as they were.

An exploit whose catch is exactly a flag the static scan reports from its source alone (its
``flags_any`` all in its ``static_flags``, which tests/harness/test_static_scan.py asserts, and no
failing status standing in) is evaluated with ``--no-timing``: the verdict carries the static flag
whatever the timing stage measures, and that stage, which such a candidate (``suspicious``, not
``incorrect``) runs in full, was 10-39 s of each of those evaluations on the loaded 2-core machine
(2-5 s without it). Every honest entry, and every exploit caught by a dynamic check or a failing
status, goes through the whole pipeline with its timing.
"""

from __future__ import annotations

import json
from pathlib import Path

import cli_batch
import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "adversarial"
MANIFEST: dict[str, dict] = json.loads((CORPUS / "manifest.json").read_text())
CONTRACT_KEYS = {"status", "correct", "flags", "error", "max_abs_err", "rel_err", "ref_ms", "cand_ms", "speedup",
                 "sol_fraction"}
STATUSES = {"build_error", "runtime_error", "timeout", "crash", "incorrect", "suspicious", "ok", "skipped"}
EVAL_TIMEOUT_S = 600
# The red team's settings: the corpus's threats are not about the baselines or the timing budget.
EVAL_ARGS = ("--device", "cpu", "--json", "--trials", "3", "--budget", "0.1", "--baselines", "eager")


def _caught_statically(entry: dict) -> bool:
    """The manifest's reason for the catch is the static scan's evidence alone."""
    return entry["expect"] != "ok" and bool(entry["flags_any"]) and not entry["or_status"] \
        and set(entry["flags_any"]) <= set(entry["static_flags"])


def _selected(session: pytest.Session) -> list[str]:
    return [i.callspec.params["name"] for i in session.items
            if i.module.__name__ == __name__ and i.originalname == "test_corpus_entry"]


@pytest.fixture(scope="module")
def corpus_runs(request, tmp_path_factory) -> dict[str, cli_batch.Result]:
    """The selected entries' command lines, run in one driver process; one cache folder for all of
    them (baselines, ceilings and FLOP counts are facts of the problem and the machine, as they were
    when the runs shared the user's default cache)."""
    folder = tmp_path_factory.mktemp("corpus")
    env = {"HERCULES_CACHE_DIR": str(folder / "cache"), "CUDA_VISIBLE_DEVICES": None}
    runs = {name: cli_batch.Run(("eval", "--problem", str(CORPUS / "problems" / f"{MANIFEST[name]['problem']}.py"),
                                 "--candidate", str(CORPUS / name), *EVAL_ARGS,
                                 *(("--no-timing",) if _caught_statically(MANIFEST[name]) else ())), ROOT, env)
            for name in _selected(request.session)}
    return cli_batch.run_all(runs, folder / "runs", timeout=EVAL_TIMEOUT_S * max(1, len(runs)))


def _verdict(result: cli_batch.Result) -> dict:
    context = f"exit {result.returncode}\n--- stdout ---\n{result.stdout[-3000:]}\n--- stderr ---\n{result.stderr[-3000:]}"
    assert result.returncode == 0, f"an evaluation happened, so exit status 0 is expected; {context}"
    text = result.stdout.strip()
    try:
        verdict, end = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"stdout is not one JSON object ({exc}); {context}") from None
    assert text[end:].strip() == "", f"stdout holds more than one JSON object; {context}"
    assert isinstance(verdict, dict), f"stdout is JSON but not an object; {context}"
    return verdict


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
@pytest.mark.timeout(EVAL_TIMEOUT_S * len(MANIFEST))  # the first entry's test waits for them all
@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_corpus_entry(name: str, corpus_runs) -> None:
    entry = MANIFEST[name]
    verdict = _verdict(corpus_runs[name])
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
