"""Tables of a ``hercules debug run`` with the replay, null and degenerate fixers (the GPU check, issue 32).

    python benchmarks/debug_tables.py [--corpus DIR] RUN_DIR [RUN_DIR ...] OUT_DIR

Reads every round's ``result.json`` under each RUN_DIR/attempts (so a run cut short still gives its
tables; several runs, e.g. one per GPU lane over different families, give one table), the run's
``reproduction.json`` (which instances reproduced here: the scored corpus) and the references' timings
under RUN_DIR/references, and writes OUT_DIR/debug_h200_tables.md and .json; prints the headline lines.

The tables: what was reached; the reproduction (the scored corpus); replay passes and why not; the null
fixer's classified-vs-label agreement by labelled category; the degenerate fixer accepted at p=0 and
rejected at p=0.7; pass@1 and pass@k per fixer and protocol; the p-sweep (p = 0, 0.5, 0.7, 0.9, 1) by
category over the reproduced instances; and CUDABeaver's published figures beside ours where the same
quantity exists (the authors' H200 reference timings shipped with the corpus, and the paper's headline
figures, each with its source). The corpus: --corpus, else the folder named in RUN_DIR/run.json.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hercules.debug.classifier import LABEL_OF, killed_by_stop_signal
from hercules.debug.gate import HEADLINE_P, GateResult
from hercules.debug.metrics import mean_pass_at_k

GATE_P = 0.7  # the protocol's gate in debug_h200.sh
AUTHORS_TIMINGS = "_reference_timings/nvidia_h200_sm_90_cuda_12_9"
PAPER = "CUDABeaver: Benchmarking LLM-Based Automated CUDA Debugging (Chen, Li, Fazzini, Ding), arXiv 2605.08455"
# What the paper publishes that these tables can stand beside. Only its abstract-level figures could be
# read here (no per-model table was available): numbers are quoted from the sources named, nothing else.
PUBLISHED = [
    {"quantity": "tasks in the benchmark", "published": "213",
     "source": "arXiv 2605.08455 abstract, as given by https://pith.science/paper/65VHDTLI and "
               "https://uncensoredhub.ai/news/2026-05-12-cudabeaver-reveals-40-point-score-swings-in-llm-gpu-debugging-benchmarks",
     "ours_key": "corpus_instances"},
    {"quantity": "largest shift of a fixer's score with the performance gate (percentage points)",
     "published": "up to 40 (seven frontier LLM fixers; stricter performance requirement vs high tolerance)",
     "source": "arXiv 2605.08455 abstract, as given by https://pith.science/paper/65VHDTLI",
     "ours_key": "max_gate_shift_pp"},
]


# -- loading ------------------------------------------------------------------------------------

def load_records(*run_dirs: Path) -> list[dict]:
    """Every stored round of every fixer, protocol and sample (a later run folder's copy of the same
    round replaces an earlier one)."""
    out: dict[tuple, dict] = {}
    for run_dir in run_dirs:
        for path in sorted(run_dir.glob("attempts/*/*/*/s*/i*/result.json")):
            rec = json.loads(path.read_text())
            out[(rec["fixer"], rec["protocol"], rec["task_id"], rec["sample"], rec["round"])] = rec
    return list(out.values())


def load_rounds(*run_dirs: Path) -> dict[str, dict[str, dict]]:
    """{fixer: {task_id: last round of sample 0}} over every run given."""
    return _last_rounds(load_records(*run_dirs))


def _last_rounds(records: list[dict]) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for rec in records:
        if rec["sample"] != 0:
            continue
        prev = out.setdefault(rec["fixer"], {}).get(rec["task_id"])
        if prev is None or rec["round"] > prev["round"]:
            out[rec["fixer"]][rec["task_id"]] = rec
    return out


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def load_run_meta(*run_dirs: Path) -> dict:
    """Tasks, fixers and protocols the runs were asked for, and their corpus folder."""
    tasks: list[str] = []
    fixers: list[str] = []
    protocols: list[str] = []
    corpus = None
    for run_dir in run_dirs:
        meta = _read_json(run_dir / "run.json") or {}
        tasks += [t for t in meta.get("tasks", []) if t not in tasks]
        fixers += [f for f in meta.get("fixers", []) if f not in fixers]
        protocols += [p for p in meta.get("protocols", []) if p not in protocols]
        corpus = corpus or meta.get("corpus")
    return {"tasks": tasks, "fixers": fixers, "protocols": protocols, "corpus": corpus}


def load_reproductions(*run_dirs: Path) -> dict[str, dict] | None:
    """{task_id: reproduction row} from the runs' reproduction.json (None: no run has one)."""
    out: dict[str, dict] | None = None
    for run_dir in run_dirs:
        data = _read_json(run_dir / "reproduction.json")
        if data:
            out = (out or {}) | {r["task_id"]: r for r in data.get("instances", [])}
    return out


