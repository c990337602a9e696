"""Tables of a ``hercules debug run`` with the replay, null and degenerate fixers (the H200 check).

    python benchmarks/debug_tables.py RUN_DIR [RUN_DIR ...] OUT_DIR

Reads every ``result.json`` under each RUN_DIR/attempts (so a run cut short still gives its tables;
several runs, e.g. one per GPU lane over different families, give one table) and writes
OUT_DIR/debug_h200_tables.md and .json; prints the headline lines.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hercules.debug.classifier import LABEL_OF
from hercules.debug.gate import GateResult


def load_rounds(*run_dirs: Path) -> dict[str, dict[str, dict]]:
    """{fixer: {task_id: last round of sample 0}} over every run given."""
    out: dict[str, dict[str, dict]] = {}
    for path in sorted(p for run_dir in run_dirs for p in run_dir.glob("attempts/*/*/*/s0/i*/result.json")):
        rec = json.loads(path.read_text())
        prev = out.setdefault(rec["fixer"], {}).get(rec["task_id"])
        if prev is None or rec["round"] > prev["round"]:
            out[rec["fixer"]][rec["task_id"]] = rec
    return out


def _passes(rec: dict, p: float) -> bool:
    return GateResult(**rec["gate"]).passes(p)


def _row(cells) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def tables(rounds: dict[str, dict[str, dict]]) -> tuple[str, dict]:
    md: list[str] = []
    facts: dict = {}
    replay = rounds.get("replay", {})
    if replay:
        ok = [t for t, r in replay.items() if _passes(r, 0.0)]
        facts["replay"] = {"tasks": len(replay), "passed_p0": len(ok),
                           "failed": {t: f"{r['category']}/{r['subtype']}: {r['reason'][:200]}"
                                      for t, r in replay.items() if not _passes(r, 0.0)}}
        md += [f"## replay: {len(ok)}/{len(replay)} pass at p=0", "",
               _row(["task", "passed p=0", "category", "speedup", "timed by", "why (if failed)"]),
               "|---|---|---|---|---|---|"]
        md += [_row([t, _passes(r, 0.0), r["category"], _fmt(r["gate"]["speedup"]), r["gate"]["method"],
                     "" if _passes(r, 0.0) else r["reason"][:160]]) for t, r in sorted(replay.items())]
    null = rounds.get("null", {})
    if null:
        agree = [t for t, r in null.items() if LABEL_OF.get(r["category"]) == r["labelled"]]
        passed = [t for t, r in null.items() if _passes(r, 0.7)]
        facts["null"] = {"tasks": len(null), "label_agreement": len(agree) / len(null), "passed_p0.7": passed}
        md += ["", (f"## null: agreement {len(agree)}/{len(null)} = {len(agree) / len(null):.1%}; "
                    f"passed at p=0.7: {len(passed)}"), "",
               _row(["task", "label", "classified", "subtype", "agrees", "passed", "evidence"]),
               "|---|---|---|---|---|---|---|"]
        md += [_row([t, r["labelled"], r["category"], r["subtype"], t in agree, _passes(r, 0.7), r["reason"][:140]])
               for t, r in sorted(null.items())]
    degen = rounds.get("degenerate", {})
    if degen:
        correct = {t: r for t, r in degen.items() if r["correct"]}
        rejected = [t for t, r in correct.items() if not _passes(r, 0.7)]
        accepted0 = [t for t, r in correct.items() if _passes(r, 0.0)]
        facts["degenerate"] = {"tasks": len(degen), "correct": len(correct), "accepted_p0": len(accepted0),
                               "rejected_p0.7": len(rejected)}
        md += ["", (f"## degenerate: correct {len(correct)}/{len(degen)}; of those accepted at p=0: "
                    f"{len(accepted0)}, rejected at p=0.7: {len(rejected)}"), "",
               _row(["task", "correct", "speedup", "timed by", "accepted p=0", "rejected p=0.7", "signs", "category"]),
               "|---|---|---|---|---|---|---|---|"]
        md += [_row([t, r["correct"], _fmt(r["gate"]["speedup"]), r["gate"]["method"], _passes(r, 0.0),
                     not _passes(r, 0.7), ",".join(r["degeneration"]) or "-", r["category"]])
               for t, r in sorted(degen.items())]
    return "\n".join(md) + "\n", facts


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def main() -> int:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    run_dirs, out_dir = [Path(a) for a in sys.argv[1:-1]], Path(sys.argv[-1])
    md, facts = tables(load_rounds(*run_dirs))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "debug_h200_tables.md").write_text(md)
    (out_dir / "debug_h200_tables.json").write_text(json.dumps(facts, indent=1))
    for line in md.splitlines():
        if line.startswith("## "):
            print(line[3:])
    for t, why in (facts.get("replay", {}).get("failed") or {}).items():
        print(f"  replay failed: {t}: {why[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
