"""Summary (JSON), markdown and HTML reports of a debug run.

pass@k is scored over the instances reproduced on this machine (``reproduce``) unless the run was
asked for ``--all``; the excluded ones are listed with their reasons. The headline is the p-sweep:
pass@k at gates p = 0, 0.5, 0.7, 0.9, 1.0 per fixer, protocol and labelled category, re-scored
from the stored rounds' gate records (correct, speedup) -- nothing is run again for it.
"""

from __future__ import annotations

import html
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from hercules.debug.classifier import LABEL_OF
from hercules.debug.gate import HEADLINE_P, P_SWEEP
from hercules.debug.metrics import PassAtK, breakdown, mean_pass_at_k
from hercules.debug.reproduce import Repro
from hercules.debug.runner import Trajectory

NOT_VALIDATED = "not_validated"  # a run without the reproduction stage


def _task_entry(group: list[Trajectory], rep: Any = None) -> dict[str, Any]:
    first = group[0]
    final = first.final
    p = first.protocol.p
    return {
        "task_id": first.instance.task_id, "family": first.instance.family, "kind": first.instance.kind,
        "fixer": first.fixer, "protocol": first.protocol.describe(),
        "labelled_category": first.instance.category, "classified_category": final["category"],
        "classified_label": LABEL_OF.get(final["category"]), "subtype": final["subtype"],
        "reason": final["reason"], "environment_suspect": final["environment_suspect"],
        "passed": any(t.passes(p) for t in group), "correct": any(r["correct"] for t in group for r in t.rounds),
        "samples": len(group), "samples_passed": sum(t.passes(p) for t in group),
        "speedup": final["gate"]["speedup"], "timing_method": final["gate"]["method"],
        "degeneration": final["degeneration"], "stagnation": sorted({m for t in group for m in t.modes}),
        "rounds": len(final and first.rounds), "notes": final["outcome"].get("notes", []),
        # always a boolean: True only where the reproduction saw the labelled failure here
        "reproduced": rep is not None and rep.reproduced is True,
        "reproduction_status": rep.status if rep is not None else NOT_VALIDATED,
        "not_reproduced_why": (rep.not_reproduced_why if rep is not None
                               else "not validated: the run has no reproduction stage"),
        # the final round took a recorded run instead of running (``reuse``): from where, and how
        # many of the group's rounds did
        "reused_from": final.get("reused_from"),
        "reused_rounds": sum(1 for t in group for r in t.rounds if r.get("reused_from")),
    }


def _sweep(task_groups: list[list[Trajectory]], k: int, p: float) -> float:
    return mean_pass_at_k([(len(g), sum(t.passes(p) for t in g)) for g in task_groups], k)