def load_reference_timings(*run_dirs: Path) -> dict[str, dict]:
    """{task_id: the run's own timing of the reference} (RUN/references/<task>/result.json)."""
    out: dict[str, dict] = {}
    for run_dir in run_dirs:
        for path in sorted(run_dir.glob("references/*/result.json")):
            rec = _read_json(path)
            if rec and rec.get("time_ms") is not None:
                out[path.parent.name] = rec
    return out


def load_authors_timings(corpus: Path | None) -> dict[str, dict]:
    """{task_id: timing} of the authors' H200 reference timings shipped with the corpus."""
    if corpus is None or not (corpus / AUTHORS_TIMINGS).is_dir():
        return {}
    out = {}
    for path in sorted((corpus / AUTHORS_TIMINGS).glob("*.json")):
        rec = _read_json(path)
        if rec and not rec.get("skipped") and (rec.get("timing") or {}).get("mean_ms") is not None:
            out[rec.get("task_id", path.stem)] = rec
    return out


# -- helpers ------------------------------------------------------------------------------------

def _killed_by_stop(rec: dict) -> bool:
    return rec.get("category") in ("crash", "env") and killed_by_stop_signal(rec.get("reason") or "")


def _passes(rec: dict, p: float) -> bool:
    return GateResult(**rec["gate"]).passes(p)


def _row(cells) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def _head(cells) -> list[str]:
    return [_row(cells), "|" + "---|" * len(cells)]


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def _frac(a: int, b: int) -> str:
    return f"{a}/{b}" + (f" = {a / b:.1%}" if b else "")


def _label(task_id: str, rec: dict | None, reps: dict | None) -> str:
    if rec is not None:
        return rec["labelled"]
    if reps and task_id in reps:
        return reps[task_id]["labelled_category"]
    parts = task_id.split("__")
    return parts[1] if len(parts) >= 3 else "?"


def _reproduced(task_id: str, reps: dict | None) -> bool:
    return reps is not None and bool((reps.get(task_id) or {}).get("reproduced"))


def _rep_cell(task_id: str, reps: dict | None) -> str:
    """The tables' `reproduced` column: yes, the status otherwise, - without a reproduction stage."""
    if reps is None:
        return "-"
    rep = reps.get(task_id)
    return "not run" if rep is None else "yes" if rep.get("reproduced") else rep["status"]


def _trajectories(records: list[dict]) -> dict[tuple[str, str], dict[str, list[list[dict]]]]:
    """{(fixer, protocol): {task_id: [rounds of each sample]}}."""
    grouped: dict[tuple[str, str, str, int], list[dict]] = defaultdict(list)
    for rec in records:
        grouped[(rec["fixer"], rec["protocol"], rec["task_id"], rec["sample"])].append(rec)
    out: dict[tuple[str, str], dict[str, list[list[dict]]]] = defaultdict(lambda: defaultdict(list))
    for (fixer, proto, task, _), rounds in sorted(grouped.items()):
        out[(fixer, proto)][task].append(sorted(rounds, key=lambda r: r["round"]))
    return out


