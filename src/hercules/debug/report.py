"""Summary (JSON), markdown and HTML reports of a debug run."""

from __future__ import annotations

import html
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from hercules.debug.classifier import LABEL_OF
from hercules.debug.gate import P_SWEEP
from hercules.debug.metrics import PassAtK, breakdown, mean_pass_at_k
from hercules.debug.runner import Trajectory


def _task_entry(group: list[Trajectory]) -> dict[str, Any]:
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
    }


def summarise(trajectories: Sequence[Trajectory], corpus: str, ks: Sequence[int] = (1,)) -> dict[str, Any]:
    groups: dict[tuple[str, str, str], list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        groups[(t.fixer, t.protocol.describe(), t.instance.task_id)].append(t)
    tasks = [_task_entry(g) for g in groups.values()]
    by_arm: dict[tuple[str, str], list[list[Trajectory]]] = defaultdict(list)
    for (fixer, proto, _), g in groups.items():
        by_arm[(fixer, proto)].append(g)
    metrics: list[dict[str, Any]] = []
    arms: list[dict[str, Any]] = []
    for (fixer, proto), task_groups in sorted(by_arm.items()):
        entries = [e for e in tasks if e["fixer"] == fixer and e["protocol"] == proto]
        for k in ks:
            if any(len(g) < k for g in task_groups):
                continue
            for p in P_SWEEP:
                value = mean_pass_at_k([(len(g), sum(t.passes(p) for t in g)) for g in task_groups], k)
                m = PassAtK(k, fixer, corpus, proto, p, value, len(task_groups))
                metrics.append({"label": m.label, "k": k, "fixer": fixer, "corpus": corpus, "protocol": proto,
                                "p": p, "value": value, "tasks": m.tasks})
        labelled = [e for e in entries if e["classified_label"] is not None or e["labelled_category"]]
        agree = sum(e["classified_label"] == e["labelled_category"] for e in labelled)
        arms.append({
            "fixer": fixer, "protocol": proto, "tasks": len(entries),
            "passed": sum(e["passed"] for e in entries),
            "label_agreement": agree / len(labelled) if labelled else None,
            "by_labelled_category": breakdown((e["labelled_category"], e["passed"]) for e in entries),
            "by_family": breakdown((e["family"], e["passed"]) for e in entries),
            "classified": dict(Counter(e["classified_category"] for e in entries)),
            "stagnation": dict(Counter(m for e in entries for m in e["stagnation"])),
            "degeneration": dict(Counter(d.split(":")[0] for e in entries for d in e["degeneration"])),
        })
    return {"corpus": corpus, "arms": arms, "pass_at_k": metrics, "tasks": tasks}


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
    out += ["## pass@k sweep", ""]
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
    out.append(_table(["fixer", "task", "label", "classified", "subtype", "passed", "speedup", "degeneration", "why"],
                      [(t["fixer"], t["task_id"], t["labelled_category"], t["classified_category"], t["subtype"],
                        t["passed"], t["speedup"] if t["speedup"] is not None else "-",
                        ",".join(t["degeneration"]) or "-", t["reason"][:160]) for t in summary["tasks"]]))
    return "\n".join(out) + "\n"


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
