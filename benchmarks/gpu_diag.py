"""Prints the verdicts of named GPU harness cases in full (status, cause, error, notes, build log
tail): for diagnosing a failing GPU test inside one short call."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "harness"))

import test_harness_gpu as cases  # noqa: E402

from hercules.harness.evaluate import EvalOptions, evaluate  # noqa: E402
from hercules.problems.loaders import load_source  # noqa: E402
from hercules.problems.model import Candidate  # noqa: E402


def main() -> None:
    root = Path(tempfile.mkdtemp())
    path = root / "tanh_mul.py"
    path.write_text(cases.ELEMENTWISE)
    problem = load_source(path).problems[0]
    conv_path = root / "conv.py"
    conv_path.write_text(cases.CONV_FP32)
    conv = load_source(conv_path).problems[0]
    runs = {
        "cuda_honest": (problem, cases.cuda_candidate("gpu_diag_honest", 0)),
        "conv_strict": (conv, Candidate("conv", cases.CONV_AS_CANDIDATE, "test")),
    }
    for name in sys.argv[1:] or runs:
        prob, cand = runs[name]
        verdict = evaluate(prob, cand, EvalOptions(device="cuda", cache_dir=root / "cache", baselines=("eager",),
                                                   artifacts_dir=root / name))
        data = verdict.to_json()
        print(f"== {name}: {data['status']} cause={data['cause']} flags={data['flags']}", flush=True)
        print("error:", (data["error"] or "")[:1500], flush=True)
        print("notes:", json.dumps(data["notes"])[:1500], flush=True)
        print("phases:", data["phases"], flush=True)
        print("build log tail:", ((data.get("build") or {}).get("log") or "")[-1500:], flush=True)
        print("timing:", data.get("timing"), flush=True)


if __name__ == "__main__":
    main()