def _pass_at(samples_by_task: dict[str, list[list[dict]]], tasks: list[str], k: int, p: float) -> float:
    """Mean pass@k over ``tasks`` (a sample passes at p when any of its rounds does)."""
    per_task = [(len(samples_by_task[t]), sum(any(_passes(r, p) for r in s) for s in samples_by_task[t]))
                for t in tasks]
    return mean_pass_at_k(per_task, k)


def _protocol_p(protocol: str) -> float:
    for part in protocol.split(","):
        if part.startswith("p="):
            try:
                return float(part[2:])
            except ValueError:
                pass
    return GATE_P


# -- the tables ---------------------------------------------------------------------------------

def tables(rounds: dict[str, dict[str, dict]], records: list[dict] | None = None, reps: dict | None = None,
           meta: dict | None = None, references: dict | None = None,
           authors: dict | None = None) -> tuple[str, dict]:
    """Markdown and facts. ``rounds`` as from ``load_rounds``; the rest optional (``records``: every
    round, for pass@k and the p-sweep; ``reps``: reproduction rows by task, the scored corpus)."""
    md: list[str] = []
    facts: dict = {}
    records = records if records is not None else [r for by in rounds.values() for r in by.values()]
    # A round whose worker the run's own stop killed (a time guard's SIGINT reaching the builds) is the
    # stop, not the fixer's outcome: left out here, and counted as not reached.
    stopped = [r for r in records if _killed_by_stop(r)]
    if stopped:
        records = [r for r in records if not _killed_by_stop(r)]
        rounds = _last_rounds(records)
    facts["stopped_rounds"] = sorted(f"{r['fixer']}:{r['task_id']}" for r in stopped)
    meta = meta or {}
    md += _reached(rounds, records, reps, meta, facts)
    md += _reproduction(reps, facts)
    md += _replay(rounds.get("replay", {}), reps, facts)
    md += _null(rounds.get("null", {}), reps, facts)
    md += _degenerate(rounds.get("degenerate", {}), reps, facts)
    md += _pass_at_k_and_sweep(records, reps, facts)
    md += _published(facts, meta, references or {}, authors or {}, reps)
    return "\n".join(md).strip() + "\n", facts


def _reached(rounds, records, reps, meta, facts) -> list[str]:
    tasks = meta.get("tasks") or sorted({r["task_id"] for r in records})
    fixers = meta.get("fixers") or sorted(rounds)
    done = {f: set(rounds.get(f, {})) for f in fixers}
    not_reached = {f: sorted(set(tasks) - done[f]) for f in fixers}
    repro_done = len(reps or {})
    facts["reached"] = {"instances": len(tasks), "reproductions": repro_done,
                        "by_fixer": {f: len(done[f]) for f in fixers},
                        "not_reached": not_reached}
    md = ["## What was reached", "",
          f"{len(tasks)} instances asked for; reproductions recorded: {repro_done}; "
          + "; ".join(f"{f}: {len(done[f])} finished, {len(not_reached[f])} not reached" for f in fixers) + ".", ""]
    if facts.get("stopped_rounds"):
        md += [f"{len(facts['stopped_rounds'])} rounds were stored as a worker killed by SIGINT/SIGTERM when a "
               "call's time guard stopped the run: that is the stop, not an outcome, so they are left out of every "
               "table below and counted as not reached (" + ", ".join(facts["stopped_rounds"]) + ").", ""]
    missing = sorted({t for f in fixers for t in not_reached[f]})
    if missing:
        md += ["Not reached (the run's time ran out before their attempt finished):", ""]
        md += _head(["task", "label", *[f"{f} finished" for f in fixers]])
        md += [_row([t, _label(t, None, reps), *[t in done[f] for f in fixers]]) for t in missing]
        md.append("")
    return md


