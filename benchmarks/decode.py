"""Decode speed of the three presets: HF eager, HF static cache + torch.compile, Hercules.

    python benchmarks/decode.py [--models llama-3.2-1b,qwen3-1.7b,qwen3-4b] [--batches 1,8]
                                [--new-tokens 128] [--prompt-len 32] [--ablation qwen3-1.7b] [--out FILE]
    python benchmarks/decode.py --device cpu --dtype float32 --models tiny-llama --batches 1   # smoke run

bf16 random weights from the published configs, greedy decoding, tokens/s aggregate over the batch
(prefill included, after warm-up), and the fraction of the weights-read roofline (bf16 weight bytes
read once per decode step over the H200's measured 4.24 TB/s copy rate). Prints one table; writes
every row (with the chosen plan) as JSON to --out, rewritten after each model: every model (and the
ablation) runs in a process of its own, so one that faults or is cut off loses only itself.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch

from hercules.compile.bench import ablation, decode_row
from hercules.compile.presets import build_model

COLUMNS = ("model", "batch", "eager_tok_s", "static_compile_tok_s", "hercules_tok_s", "roofline_tok_s",
           "hercules_roofline_fraction", "speedup_vs_static_compile", "token_agreement",
           "static_compile_token_agreement", "teacher_forced_agreement", "max_logit_diff", "compile_s", "compile_again_s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="llama-3.2-1b,qwen3-1.7b,qwen3-4b")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--ablation", default=None, help="Preset for the rules-vs-no-advisor ablation.")
    parser.add_argument("--budget", type=int, default=48, help="Measurement budget of the ablation.")
    parser.add_argument("--out", default="decode_results.json")
    parser.add_argument("--device", default="cuda", help="cpu: a smoke run of the script on tiny presets")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--job", default=None, help=argparse.SUPPRESS)  # one model or the ablation, in a child
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("benchmarks/decode.py measures GPU decoding; no CUDA device is present")
    if args.job:
        _child(args)
        return

    # Each model (and the ablation) in a process of its own: a kernel that faults leaves a sticky
    # CUDA error behind, which would end every later measurement of a shared process; the results
    # file is rewritten after each job, so a cut-off run keeps what it finished.
    result: dict = {"rows": [], "failed": []}
    # The ablation first: it is one result, the table rows are many (a cut-off run keeps whichever finished).
    jobs = ([f"ablation:{args.ablation}"] if args.ablation else []) + [
        f"model:{name}" for name in args.models.split(",") if name]
    out = Path(args.out)
    for job in jobs:
        # The child's rows land beside --out as it goes and are merged when it ends; a run cut off
        # from outside (a time limit on the whole script) still leaves the part file behind.
        part = out.with_name(f"{out.stem}.{job.replace(':', '-')}.part.json")
        part.unlink(missing_ok=True)
        cmd = [sys.executable, __file__, "--job", job, "--out", str(part), "--batches", args.batches,
               "--new-tokens", str(args.new_tokens), "--prompt-len", str(args.prompt_len),
               "--budget", str(args.budget), "--device", args.device, "--dtype", args.dtype]
        code = subprocess.run(cmd).returncode
        got = json.loads(part.read_text()) if part.exists() else {}
        result["rows"] += got.get("rows", [])  # a job that died keeps the rows it finished
        if "ablation" in got:
            result["ablation"] = got["ablation"]
        if code != 0:
            result["failed"].append({"job": job, "exit_status": code})
            print(f"{job}: failed (exit status {code})", flush=True)
        out.write_text(json.dumps(result, indent=1, default=str))
        part.unlink(missing_ok=True)
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in result["rows"]:
        print("| " + " | ".join(_cell(row.get(c)) for c in COLUMNS) + " |")


def _child(args) -> None:
    kind, name = args.job.split(":", 1)
    model = build_model(name, dtype=args.dtype, device=args.device)
    result: dict = {"rows": []}
    if kind == "ablation":
        result["ablation"] = ablation(model, budget=args.budget)
        print(json.dumps(result["ablation"]["summary"], indent=1), flush=True)
    else:
        for batch in (int(b) for b in args.batches.split(",")):
            row = decode_row(model, batch=batch, prompt_len=args.prompt_len, new_tokens=args.new_tokens)
            row["model"] = name
            result["rows"].append(row)
            print(" | ".join(_cell(row.get(c)) for c in COLUMNS), flush=True)
            for region, r in row["regions"].items():
                print(f"    {region:18} x{r['x_per_token']:<3} {_ms(r['chosen_ms'])} ms (fallback "
                      f"{_ms(r['fallback_ms'])})  {r['why'][:90]}", flush=True)
            Path(args.out).write_text(json.dumps(result, indent=1, default=str))  # rows so far
    Path(args.out).write_text(json.dumps(result, indent=1, default=str))


def _ms(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if value < 10 else f"{value:.0f}"
    return "-" if value is None else str(value)


if __name__ == "__main__":
    main()
