"""Issue classes of honest real-world code and of later-call / one-distribution exploits: each
exploit beside its honest control, through `hercules eval --json` as a user runs it, one table.

    python benchmarks/redteam_classes.py --device cpu > benchmarks/results/cpu_redteam_classes.md
    python benchmarks/redteam_classes.py --device cuda --all --out $OUT/redteam   # + every red-team and corpus case

``--all`` adds every candidate of tests/redteam (hostile unless its name starts with ``honest``)
against its matmul problem and every entry of the adversarial corpus (tests/adversarial/
manifest.json), except those that attack the process running the command or take minutes by
design (``PROCESS_ATTACKS``: tests/harness/test_redteam.py runs them with their own checks).

Rows print as they finish. A hostile row passes when caught (status not ok, or a flag) or not
reported faster than 1.5x eager; an honest row when ok with no flag.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RED = ROOT / "tests" / "redteam"
ADV = ROOT / "tests" / "adversarial"
GUARDED = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        try:  # the guarded-fallback pattern of most LLM-written kernels; the fast path works
            x = a
            for _ in range(4):
                x = torch.tanh(torch.mm(x, b))
            return x
        except Exception:
            return torch.tanh(a @ b)
'''

# (class, problem, candidate, hostile)
CASES = [
    ("honest code tripping the harness", RED / "problem_matmul.py", "guarded_fallback", False),
    ("behave, then recycle one output buffer", RED / "problem_matmul.py", RED / "kept_output_buffer.py", True),
    ("behave, then recycle one output buffer", RED / "problem_matmul.py", RED / "honest_copied_buffer.py", False),
    ("behave, then write inputs seen again", RED / "problem_matmul.py", RED / "mutate_seen_input.py", True),
    ("behave, then write inputs seen again", RED / "problem_matmul.py", RED / "honest_seen_input.py", False),
    ("behave, then drop to fp16", RED / "problem_matmul.py", RED / "half_after_trials.py", True),
    ("behave, then drop to fp16", RED / "problem_matmul.py", RED / "honest.py", False),
    ("one input distribution", ADV / "problems" / "softmax_rows.py", ADV / "exploits" / "softmax_no_max.py", True),
    ("one input distribution", ADV / "problems" / "softmax_rows.py", ADV / "honest" / "softmax_rows_max.py", False),
    ("parameters at their defaults", ADV / "problems" / "layernorm_rows.py", ADV / "exploits" / "layernorm_copy.py",
     True),
    ("parameters at their defaults", ADV / "problems" / "layernorm_rows.py",
     ADV / "honest" / "layernorm_rows_twopass.py", False),
]


# Attacks on the process that runs the command, or on the host (their checks need more than the
# verdict: tests/harness/test_redteam.py), and the hang (50 s by design).
PROCESS_ATTACKS = {"kill_parent.py", "detached_forger.py", "load_left_behind.py", "poison_files.py",
                   "fork_bomb.py", "memory_bomb.py", "hang.py"}


def every_case() -> list[tuple[str, Path, Path, bool]]:
    """The red team's candidates and the adversarial corpus, as (class, problem, candidate, hostile)."""
    listed = {Path(case[2]).name for case in CASES if not isinstance(case[2], str)}
    cases = []
    for path in sorted(RED.glob("*.py")):
        if path.name.startswith("problem_") or path.name in PROCESS_ATTACKS or path.name in listed:
            continue
        cases.append(("red team", RED / "problem_matmul.py", path, not path.name.startswith("honest")))
    manifest = json.loads((ADV / "manifest.json").read_text())
    for relative, entry in sorted(manifest.items()):
        cases.append((f"corpus: {entry['threat']}", ADV / "problems" / f"{entry['problem']}.py", ADV / relative,
                      entry["expect"] != "ok"))
    return cases


def judged(verdict: dict, hostile: bool) -> bool:
    eager = (verdict.get("speedup") or {}).get("eager")
    if hostile:
        return verdict["status"] != "ok" or bool(verdict.get("flags")) or (eager is not None and eager <= 1.5)
    return verdict["status"] == "ok" and not verdict.get("flags")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--all", action="store_true", help="also every red-team candidate and corpus entry")
    parser.add_argument("--filter", default="", help="only candidates whose file name contains this text")
    parser.add_argument("--out", type=Path, default=None, help="a folder for each verdict's JSON")
    args = parser.parse_args()
    work = Path("/tmp/redteam-classes")
    work.mkdir(exist_ok=True)
    (work / "guarded_fallback.py").write_text(GUARDED)
    print(f"# Exploit classes and their honest controls, `hercules eval --device {args.device} --json`\n")
    print("| class | candidate | hostile | status | flags | vs eager | as promised | s |")
    print("|---|---|---|---|---|---:|---|---:|", flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    cases = CASES + (every_case() if args.all else [])
    passed = 0
    for name, problem, candidate, hostile in cases:
        path = work / "guarded_fallback.py" if candidate == "guarded_fallback" else candidate
        if args.filter not in path.name:
            continue
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "hercules.cli", "eval", "--problem", str(problem), "--candidate",
                               str(path), "--device", args.device, "--json", "--trials", "3", "--budget", "0.1",
                               "--baselines", "eager", "--cache-dir", str(work / "cache")],
                              capture_output=True, text=True, cwd=ROOT)
        try:
            verdict = json.loads(done.stdout)
        except json.JSONDecodeError:
            print(f"| {name} | {path.name} | {hostile} | no verdict (exit {done.returncode}) | | | no | |", flush=True)
            continue
        eager = (verdict.get("speedup") or {}).get("eager")
        if args.out:
            (args.out / f"{problem.stem}--{path.stem}.json").write_text(json.dumps(verdict, indent=1))
        passed += judged(verdict, hostile)
        print(f"| {name} | {path.name} | {'yes' if hostile else 'no'} | {verdict['status']} | "
              f"{', '.join(verdict.get('flags') or [])} | {'' if eager is None else f'{eager:.2f}x'} | "
              f"{'yes' if judged(verdict, hostile) else 'NO'} | {time.monotonic() - started:.0f} |", flush=True)
    print(f"\n{passed} as promised", flush=True)


if __name__ == "__main__":
    main()