def _reproduction(reps, facts) -> list[str]:
    if reps is None:
        facts["reproduction"] = None
        return ["## Reproduction", "", "(no reproduction.json: every instance below is unscored)", ""]
    by_cat: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in reps.values():
        by_cat[r["labelled_category"]][r["status"]] += 1
    statuses = ("reproduced", "not_reproduced", "untested", "corpus_defect")
    facts["reproduction"] = {"instances": len(reps), "reproduced": sum(bool(r["reproduced"]) for r in reps.values()),
                             "by_category": {c: dict(v) for c, v in sorted(by_cat.items())}}
    md = [f"## Reproduction (the scored corpus): {facts['reproduction']['reproduced']}/{len(reps)} reproduced", "",
          "pass@k and the p-sweep below are over the reproduced instances only (`hercules debug run`'s "
          "default); the replay, null and degenerate tables list every instance with a `reproduced` column.", ""]
    md += _head(["labelled category", *statuses])
    md += [_row([c, *[v.get(s, 0) for s in statuses]]) for c, v in sorted(by_cat.items())]
    md += ["", *_head(["task", "label", "status", "why (not reproduced)"])]
    md += [_row([t, r["labelled_category"], r["status"], (r.get("not_reproduced_why") or "")[:180]])
           for t, r in sorted(reps.items()) if not r["reproduced"]]
    return md + [""]


def _replay(replay, reps, facts) -> list[str]:
    if not replay:
        return []
    ok = [t for t, r in replay.items() if _passes(r, 0.0)]
    scored = [t for t in replay if _reproduced(t, reps)]
    facts["replay"] = {"tasks": len(replay), "passed_p0": len(ok),
                       "reproduced_tasks": len(scored), "reproduced_passed_p0": sum(t in ok for t in scored),
                       "failed": {t: f"{r['category']}/{r['subtype']}: {r['reason'][:200]}"
                                  for t, r in replay.items() if not _passes(r, 0.0)}}
    md = [f"## replay: {len(ok)}/{len(replay)} pass at p=0 "
          f"(reproduced instances: {facts['replay']['reproduced_passed_p0']}/{len(scored)})", "",
          *_head(["task", "reproduced", "passed p=0", "category", "speedup", "timed by", "why (if failed)"])]
    md += [_row([t, _rep_cell(t, reps), _passes(r, 0.0), r["category"], _fmt(r["gate"]["speedup"]),
                 r["gate"]["method"], "" if _passes(r, 0.0) else r["reason"][:160]]) for t, r in sorted(replay.items())]
    why: dict[str, int] = defaultdict(int)
    for t, r in replay.items():
        if not _passes(r, 0.0):
            why[f"{r['category']}/{r['subtype']}"] += 1
    if why:
        md += ["", "Why replay failed, by classified category/subtype: "
               + "; ".join(f"{k}: {v}" for k, v in sorted(why.items(), key=lambda kv: -kv[1]))]
    return md + [""]


def _agreement(null: dict, tasks: list[str]) -> dict[str, dict]:
    by: dict[str, dict] = {}
    for t in tasks:
        r = null[t]
        cell = by.setdefault(r["labelled"], {"tasks": 0, "agree": 0, "classified": defaultdict(int)})
        cell["tasks"] += 1
        cell["agree"] += LABEL_OF.get(r["category"]) == r["labelled"]
        cell["classified"][r["category"]] += 1
    return {c: {**v, "classified": dict(v["classified"])} for c, v in sorted(by.items())}