def summarise(trajectories: Sequence[Trajectory], corpus: str, ks: Sequence[int] = (1,),
              reproductions: Sequence[Any] | None = None, score_all: bool = False) -> dict[str, Any]:
    """The run's summary. With ``reproductions`` (``reproduce.Reproduction`` records) pass@k is over
    the reproduced instances only, unless ``score_all``; without them every instance is scored."""
    reps = {r.task_id: r for r in reproductions} if reproductions is not None else None

    def scored(task_id: str) -> bool:
        if score_all or reps is None:
            return True
        rep = reps.get(task_id)
        return rep is not None and rep.reproduced is True

    groups: dict[tuple[str, str, str], list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        groups[(t.fixer, t.protocol.describe(), t.instance.task_id)].append(t)
    tasks = [_task_entry(g, reps.get(g[0].instance.task_id) if reps is not None else None) for g in groups.values()]
    by_arm: dict[tuple[str, str], list[list[Trajectory]]] = defaultdict(list)
    for (fixer, proto, task_id), g in groups.items():
        if scored(task_id):
            by_arm[(fixer, proto)].append(g)
    arm_keys = sorted({(f, p) for f, p, _ in groups})
    metrics: list[dict[str, Any]] = []
    arms: list[dict[str, Any]] = []
    sweep: list[dict[str, Any]] = []
    for fixer, proto in arm_keys:
        task_groups = by_arm.get((fixer, proto), [])
        entries = [e for e in tasks if e["fixer"] == fixer and e["protocol"] == proto and scored(e["task_id"])]
        protocol = next(t.protocol for t in trajectories if t.fixer == fixer and t.protocol.describe() == proto)
        for k in ks:
            if any(len(g) < k for g in task_groups):
                continue
            for p in P_SWEEP:
                value = _sweep(task_groups, k, p)
                m = PassAtK(k, fixer, corpus, proto, p, value, len(task_groups))
                metrics.append({"label": m.label, "k": k, "fixer": fixer, "corpus": corpus, "protocol": proto,
                                "p": p, "value": value, "tasks": m.tasks})
            by_cat: dict[str, list[list[Trajectory]]] = defaultdict(list)
            for g in task_groups:
                by_cat[g[0].instance.category].append(g)
            for cat, cat_groups in [*sorted(by_cat.items()), ("all", task_groups)]:
                if not cat_groups:  # nothing of this arm scored: no row of zeros that means nothing
                    continue
                sweep.append({
                    "fixer": fixer, "protocol": proto, "k": k, "category": cat, "tasks": len(cat_groups),
                    "values": {f"{p:g}": _sweep(cat_groups, k, p) for p in HEADLINE_P},
                    # trajectories stop at their first pass at the protocol's own p: above it, rounds
                    # that might have passed the higher gate were not run (a lower bound)
                    "lower_bound_above_p": protocol.p if protocol.iterations > 1 else None,
                })
        labelled = [e for e in entries if e["classified_label"] is not None or e["labelled_category"]]
        agree = sum(e["classified_label"] == e["labelled_category"] for e in labelled)
        arms.append({
            "fixer": fixer, "protocol": proto, "tasks": len(entries),
            "excluded_tasks": sum(1 for e in tasks if e["fixer"] == fixer and e["protocol"] == proto
                                  and not scored(e["task_id"])),
            "passed": sum(e["passed"] for e in entries),
            "label_agreement": agree / len(labelled) if labelled else None,
            "by_labelled_category": breakdown((e["labelled_category"], e["passed"]) for e in entries),
            "by_family": breakdown((e["family"], e["passed"]) for e in entries),
            "classified": dict(Counter(e["classified_category"] for e in entries)),
            "stagnation": dict(Counter(m for e in entries for m in e["stagnation"])),
            "degeneration": dict(Counter(d.split(":")[0] for e in entries for d in e["degeneration"])),
        })
    summary: dict[str, Any] = {"corpus": corpus, "p_sweep": sweep, "arms": arms, "pass_at_k": metrics,
                               "tasks": tasks, "reuse": _reuse_counts(trajectories)}
    task_ids = sorted({t.instance.task_id for t in trajectories})
    labels = {t.instance.task_id: t.instance.category for t in trajectories}
    if reps is None:
        summary["reproduction"] = {"scored": "all", "validated": False, "scored_tasks": len(task_ids),
                                   "excluded_tasks": 0, "excluded": []}
    else:
        from hercules.debug.reproduce import counts

        excluded = [{"task_id": i, "labelled_category": labels[i],
                     "status": reps[i].status if i in reps else NOT_VALIDATED,
                     "why": reps[i].not_reproduced_why if i in reps else "not validated"}
                    for i in task_ids if not (i in reps and reps[i].reproduced is True)]
        summary["reproduction"] = {
            "scored": "all" if score_all else "reproduced", "validated": True,
            "scored_tasks": sum(scored(i) for i in task_ids),
            "excluded_tasks": 0 if score_all else len(excluded),
            "not_reproduced_tasks": len(excluded),
            "counts": counts([reps[i] for i in task_ids if i in reps]),
            "excluded": excluded,
        }
    return summary


def _reuse_counts(trajectories: Sequence[Trajectory]) -> dict[str, Any]:
    rounds = [r for t in trajectories for r in t.rounds]
    sources = Counter(r["reused_from"] for r in rounds if r.get("reused_from"))
    return {"rounds": len(rounds), "reused": dict(sorted(sources.items())),
            "run": len(rounds) - sum(sources.values())}


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v):
        return f"{v:.3f}" if isinstance(v, float) else str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(summary: dict[str, Any]) -> str:
    out = [f"# Debug run on corpus {summary['corpus']}", ""]
    if partial := summary.get("partial"):
        out += [(f"Partial run: {partial['finished_trajectories']} trajectories finished, "
                 f"{partial['unfinished_trajectories']} not (summarised from the stored rounds; "
                 "pass@k is over the finished ones)." if partial["unfinished_trajectories"] else
                 f"Summarised from the stored rounds (the run stopped before writing its summary): "
                 f"all {partial['finished_trajectories']} trajectories finished."), ""]
    out += _sweep_markdown(summary)
    out += _reproduction_markdown(summary)
    out += _reuse_markdown(summary)
    out += ["## pass@k sweep (every gate)", ""]
    out.append(_table(["pass@k(M, C, A, p)", "value", "tasks"],
                      [(m["label"], m["value"], m["tasks"]) for m in summary["pass_at_k"]]))
    for arm in summary["arms"]:
        agreement = arm["label_agreement"] if arm["label_agreement"] is None else round(arm["label_agreement"], 3)
        out += ["", f"## M={arm['fixer']}, A={arm['protocol']}", "",
                f"passed {arm['passed']}/{arm['tasks']}; classified-vs-label agreement {agreement}",
                "", _table(["labelled category", "tasks", "passed"],
                           [(k, v["tasks"], v["passed"]) for k, v in arm["by_labelled_category"].items()]),
                "", _table(["family", "tasks", "passed"],
                           [(k, v["tasks"], v["passed"]) for k, v in arm["by_family"].items()]),
                "", (f"classified: {arm['classified']}; stagnation: {arm['stagnation']}; "
                     f"degeneration: {arm['degeneration']}")]
    out += ["", "## Tasks", ""]
    out.append(_table(["fixer", "task", "label", "reproduced", "classified", "subtype", "passed", "speedup",
                       "degeneration", "reused", "why"],
                      [(t["fixer"], t["task_id"], t["labelled_category"],
                        _reproduced_cell(t),
                        t["classified_category"], t["subtype"], t["passed"], t["speedup"] if t["speedup"] is not None else "-",
                        ",".join(t["degeneration"]) or "-", t.get("reused_from") or "-", t["reason"][:160])
                       for t in summary["tasks"]]))
    return "\n".join(out) + "\n"


