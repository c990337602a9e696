"""Red team: candidates that attack the evaluating process, its neighbours and its numbers.

Each runs through ``hercules eval --device D --json`` in a subprocess (real sandbox, real worker
processes), beside the honest control, on the CPU and (GPU mark, skipped without one) on the GPU. The rule for a hostile candidate is the one the evaluation
core promises: caught (status not ``ok``, or a flag) or not reported faster than 1.5x eager; the
command always prints exactly one verdict object, written by the parent, within 240 s; nothing the
candidate started is alive afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "redteam"
PROBLEM = CORPUS / "problem_matmul.py"
LIMIT_S = 240
NOT_FASTER_THAN = 1.5


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request) -> str:
    return request.param


def _eval(name: str, tmp_path: Path, device: str, extra_env: dict[str, str] | None = None) -> tuple[dict, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    env["HERCULES_CACHE_DIR"] = str(tmp_path / "cache")
    env.update(extra_env or {})
    # The torch.compile baselines (10-30 s to build per evaluation, and each test has its own
    # cache) have nothing to do with the attacks, and the rule is against eager; on the GPU the
    # CUDA-graph baseline stays (it is the one that amortises launches as some exploits do).
    baselines = ["--baselines", "eager,cudagraph" if device == "cuda" else "eager"]
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "hercules.cli", "eval", "--problem", str(PROBLEM), "--candidate", str(CORPUS / name),
         "--device", device, "--json", "--trials", "3", "--budget", "0.1", *baselines],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=LIMIT_S + 60)
    seconds = time.monotonic() - started
    context = f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-2000:]}\n--- stderr ---\n{proc.stderr[-2000:]}"
    assert proc.returncode == 0, context
    text = proc.stdout.strip()
    verdict, end = json.JSONDecoder().raw_decode(text)
    assert text[end:].strip() == "", f"more than one object on stdout; {context}"
    assert verdict.get("candidate") != "FORGED-VERDICT", context
    assert seconds < LIMIT_S, f"took {seconds:.0f} s"
    _summary(name, device, verdict, seconds)
    return verdict, seconds


def _summary(name: str, device: str, verdict: dict, seconds: float | None = None) -> None:
    """One line per evaluation (``pytest -s`` shows them): the red-team table's row."""
    timing = verdict.get("timing") or {}
    print(f"\nREDTEAM {device} {name}: {verdict['status']} flags={verdict['flags']} "
          f"speedup={(verdict.get('speedup') or {}).get('eager')} median={timing.get('median_ms')} "
          f"events={timing.get('event_median_ms')} wall={timing.get('wall_ms')} judged={timing.get('judged_ms')} "
          f"seen={timing.get('seen_ms')} bounded_by={timing.get('bounded_by')}"
          + (f" in {seconds:.0f} s" if seconds is not None else ""))


def _no_process_with(marker: str) -> bool:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if marker in cmdline or marker in comm:
            return False
    return True


def _attack_ran(verdict: dict) -> None:
    """An exploit that raised (its patch no longer fits the worker it attacks) proves nothing."""
    assert not (verdict["status"] == "runtime_error" and verdict.get("cause") == "candidate_error"), (
        f"the exploit itself failed: {verdict.get('error')}")


def _caught_or_not_faster(verdict: dict) -> None:
    status, flags = verdict["status"], verdict["flags"]
    speedup = (verdict.get("speedup") or {}).get("eager")
    caught = status != "ok" or bool(flags)
    assert caught or (speedup is not None and speedup <= NOT_FASTER_THAN), (
        f"status={status} flags={flags} speedup={speedup} timing={verdict.get('timing')}")


@pytest.fixture(scope="module")
def honest(tmp_path_factory, device) -> dict:
    verdict, _ = _eval("honest.py", tmp_path_factory.mktemp("honest"), device)
    return verdict


@pytest.mark.slow
def test_honest_control_is_ok_with_no_flag_and_its_sandbox_is_recorded(honest):
    assert honest["status"] == "ok" and honest["flags"] == [], honest.get("error")
    assert honest["sandbox"]["mechanism"].startswith("bubblewrap") or honest["sandbox"]["reason"]
    assert honest["timing"]["wall_ms"] > 0 and honest["timing"]["median_ms"] >= honest["timing"]["wall_ms"]
    assert honest["limits"]["call_s"] >= 20
    # Which bounds the kernel enforced is in the verdict: every controller this host lets us use.
    from hercules.harness.sandbox import _own_cgroup

    usable = {c for c in ("pids", "memory", "cpu") if os.geteuid() == 0 and _own_cgroup(c) is not None}
    if honest["sandbox"]["mechanism"].startswith("bubblewrap"):
        assert set(honest["sandbox"]["cgroups"]) == usable, honest["sandbox"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["forged_timing_python.py", "forged_reply_encoder.py", "forged_reply_cpp.py",
                                  "content_cache.py", "skip_every_other.py", "skip_with_protocol_knowledge.py",
                                  "skip_half_with_protocol_knowledge.py", "skip_unless_every_call_judged.py"])