def _null(null, reps, facts) -> list[str]:
    if not null:
        return []
    agree = [t for t, r in null.items() if LABEL_OF.get(r["category"]) == r["labelled"]]
    passed = [t for t, r in null.items() if _passes(r, GATE_P)]
    by_all = _agreement(null, list(null))
    scored = [t for t in null if _reproduced(t, reps)]
    by_rep = _agreement(null, scored)
    facts["null"] = {"tasks": len(null), "agree": len(agree), "label_agreement": len(agree) / len(null),
                     "passed_p0.7": passed, "by_category": by_all,
                     "reproduced": {"tasks": len(scored), "agree": sum(t in agree for t in scored),
                                    "by_category": by_rep}}
    md = [(f"## null: classified-vs-label agreement {_frac(len(agree), len(null))}; "
           f"passed at p={GATE_P}: {len(passed)}"), "",
          "By labelled category, every instance the null fixer ran (the broken file as submitted):", "",
          *_head(["labelled category", "tasks", "agree", "agreement", "classified as"])]
    md += [_row([c, v["tasks"], v["agree"], f"{v['agree'] / v['tasks']:.1%}",
                 ", ".join(f"{k} {n}" for k, n in sorted(v["classified"].items(), key=lambda kv: -kv[1]))])
           for c, v in by_all.items()]
    if reps is not None:
        md += ["", f"Over the reproduced instances only: {_frac(facts['null']['reproduced']['agree'], len(scored))} "
               "(agreement there holds by construction: an instance is reproduced when the broken file shows its "
               "labelled failure here).", "",
               *_head(["labelled category", "reproduced tasks", "agree"])]
        md += [_row([c, v["tasks"], v["agree"]]) for c, v in by_rep.items()]
    md += ["", *_head(["task", "label", "reproduced", "classified", "subtype", "agrees", f"passed p={GATE_P}",
                       "evidence"])]
    md += [_row([t, r["labelled"], _rep_cell(t, reps), r["category"], r["subtype"], t in agree,
                 _passes(r, GATE_P), r["reason"][:140]]) for t, r in sorted(null.items())]
    return md + [""]


def _degenerate(degen, reps, facts) -> list[str]:
    if not degen:
        return []
    correct = {t: r for t, r in degen.items() if r["correct"]}
    rejected = [t for t, r in correct.items() if not _passes(r, GATE_P)]
    accepted0 = [t for t, r in correct.items() if _passes(r, 0.0)]
    scored = [t for t in correct if _reproduced(t, reps)]
    facts["degenerate"] = {"tasks": len(degen), "correct": len(correct), "accepted_p0": len(accepted0),
                           "rejected_p0.7": len(rejected),
                           "accepted_p0_and_rejected_p0.7": sum(t in rejected for t in accepted0),
                           "reproduced": {"correct": len(scored), "accepted_p0": sum(t in accepted0 for t in scored),
                                          "rejected_p0.7": sum(t in rejected for t in scored)},
                           "not_correct": {t: f"{r['category']}: {r['reason'][:160]}"
                                           for t, r in degen.items() if not r["correct"]}}
    md = [(f"## degenerate: correct {len(correct)}/{len(degen)}; of those accepted at p=0: "
           f"{len(accepted0)}, rejected at p={GATE_P}: {len(rejected)}"
           + (f" (reproduced instances: {len(scored)} correct, {facts['degenerate']['reproduced']['accepted_p0']} "
              f"accepted at p=0, {facts['degenerate']['reproduced']['rejected_p0.7']} rejected at p={GATE_P})"
              if reps is not None else "")), "",
          *_head(["task", "reproduced", "correct", "speedup", "timed by", "accepted p=0", f"rejected p={GATE_P}",
                  "signs", "category"])]
    md += [_row([t, _rep_cell(t, reps), r["correct"], _fmt(r["gate"]["speedup"]), r["gate"]["method"],
                 _passes(r, 0.0), not _passes(r, GATE_P), ",".join(r["degeneration"]) or "-", r["category"]])
           for t, r in sorted(degen.items())]
    return md + [""]


