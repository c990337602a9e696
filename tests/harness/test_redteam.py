"""Red team: candidates that attack the evaluating process, its neighbours and its numbers.

Each runs through ``hercules eval --device D --json`` in a subprocess (real sandbox, real worker
processes), beside the honest control, on the CPU and (GPU mark, skipped without one) on the GPU. The rule for a hostile candidate is the one the evaluation
core promises: caught (status not ``ok``, or a flag) or not reported faster than 1.5x eager; the
command always prints exactly one verdict object, written by the parent, within 240 s; nothing the
candidate started is alive afterwards.

Most of them run one after another in one driver process (tests/cli_batch.py: each through
``hercules.cli.main`` with stdout and stderr descriptors of its own), sharing one cache folder
(the machine's ceilings and the problem's FLOP count, measured once; eager is timed afresh beside
every candidate anyway): a process of their own and a cache of their own cost ~4 s of each ~10 s
evaluation on the 2-core CI machine. A candidate that attacks the process running the command
(killing it, forging its output from a process left behind, loading the machine after it ends) or
the cache folder still gets a process and a folder of its own. The hang's full-length run (its
first call's allowance is 50 s) is on demand; CI ends the same hang at a scaled-down allowance.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import cli_batch
import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "redteam"
PROBLEM = CORPUS / "problem_matmul.py"
LIMIT_S = 240
NOT_FASTER_THAN = 1.5


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request) -> str:
    return request.param


def _args(name: str, device: str) -> tuple[str, ...]:
    # The torch.compile baselines (10-30 s to build per evaluation, and each test has its own
    # cache) have nothing to do with the attacks, and the rule is against eager; on the GPU the
    # CUDA-graph baseline stays (it is the one that amortises launches as some exploits do).
    baselines = ["--baselines", "eager,cudagraph" if device == "cuda" else "eager"]
    return ("eval", "--problem", str(PROBLEM), "--candidate", str(CORPUS / name), "--device", device, "--json",
            "--trials", "3", "--budget", "0.1", *baselines)


def _verdict(name: str, device: str, returncode: int | None, stdout: str, stderr: str, seconds: float) -> tuple[dict, float]:
    """The command's one verdict object, checked: exit 0, nothing else on stdout, not forged, in time."""
    context = f"exit {returncode}\n--- stdout ---\n{stdout[-2000:]}\n--- stderr ---\n{stderr[-2000:]}"
    assert returncode == 0, context
    text = stdout.strip()
    verdict, end = json.JSONDecoder().raw_decode(text)
    assert text[end:].strip() == "", f"more than one object on stdout; {context}"
    assert verdict.get("candidate") != "FORGED-VERDICT", context
    assert seconds < LIMIT_S, f"took {seconds:.0f} s"
    _summary(name, device, verdict, seconds)
    return verdict, seconds