def test_forged_numbers_and_reused_results_are_caught_or_not_faster(name, tmp_path, device):
    verdict, _ = _eval(name, tmp_path, device)
    # The exploits refuse to load when they find nothing to attack: a build error means the attack
    # never ran, which proves nothing about the core.
    assert verdict["status"] != "build_error", verdict.get("error")
    _attack_ran(verdict)
    _caught_or_not_faster(verdict)


@pytest.mark.slow
def test_detached_process_cannot_forge_the_verdict_or_kill_the_parent_and_dies_with_the_evaluation(tmp_path, device):
    verdict, _ = _eval("detached_forger.py", tmp_path, device)  # _eval asserts one unforged object, exit 0
    _caught_or_not_faster(verdict)
    assert _no_process_with("313.7"), "the detached process outlived its evaluation"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["skip_with_protocol_knowledge.py", "skip_half_with_protocol_knowledge.py",
                                  "skip_unless_every_call_judged.py"])
def test_skipping_the_calls_that_are_not_judged_is_caught_without_the_static_scan(name, tmp_path, monkeypatch, device):
    """The dynamic defence alone (the static scan sees the worker module being reached): every
    call skipped but the judged one is flagged; half of them skipped (2x, short of a flag) is held
    to the passes whose every call is judged."""
    import hercules.harness.static_scan as scan
    from hercules.harness.evaluate import EvalOptions, evaluate
    from hercules.problems.loaders import load_source
    from hercules.problems.model import Candidate

    monkeypatch.setattr(scan, "scan_candidate", lambda code, dtype="float32": [])
    verdict = evaluate(load_source(PROBLEM).problems[0], Candidate(name, (CORPUS / name).read_text(), "test"),
                       EvalOptions(device=device, trials=3, timing_budget_s=0.1, cache_dir=tmp_path / "cache",
                                   baselines=("eager",)))
    assert verdict.status.value != "build_error", verdict.error
    _summary(f"{name} (static scan off)", device, verdict.to_json())
    _attack_ran(verdict.to_json())
    _caught_or_not_faster(verdict.to_json())


@pytest.mark.slow
def test_outputs_in_a_pack_that_could_still_change_are_a_forged_reply(tmp_path, device):
    verdict, _ = _eval("unsealed_outputs.py", tmp_path, device)
    assert verdict["status"] == "runtime_error" and verdict["cause"] == "protocol", verdict.get("error")
    # A memory file must be sealed against writes; a device pack's layout cannot claim more bytes
    # than were allocated (mapping it fails).
    expected = "not sealed" if verdict.get("datapath") != "cuda" else "failed"
    assert "pack was refused" in verdict["error"] and expected in verdict["error"], verdict["error"]


@pytest.mark.slow
def test_a_destination_kept_writable_after_the_reply_is_a_forged_reply(tmp_path, device):
    verdict, _ = _eval("destination_kept_writable.py", tmp_path, device)
    _summary("destination_kept_writable.py", device, verdict)
    if verdict.get("datapath") == "cuda":  # device packs: no destination to keep; its scan still sees the attempt
        _caught_or_not_faster(verdict)
        return
    assert verdict["status"] == "runtime_error" and verdict["cause"] == "protocol", verdict.get("error")
    assert "could not be sealed" in verdict["error"], verdict["error"]


@pytest.mark.slow
def test_load_left_behind_cannot_slow_the_baselines(tmp_path, device):
    verdict, _ = _eval("load_left_behind.py", tmp_path, device)
    _caught_or_not_faster(verdict)
    assert _no_process_with("hercules-burner"), "the load outlived its evaluation"


@pytest.mark.slow
def test_run_folder_store_and_caches_cannot_be_edited(tmp_path, device):
    verdict, _ = _eval("poison_files.py", tmp_path, device)
    _caught_or_not_faster(verdict)
    for path in (tmp_path / "cache").rglob("*.json"):
        assert "FORGED" not in path.read_text()
    baselines = list((tmp_path / "cache" / "baselines").glob("*.json"))
    assert baselines, "the parent wrote the baseline cache"
    eager = json.loads(baselines[0].read_text())["eager"]
    assert eager == pytest.approx(verdict["baselines_ms"]["eager"], rel=1e-6)


@pytest.mark.slow
def test_other_processes_memory_is_out_of_reach(tmp_path, device):
    verdict, _ = _eval("read_other_memory.py", tmp_path, device)
    assert verdict["status"] == "incorrect", verdict


@pytest.mark.slow
def test_hung_forward_is_a_timeout_within_the_derived_bound(tmp_path, device):
    verdict, seconds = _eval("hang.py", tmp_path, device)
    assert verdict["status"] == "timeout" and verdict["cause"] == "timeout", verdict
    assert verdict["limits"]["first_call_s"] < 120 and seconds < 150


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fork_bomb.py", "memory_bomb.py"])
def test_bombs_end_as_the_candidates_failure(name, tmp_path, device):
    verdict, _ = _eval(name, tmp_path, device, {"HERCULES_SANDBOX_MEMORY_GB": "2"})
    assert verdict["status"] == "crash" and verdict["cause"] == "sandbox_refusal", verdict


@pytest.mark.slow
def test_killing_the_parent_is_out_of_reach(tmp_path, device):
    verdict, _ = _eval("kill_parent.py", tmp_path, device)  # one verdict, exit status 0
    assert verdict["status"] in {"ok", "incorrect", "crash", "runtime_error"}