def _pass_at_k_and_sweep(records, reps, facts) -> list[str]:
    trajs = _trajectories(records)
    if not trajs:
        return []
    arms, sweep = [], []
    for (fixer, proto), by_task in sorted(trajs.items()):
        scored = sorted(t for t in by_task if reps is None or _reproduced(t, reps))
        n_min = min((len(by_task[t]) for t in scored), default=0)
        p_arm = _protocol_p(proto)
        arms.append({"fixer": fixer, "protocol": proto, "tasks": len(scored), "samples_min": n_min,
                     "pass_at_k": {f"{k}": {f"{p:g}": _pass_at(by_task, scored, k, p) for p in (0.0, p_arm)}
                                   for k in range(1, n_min + 1)},
                     "all_instances": {"tasks": len(by_task),
                                       "pass_at_1": {f"{p:g}": _pass_at(by_task, sorted(by_task), 1, p)
                                                     for p in (0.0, p_arm)}}})
        by_cat: dict[str, list[str]] = defaultdict(list)
        for t in scored:
            by_cat[by_task[t][0][0]["labelled"]].append(t)
        for cat, ts in [*sorted(by_cat.items()), ("all", scored)]:
            if ts:
                sweep.append({"fixer": fixer, "protocol": proto, "k": 1, "category": cat, "tasks": len(ts),
                              "values": {f"{p:g}": _pass_at(by_task, ts, 1, p) for p in HEADLINE_P}})
        sweep.append({"fixer": fixer, "protocol": proto, "k": 1, "category": "(every instance, unscored)",
                      "tasks": len(by_task),
                      "values": {f"{p:g}": _pass_at(by_task, sorted(by_task), 1, p) for p in HEADLINE_P}})
    facts["pass_at_k"] = arms
    facts["p_sweep"] = sweep
    over = "the reproduced instances" if reps is not None else "every instance (no reproduction.json)"
    md = ["## pass@1 and pass@k per fixer and protocol", "",
          f"pass@k(M, C=cudabeaver, A, p) over {over}; a sample passes at p when it is correct and its speedup over "
          "the reference, timed the same way, is at least p. pass@k for k > 1 needs at least k samples per "
          "instance (protocol n >= k); the protocol's n bounds the k given.", "",
          *_head(["M", "A", "tasks", "samples n", "pass@k at p=0", "pass@k at the protocol's p",
                  "every instance: tasks, pass@1 p=0 / protocol p"])]
    for a in arms:
        p_arm = f"{_protocol_p(a['protocol']):g}"
        at0 = "; ".join(f"pass@{k} {v['0']:.3f}" for k, v in a["pass_at_k"].items()) or "-"
        atp = "; ".join(f"pass@{k} {v[p_arm]:.3f} (p={p_arm})" for k, v in a["pass_at_k"].items()) or "-"
        e = a["all_instances"]
        md.append(_row([a["fixer"], a["protocol"], a["tasks"], a["samples_min"], at0, atp,
                        f"{e['tasks']}: {e['pass_at_1']['0']:.3f} / {e['pass_at_1'][p_arm]:.3f}"]))
    heads = [f"p={p:g}" for p in HEADLINE_P]
    md += ["", f"## p-sweep: pass@1 against the performance gate p, over {over}", "",
           *_head(["M", "A", "category", "tasks", *heads])]
    md += [_row([s["fixer"], s["protocol"], s["category"], s["tasks"], *[f"{v:.3f}" for v in s["values"].values()]])
           for s in sweep]
    return md + [""]