def _eval(name: str, tmp_path: Path, device: str, extra_env: dict[str, str] | None = None) -> tuple[dict, float]:
    """``hercules eval`` in a process of its own, with a cache folder of its own."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    env["HERCULES_CACHE_DIR"] = str(tmp_path / "cache")
    env.update(extra_env or {})
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "hercules.cli", *_args(name, device)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=LIMIT_S + 60)
    return _verdict(name, device, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


# Tests whose evaluations run in the shared driver: test -> its candidate (None: the test's "name"),
# and the environment it adds.
_BATCHED: dict[str, tuple[str | None, dict[str, str]]] = {
    "test_honest_control_is_ok_with_no_flag_and_its_sandbox_is_recorded": ("honest.py", {}),
    "test_forged_numbers_and_reused_results_are_caught_or_not_faster": (None, {}),
    "test_outputs_in_a_pack_that_could_still_change_are_a_forged_reply": ("unsealed_outputs.py", {}),
    "test_a_destination_kept_writable_after_the_reply_is_a_forged_reply": ("destination_kept_writable.py", {}),
    "test_other_processes_memory_is_out_of_reach": ("read_other_memory.py", {}),
    "test_bombs_end_as_the_candidates_failure": (None, {"HERCULES_SANDBOX_MEMORY_GB": "2"}),
}
BATCHED_RUNS = 14  # the evaluations of those tests (the parametrized ones once per candidate)
# The first of them to run waits for the whole batch in its set-up: pytest-timeout's 600 s is the
# bound of one test, not of 14 evaluations (on a CI run with other suites beside it the batch took
# over 600 s, and every batched test errored). Each evaluation is bounded by LIMIT_S itself.
_WAITS_FOR_THE_BATCH = pytest.mark.timeout((LIMIT_S + 60) * BATCHED_RUNS)


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory, device) -> Path:
    """The cache folder of the batched evaluations and of those run in this test process (the
    problem's FLOP counts and footprint, the machine's ceilings: measured once)."""
    return tmp_path_factory.mktemp(f"redteam-cache-{device}")


@pytest.fixture(scope="module")
def batched(request, tmp_path_factory, device, shared_cache) -> dict[str, tuple[cli_batch.Result, float]]:
    """The selected batched evaluations on this device, the honest control first."""
    wanted: dict[str, dict[str, str]] = {}
    for item in request.session.items:
        spec = _BATCHED.get(getattr(item, "originalname", ""))
        if item.module.__name__ != __name__ or spec is None or item.callspec.params.get("device") != device:
            continue
        wanted[spec[0] or item.callspec.params["name"]] = spec[1]
    wanted = dict(sorted(wanted.items(), key=lambda kv: kv[0] != "honest.py"))
    folder = tmp_path_factory.mktemp(f"redteam-{device}")
    runs = {name: cli_batch.Run(_args(name, device), folder, {"HERCULES_CACHE_DIR": str(shared_cache), **env})
            for name, env in wanted.items()}
    assert len(runs) <= BATCHED_RUNS, "BATCHED_RUNS bounds the batch's wait"
    return cli_batch.run_all(runs, folder / "runs", timeout=(LIMIT_S + 60) * max(1, len(runs)))


def _eval_batched(name: str, batched: dict, device: str) -> tuple[dict, float]:
    result = batched[name]
    return _verdict(name, device, result.returncode, result.stdout, result.stderr, result.seconds)


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
def honest(batched, device) -> dict:
    verdict, _ = _eval_batched("honest.py", batched, device)
    return verdict


@_WAITS_FOR_THE_BATCH
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
        # The reference worker competes for the CPU as a group of the same weight, like the sandbox.
        assert honest["sandbox"].get("reference_cpu_group", False) == ("cpu" in usable), honest["sandbox"]


@_WAITS_FOR_THE_BATCH
@pytest.mark.slow
@pytest.mark.parametrize("name", ["forged_timing_python.py", "forged_reply_encoder.py", "forged_reply_cpp.py",
                                  "content_cache.py", "skip_every_other.py", "skip_with_protocol_knowledge.py",
                                  "skip_half_with_protocol_knowledge.py", "skip_unless_every_call_judged.py"])
def test_forged_numbers_and_reused_results_are_caught_or_not_faster(name, batched, device):
    verdict, _ = _eval_batched(name, batched, device)
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
                                  "skip_unless_every_call_judged.py", "skip_in_side_by_side_rounds.py"])
def test_skipping_the_calls_that_are_not_judged_is_caught_without_the_static_scan(name, shared_cache, monkeypatch, device):
    """The dynamic defence alone (the static scan sees the worker module being reached): every
    call skipped but the judged one is flagged; half of them skipped (2x, short of a flag) is held
    to the passes whose every call is judged; skipping only in the rounds timed beside eager is
    held by the bursts whose calls are judged at random after them."""
    import hercules.harness.static_scan as scan
    from hercules.harness.evaluate import EvalOptions, evaluate
    from hercules.problems.loaders import load_source
    from hercules.problems.model import Candidate

    monkeypatch.setattr(scan, "scan_candidate", lambda code, dtype="float32": [])
    verdict = evaluate(load_source(PROBLEM).problems[0], Candidate(name, (CORPUS / name).read_text(), "test"),
                       EvalOptions(device=device, trials=3, timing_budget_s=0.1, cache_dir=shared_cache,
                                   baselines=("eager",)))
    assert verdict.status.value != "build_error", verdict.error
    _summary(f"{name} (static scan off)", device, verdict.to_json())
    _attack_ran(verdict.to_json())
    _caught_or_not_faster(verdict.to_json())


@_WAITS_FOR_THE_BATCH
@pytest.mark.slow
def test_outputs_in_a_pack_that_could_still_change_are_a_forged_reply(batched, device):
    verdict, _ = _eval_batched("unsealed_outputs.py", batched, device)
    assert verdict["status"] == "runtime_error" and verdict["cause"] == "protocol", verdict.get("error")
    # A memory file must be sealed against writes; a device pack's layout cannot claim more bytes
    # than were allocated (mapping it fails).
    expected = "not sealed" if verdict.get("datapath") != "cuda" else "failed"
    assert "pack was refused" in verdict["error"] and expected in verdict["error"], verdict["error"]


@_WAITS_FOR_THE_BATCH
@pytest.mark.slow
def test_a_destination_kept_writable_after_the_reply_is_a_forged_reply(batched, device):
    verdict, _ = _eval_batched("destination_kept_writable.py", batched, device)
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


@_WAITS_FOR_THE_BATCH
@pytest.mark.slow
def test_other_processes_memory_is_out_of_reach(batched, device):
    verdict, _ = _eval_batched("read_other_memory.py", batched, device)
    assert verdict["status"] == "incorrect", verdict


@pytest.mark.slow
@pytest.mark.ondemand  # 54 s on the CI machine: the first call's allowance (20 s base + 30 s) itself
def test_hung_forward_is_a_timeout_within_the_derived_bound(tmp_path, device):
    verdict, seconds = _eval("hang.py", tmp_path, device)
    assert verdict["status"] == "timeout" and verdict["cause"] == "timeout", verdict
    assert verdict["limits"]["first_call_s"] < 120 and seconds < 150


def test_hung_forward_is_a_timeout_at_its_first_calls_allowance_scaled_down(shared_cache, monkeypatch, device):
    """The same hang, ended by the same deadline derived the same way (base + 100x the reference's
    call, plus the first call's extra), with the base and the extra scaled from 20 + 30 s to 2 + 3 s
    so that CI does not wait 50 s for it; the full-length run above is on demand."""
    import hercules.harness.evaluate as ev
    from hercules.harness.evaluate import EvalOptions, evaluate
    from hercules.problems.loaders import load_source
    from hercules.problems.model import Candidate

    monkeypatch.setattr(ev, "CALL_BASE_S", 2.0)
    monkeypatch.setattr(ev, "FIRST_CALL_EXTRA_S", 3.0)
    started = time.monotonic()
    verdict = evaluate(load_source(PROBLEM).problems[0], Candidate("hang.py", (CORPUS / "hang.py").read_text(), "test"),
                       EvalOptions(device=device, trials=3, timing_budget_s=0.1, cache_dir=shared_cache,
                                   baselines=("eager",)))
    seconds = time.monotonic() - started
    _summary("hang.py (allowance scaled down)", device, verdict.to_json(), seconds)
    assert verdict.status.value == "timeout" and verdict.cause.value == "timeout", verdict.error
    assert verdict.error.startswith("trial 0"), verdict.error  # the first call, not a later one
    limits = verdict.limits
    # The base plus 100x the reference's call (12.2 s once on the loaded machine: its call read 102 ms),
    # and the first call's extra on top.
    assert limits["call_s"] >= 2.0
    assert limits["first_call_s"] == pytest.approx(limits["call_s"] + 3.0)
    # Ended at its allowance: the whole evaluation (workers, reference, the hang) well inside the
    # allowance plus a start-up, not at a later deadline (the build's 900 s, the test's timeout).
    assert seconds < limits["first_call_s"] + 60, f"took {seconds:.0f} s"


@_WAITS_FOR_THE_BATCH
@pytest.mark.slow
@pytest.mark.parametrize("name", ["fork_bomb.py", "memory_bomb.py"])
def test_bombs_end_as_the_candidates_failure(name, batched, device):
    verdict, _ = _eval_batched(name, batched, device)
    assert verdict["status"] == "crash" and verdict["cause"] == "sandbox_refusal", verdict


@pytest.mark.slow
def test_killing_the_parent_is_out_of_reach(tmp_path, device):
    verdict, _ = _eval("kill_parent.py", tmp_path, device)  # one verdict, exit status 0
    assert verdict["status"] in {"ok", "incorrect", "crash", "runtime_error"}
