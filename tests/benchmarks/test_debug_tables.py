"""benchmarks/debug_tables.py on a run folder written for the test: scripted round records, a
reproduction.json, a reference timing and the authors' timing in a corpus folder."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import debug_tables  # noqa: E402

PROTO = "n=1,iter=1,fb=log,hist=1,T=0,seed=0,p=0.7"
TASKS = {"a__compile_error__1": "compile_error", "b__compile_error__2": "compile_error",
         "c__logic_error__3": "logic_error", "d__memory_crash__4": "memory_crash"}


def _round(run: Path, fixer: str, task: str, category: str, correct: bool, speedup: float | None,
           sample: int = 0, proto: str = PROTO) -> None:
    where = run / "attempts" / fixer / proto.replace(",", "_") / task / f"s{sample}" / "i0"
    where.mkdir(parents=True)
    (where / "result.json").write_text(json.dumps({
        "fixer": fixer, "protocol": proto, "task_id": task, "labelled": TASKS[task], "sample": sample, "round": 0,
        "category": category, "subtype": "x", "reason": f"{category} here", "correct": correct,
        "gate": {"correct": correct, "speedup": speedup, "ref_ms": 10.0, "cand_ms": None, "method": "nvtx_region"},
        "degeneration": ["host_delay"] if fixer == "degenerate" else []}))


def _run(tmp_path: Path) -> tuple[Path, Path]:
    run, corpus = tmp_path / "run", tmp_path / "corpus"
    (run).mkdir()
    (run / "run.json").write_text(json.dumps({"corpus": str(corpus), "fixers": ["degenerate", "null", "replay"],
                                              "protocols": [PROTO], "tasks": sorted(TASKS) + ["e__timeout__5"]}))
    # replay: a, b, c pass (b only at p <= 0.9), d's reference crashes
    _round(run, "replay", "a__compile_error__1", "passed", True, 0.95)
    _round(run, "replay", "b__compile_error__2", "passed", True, 0.8)
    _round(run, "replay", "c__logic_error__3", "passed", True, 1.02)
    _round(run, "replay", "d__memory_crash__4", "illegal_memory", False, None)
    # null: a and c agree with their labels, b builds (disagrees), d crashes (agrees)
    _round(run, "null", "a__compile_error__1", "build", False, None)
    _round(run, "null", "b__compile_error__2", "wrong_result", False, None)
    _round(run, "null", "c__logic_error__3", "wrong_result", False, None)
    _round(run, "null", "d__memory_crash__4", "illegal_memory", False, None)
    # degenerate: correct and slow on a, b, c; d's worker killed by the run's stop (not reached)
    for t in ("a__compile_error__1", "b__compile_error__2", "c__logic_error__3"):
        _round(run, "degenerate", t, "slow", True, 0.1)
    _round(run, "degenerate", "d__memory_crash__4", "crash", False, None)
    stopped = next(run.glob("attempts/degenerate/*/d__memory_crash__4/s0/i0/result.json"))
    rec = json.loads(stopped.read_text())
    stopped.write_text(json.dumps(rec | {"reason": "build: worker killed by SIGINT"}))
    reps = [{"task_id": t, "labelled_category": c, "status": "reproduced" if t in ("a__compile_error__1",
            "c__logic_error__3") else "corpus_defect" if t.startswith("d") else "not_reproduced",
             "reproduced": t in ("a__compile_error__1", "c__logic_error__3"),
             "not_reproduced_why": None if t in ("a__compile_error__1", "c__logic_error__3") else "why not"}
            for t, c in TASKS.items()]
    (run / "reproduction.json").write_text(json.dumps({"instances": reps}))
    (run / "references" / "a__compile_error__1").mkdir(parents=True)
    (run / "references" / "a__compile_error__1" / "result.json").write_text(
        json.dumps({"correct": True, "time_ms": 12.0, "method": "nvtx_region"}))
    timings = corpus / debug_tables.AUTHORS_TIMINGS
    timings.mkdir(parents=True)
    (timings / "a__compile_error__1.json").write_text(json.dumps(
        {"task_id": "a__compile_error__1", "timing": {"method": "region/bench_region", "mean_ms": 10.0}}))
    return run, corpus


def test_every_table_of_issue_32_from_scripted_records(tmp_path, capsys):
    run, _ = _run(tmp_path)
    out = tmp_path / "out"
    assert debug_tables.main([str(run), str(out)]) == 0  # the corpus from run.json
    facts = json.loads((out / "debug_h200_tables.json").read_text())
    md = (out / "debug_h200_tables.md").read_text()

    # what was reached: e (asked for) has no round; d has no degenerate round
    assert facts["reached"]["instances"] == 5
    assert facts["reached"]["not_reached"]["degenerate"] == ["d__memory_crash__4", "e__timeout__5"]
    assert facts["stopped_rounds"] == ["degenerate:d__memory_crash__4"]
    # replay passes and why not
    assert facts["replay"]["passed_p0"] == 3 and list(facts["replay"]["failed"]) == ["d__memory_crash__4"]
    assert facts["replay"]["reproduced_tasks"] == 2 and facts["replay"]["reproduced_passed_p0"] == 2
    # null agreement by labelled category, and over the reproduced instances
    by = facts["null"]["by_category"]
    assert (by["compile_error"]["tasks"], by["compile_error"]["agree"]) == (2, 1)
    assert (by["logic_error"]["agree"], by["memory_crash"]["agree"]) == (1, 1)
    assert facts["null"]["agree"] == 3 and facts["null"]["reproduced"]["agree"] == 2
    # degenerate accepted at p=0 and rejected at p=0.7
    d = facts["degenerate"]
    assert (d["correct"], d["accepted_p0"], d["rejected_p0.7"], d["accepted_p0_and_rejected_p0.7"]) == (3, 3, 3, 3)
    assert d["reproduced"] == {"correct": 2, "accepted_p0": 2, "rejected_p0.7": 2}
    # pass@k per protocol and the p-sweep over the reproduced instances (a and c) only
    replay_arm = next(a for a in facts["pass_at_k"] if a["fixer"] == "replay")
    assert replay_arm["tasks"] == 2 and replay_arm["pass_at_k"] == {"1": {"0": 1.0, "0.7": 1.0}}
    assert replay_arm["all_instances"]["pass_at_1"]["0"] == 0.75
    sweep = {(s["fixer"], s["category"]): s["values"] for s in facts["p_sweep"]}
    assert sweep[("replay", "all")] == {"0": 1.0, "0.5": 1.0, "0.7": 1.0, "0.9": 1.0, "1": 0.5}
    assert sweep[("replay", "(every instance, unscored)")]["0.9"] == 0.5  # b (0.8) and d fail p=0.9
    assert sweep[("degenerate", "all")]["0"] == 1.0 and sweep[("degenerate", "all")]["0.5"] == 0.0
    # published figures beside ours: the authors' reference timing and the paper's headline figures
    rt = facts["reference_timings"]
    assert rt["both"] == 1 and rt["median_ratio_same_method"] == 1.2
    assert [p["published"] for p in facts["published"]][0] == "213"
    for heading in ("## What was reached", "## Reproduction", "## replay:", "## null:", "## degenerate:",
                    "## pass@1 and pass@k", "## p-sweep", "## CUDABeaver's published figures"):
        assert heading in md
    assert "replay failed: d__memory_crash__4" in capsys.readouterr().out


def test_pass_at_k_uses_every_sample(tmp_path):
    run = tmp_path / "run"
    proto = PROTO.replace("n=1", "n=2")
    _round(run, "replay", "a__compile_error__1", "passed", True, 1.0, sample=0, proto=proto)
    _round(run, "replay", "a__compile_error__1", "build", False, None, sample=1, proto=proto)
    records = debug_tables.load_records(run)
    _, facts = debug_tables.tables(debug_tables._last_rounds(records), records)
    arm = facts["pass_at_k"][0]
    assert arm["samples_min"] == 2
    assert arm["pass_at_k"]["1"]["0"] == 0.5 and arm["pass_at_k"]["2"]["0"] == 1.0
    assert facts["reproduction"] is None  # no reproduction.json: every instance scored, said so