def _reproduced_cell(task: dict[str, Any]) -> str:
    if task.get("reproduced") is True:
        return "yes"
    status = task.get("reproduction_status")
    return status if status in (Repro.UNTESTED, Repro.CORPUS_DEFECT, NOT_VALIDATED) else "no"


def _sweep_markdown(summary: dict[str, Any]) -> list[str]:
    rows = summary.get("p_sweep") or []
    repro = summary.get("reproduction") or {}
    over = ("the instances reproduced on this machine" if repro.get("scored") == "reproduced"
            else "every instance (--all)" if repro.get("validated") else "every instance (no reproduction stage)")
    out = ["## pass@k against the performance gate p (p-sweep)", "",
           f"pass@k(M, C, A, p) per fixer M, protocol A and labelled failure category, over {over}; "
           "re-scored from the stored rounds (a repair passes at p when it is correct and its speedup "
           "over the reference, timed the same way, is at least p).", ""]
    if not rows:
        return out + ["(no scored instance)", ""]
    heads = [f"p={p:g}" for p in HEADLINE_P]

    def cell(row, p):
        value = row["values"][f"{p:g}"]
        bound = row["lower_bound_above_p"]
        return f">={value:.3f}" if bound is not None and p > bound else f"{value:.3f}"

    out.append(_table(["M", "A", "k", "category", "tasks", *heads],
                      [(r["fixer"], r["protocol"], r["k"], r["category"], r["tasks"], *(cell(r, p) for p in HEADLINE_P))
                       for r in rows]))
    if any(r["lower_bound_above_p"] is not None for r in rows):
        out += ["", "`>=`: above the protocol's own p, an attempt stopped at its first pass at that p, so later "
                "rounds that might pass the higher gate were not run: a lower bound."]
    return out + [""]


def _reproduction_markdown(summary: dict[str, Any]) -> list[str]:
    repro = summary.get("reproduction") or {}
    if not repro.get("validated"):
        return []
    c = repro["counts"]
    out = ["## Reproduction", "",
           f"{repro['scored_tasks']} instances scored ({repro['scored']}); "
           f"{repro['not_reproduced_tasks']} not reproduced here"
           + (" (scored anyway: --all)" if repro["scored"] == "all" else " (excluded from pass@k)") + ".", ""]
    out.append(_table(["labelled category", "reproduced", "not reproduced", "untested", "corpus defect"],
                      [(cat, v["reproduced"], v["not_reproduced"], v["untested"], v["corpus_defect"])
                       for cat, v in c["by_category"].items()]))
    if repro["excluded"]:
        out += ["", _table(["task", "label", "status", "why"],
                           [(e["task_id"], e["labelled_category"], e["status"], (e["why"] or "")[:200])
                            for e in repro["excluded"]])]
    return out + [""]


def _reuse_markdown(summary: dict[str, Any]) -> list[str]:
    reuse = summary.get("reuse") or {}
    if not reuse.get("rounds"):
        return []
    taken = reuse.get("reused") or {}
    parts = [f"{n} from the {'reproduction' if src == 'reproduction' else 'same file earlier in this run'}"
             for src, n in taken.items()]
    text = (f"{sum(taken.values())} of {reuse['rounds']} attempt rounds took a recorded run's outcome instead of "
            f"running ({', '.join(parts) or 'none'}): the same file, instance, toolchain, device, options and "
            "attempt code; a test's outcome stands for one attempt only. Column `reused` of the task table.")
    if reuse.get("enabled") is False:
        text = f"Reuse off (--no-reuse): all {reuse['rounds']} attempt rounds ran."
    out = ["## Reused runs", "", text]
    if reuse.get("refused"):
        out += ["", _table(["task", "reproduction not reused because"],
                           [(k, v[:200]) for k, v in sorted(reuse["refused"].items())])]
    return out + [""]


def html_report(report_markdown: str) -> str:
    """A self-contained page (opens offline): the markdown report's headings, text and tables."""
    body: list[str] = []
    in_table = False
    for line in report_markdown.splitlines():
        is_row = line.startswith("| ")
        if in_table and not is_row:
            body.append("</table>")
            in_table = False
        if line.startswith("|---"):
            continue
        if is_row:
            cells = [html.escape(c.strip().replace("\\|", "|")) for c in line.strip().strip("|").split(" | ")]
            tag = "td" if in_table else "th"
            if not in_table:
                body.append("<table>")
                in_table = True
            body.append("<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>")
        elif line.startswith("## "):
            body.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("# "):
            body.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.strip():
            body.append(f"<p>{html.escape(line)}</p>")
    if in_table:
        body.append("</table>")
    style = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Hercules debug</title><style>{style}"
            f"</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