def _published(facts, meta, references, authors, reps) -> list[str]:
    shifts = [100 * (s["values"]["0"] - min(s["values"].values())) for s in facts.get("p_sweep", [])
              if s["category"] == "all"]
    over = "reproduced instances" if reps is not None else "every instance"
    ours = {"corpus_instances": f"{len(meta.get('tasks') or [])} (this corpus is a sample: 65 of the repository's "
                                "228 instances, corpora/cudabeaver/README.md)",
            "max_gate_shift_pp": (f"{max(shifts):.0f} (largest p=0 to strictest-p drop of the control fixers "
                                  f"here, {over}; replay and degenerate are not LLMs)"
                                  if shifts else "-")}
    facts["published"] = [dict(p, ours=ours[p["ours_key"]]) for p in PUBLISHED]
    md = ["## CUDABeaver's published figures beside ours", "",
          f"Paper: {PAPER}. No per-model pass@k table of the paper could be read here, so only the figures "
          "below are set beside ours; the control fixers here (replay, null, degenerate) have no counterpart "
          "among the paper's LLM fixers.", "",
          *_head(["quantity", "published", "ours", "source"])]
    md += [_row([p["quantity"], p["published"], p["ours"], p["source"]]) for p in facts["published"]]
    both = sorted(set(references) & set(authors))
    rows = []
    for t in both:
        ours_ms, theirs_ms = references[t]["time_ms"], authors[t]["timing"]["mean_ms"]
        rows.append({"task": t, "ours_ms": ours_ms, "ours_method": references[t].get("method"),
                     "authors_ms": theirs_ms, "authors_method": authors[t]["timing"].get("method"),
                     "ratio": ours_ms / theirs_ms if theirs_ms else None})
    # the same method: our NVTX bench_region timer against their region/bench_region
    same = [r["ratio"] for r in rows if r["ratio"] and r["ours_method"] == "nvtx_region"
            and "bench_region" in str(r["authors_method"])]
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    facts["reference_timings"] = {"authors_instances": len(authors), "both": len(rows),
                                  "median_ratio_ours_over_authors": statistics.median(ratios) if ratios else None,
                                  "same_method": len(same),
                                  "median_ratio_same_method": statistics.median(same) if same else None,
                                  "rows": rows}
    md += ["", f"### Reference timings: ours beside the authors' H200 timings ({AUTHORS_TIMINGS}, shipped with "
           f"the corpus, CC BY 4.0): {len(rows)} instances in both", ""]
    if rows:
        md += [f"Median ratio ours / authors: {statistics.median(ratios):.3f} over all {len(ratios)}"
               + (f"; {statistics.median(same):.3f} over the {len(same)} timed by the same region (our NVTX "
                  "`bench_region` timer, their region/bench_region)" if same else "")
               + " (the authors: H200, CUDA 12.9; ours: the card and toolchain of this run).", "",
               *_head(["task", "reproduced", "ours ms", "our method", "authors' mean ms", "their method",
                       "ours / authors"])]
        md += [_row([r["task"], _rep_cell(r["task"], reps), _fmt(r["ours_ms"]), r["ours_method"],
                     _fmt(r["authors_ms"]), r["authors_method"], _fmt(r["ratio"])]) for r in rows]
    else:
        md.append("(no reference of this run was timed, or the corpus' timings were not found)")
    return md + [""]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    corpus = None
    if "--corpus" in args:
        i = args.index("--corpus")
        corpus = Path(args[i + 1])
        del args[i:i + 2]
    if len(args) < 2:
        sys.exit(__doc__)
    run_dirs, out_dir = [Path(a) for a in args[:-1]], Path(args[-1])
    meta = load_run_meta(*run_dirs)
    corpus = corpus or (Path(meta["corpus"]) if meta.get("corpus") else None)
    records = load_records(*run_dirs)
    md, facts = tables(_last_rounds(records), records, load_reproductions(*run_dirs), meta,
                       load_reference_timings(*run_dirs), load_authors_timings(corpus))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "debug_h200_tables.md").write_text(md)
    (out_dir / "debug_h200_tables.json").write_text(json.dumps(facts, indent=1, default=str))
    for line in md.splitlines():
        if line.startswith("## "):
            print(line[3:])
    for t, why in (facts.get("replay", {}).get("failed") or {}).items():
        print(f"  replay failed: {t}: {why[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
