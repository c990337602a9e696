"""Issue classes of honest real-world code and of later-call / one-distribution exploits: each
exploit beside its honest control, through `hercules eval --json` as a user runs it, one table.

    python benchmarks/redteam_classes.py --device cpu > benchmarks/results/cpu_redteam_classes.md
    python benchmarks/redteam_classes.py --device cuda --all --out $OUT/redteam   # + every red-team and corpus case
    python benchmarks/redteam_classes.py --device cuda --all --bench-jobs 4 --run-dir runs/redteam  # in one bench

``--bench-jobs N`` lays the cases out as problems and candidate folders and runs them through one
``hercules bench`` with N evaluations in flight (the same options; measurements still take the
device one at a time, the core's exclusive section), resumable with the same ``--run-dir``.

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
import shutil
import signal
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


# Red-team candidates written for another problem than the matmul (their docstrings say which).
PROBLEM_OF = {"honest_slow_on_new_values.py": ADV / "problems" / "scale_add.py"}


def every_case() -> list[tuple[str, Path, Path, bool]]:
    """The red team's candidates and the adversarial corpus, as (class, problem, candidate, hostile)."""
    listed = {Path(case[2]).name for case in CASES if not isinstance(case[2], str)}
    cases = []
    for path in sorted(RED.glob("*.py")):
        if path.name.startswith("problem_") or path.name in PROCESS_ATTACKS or path.name in listed:
            continue
        problem = PROBLEM_OF.get(path.name, RED / "problem_matmul.py")
        cases.append(("red team", problem, path, not path.name.startswith("honest")))
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
    parser.add_argument("--bench-jobs", type=int, default=0,
                        help="run the cases through one `hercules bench` with this many evaluations in flight")
    parser.add_argument("--run-dir", type=Path, default=Path("runs/redteam-classes"),
                        help="the bench's run folder (with --bench-jobs; rerun to resume)")
    args = parser.parse_args()
    work = Path("/tmp/redteam-classes")
    work.mkdir(exist_ok=True)
    (work / "guarded_fallback.py").write_text(GUARDED)
    cases = [(name, problem, work / "guarded_fallback.py" if candidate == "guarded_fallback" else candidate, hostile)
             for name, problem, candidate, hostile in CASES + (every_case() if args.all else [])]
    cases = [case for case in cases if args.filter in case[2].name]
    how = (f"`hercules bench --device {args.device} --eval-jobs {args.bench_jobs}`" if args.bench_jobs
           else f"`hercules eval --device {args.device} --json`")
    print(f"# Exploit classes and their honest controls, {how}\n")
    print("| class | candidate | hostile | status | flags | vs eager | as promised | s |")
    print("|---|---|---|---|---|---:|---|---:|", flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    verdicts = (through_bench(cases, args.device, args.bench_jobs, args.run_dir, work) if args.bench_jobs
                else one_by_one(cases, args.device, work))
    passed = 0
    for (name, problem, path, hostile), verdict, seconds in verdicts:
        if verdict is None:
            print(f"| {name} | {path.name} | {'yes' if hostile else 'no'} | no verdict ({seconds}) | | | no | |", flush=True)
            continue
        eager = (verdict.get("speedup") or {}).get("eager")
        if args.out:
            (args.out / f"{problem.stem}--{path.stem}.json").write_text(json.dumps(verdict, indent=1))
        passed += judged(verdict, hostile)
        print(f"| {name} | {path.name} | {'yes' if hostile else 'no'} | {verdict['status']} | "
              f"{', '.join(verdict.get('flags') or [])} | {'' if eager is None else f'{eager:.2f}x'} | "
              f"{'yes' if judged(verdict, hostile) else 'NO'} | {seconds:.0f} |", flush=True)
    print(f"\n{passed} of {len(cases)} as promised", flush=True)


EVAL_OPTIONS = ["--trials", "3", "--budget", "0.1", "--baselines", "eager"]


def one_by_one(cases, device: str, work: Path):
    """Each case through its own `hercules eval --json`, as a user runs it; yields (case, verdict, seconds)."""
    for case in cases:
        _name, problem, path, _hostile = case
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "hercules.cli", "eval", "--problem", str(problem), "--candidate",
                               str(path), "--device", device, "--json", *EVAL_OPTIONS,
                               "--cache-dir", str(work / "cache")], capture_output=True, text=True, cwd=ROOT)
        try:
            yield case, json.loads(done.stdout), time.monotonic() - started
        except json.JSONDecodeError:
            yield case, None, f"exit {done.returncode}"


def _as_interrupt(*_) -> None:
    raise KeyboardInterrupt


def through_bench(cases, device: str, jobs: int, run_dir: Path, work: Path):
    """Every case in one `hercules bench`: problems as files of one folder, each problem's candidates in
    a folder named after it (a name taken twice gets its source folder's name in front)."""
    tree = work / "bench"
    problems, candidates = tree / "problems", tree / "candidates"
    for folder in (problems, candidates):
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
    names = []
    for _name, problem, path, _hostile in cases:
        (problems / problem.name).write_text(problem.read_text())
        folder = candidates / problem.stem
        folder.mkdir(exist_ok=True)
        stem = path.stem if not (folder / path.name).exists() else f"{path.parent.name}_{path.stem}"
        (folder / f"{stem}.py").write_text(path.read_text())
        names.append((problem.stem, stem))
    command = [sys.executable, "-m", "hercules.cli", "bench", str(problems), "--candidates", str(candidates),
               "--device", device, *EVAL_OPTIONS, "--eval-jobs", str(jobs), "--run-dir", str(run_dir)]
    print(f"<!-- {' '.join(command[1:])} -->", flush=True)
    started = time.monotonic()
    bench = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=sys.stderr)
    # A SIGTERM (a call's time limit) stops the bench as SIGINT does: it keeps what finished, and
    # the rows of what finished are printed before this ends.
    signal.signal(signal.SIGTERM, _as_interrupt)
    by_key = {key: case for key, case in zip(names, cases)}
    shown: set = set()
    read: set[Path] = set()  # verdict files already taken (each is read once, not every look)

    def finished():
        """Each case whose verdict the bench has written and that is not printed yet."""
        for file in sorted(set(run_dir.rglob("verdict.json")) - read):
            try:
                verdict = json.loads(file.read_text())
            except (OSError, json.JSONDecodeError):  # being written: the next look takes it
                continue
            read.add(file)
            key = (verdict.get("problem"), verdict.get("candidate"))
            if key in by_key and key not in shown:
                shown.add(key)
                yield by_key[key], verdict, verdict.get("seconds", 0.0)

    try:
        while bench.poll() is None:  # rows as they finish: a call cut off still shows them
            yield from finished()
            time.sleep(5)
    except KeyboardInterrupt:  # stopped from outside: the bench stops too, keeping what finished
        bench.send_signal(signal.SIGINT)
        bench.wait()
    yield from finished()
    print(f"<!-- bench exit {bench.returncode} after {time.monotonic() - started:.0f} s -->", flush=True)
    for key, case in by_key.items():
        if key not in shown:
            yield case, None, f"not finished (bench exit {bench.returncode})"


if __name__ == "__main__":
    main()
