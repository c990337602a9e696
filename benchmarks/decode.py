"""Decode speed of the three presets: HF eager, HF static cache + torch.compile, Hercules.

    python benchmarks/decode.py [--models llama-3.2-1b,qwen3-1.7b,qwen3-4b] [--batches 1,8]
                                [--new-tokens 128] [--prompt-len 32] [--ablation qwen3-1.7b] [--out FILE]

bf16 random weights from the published configs, greedy decoding, tokens/s aggregate over the batch
(prefill included, after warm-up), and the fraction of the weights-read roofline (bf16 weight bytes
read once per decode step over the H200's measured 4.24 TB/s copy rate). Prints one table; writes
every row (with the chosen plan) as JSON to --out.
"""

from __future__ import annotations

import argparse
import json
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
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks/decode.py measures GPU decoding; no CUDA device is present")

    rows = []
    for name in args.models.split(","):
        model = build_model(name, dtype="bfloat16", device="cuda")
        for batch in (int(b) for b in args.batches.split(",")):
            row = decode_row(model, batch=batch, prompt_len=args.prompt_len, new_tokens=args.new_tokens)
            row["model"] = name
            rows.append(row)
            print(" | ".join(_cell(row.get(c)) for c in COLUMNS), flush=True)
            for region, r in row["regions"].items():
                print(f"    {region:18} x{r['x_per_token']:<3} {_ms(r['chosen_ms'])} ms (fallback "
                      f"{_ms(r['fallback_ms'])})  {r['why'][:90]}", flush=True)
        del model
        torch.cuda.empty_cache()
    result = {"rows": rows}
    if args.ablation:
        model = build_model(args.ablation, dtype="bfloat16", device="cuda")
        result["ablation"] = ablation(model, budget=args.budget)
        print(json.dumps(result["ablation"]["summary"], indent=1))
    Path(args.out).write_text(json.dumps(result, indent=1, default=str))
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(_cell(row.get(c)) for c in COLUMNS) + " |")


def _ms(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if value < 10 else f"{value:.0f}"
    return "-" if value is None else str(value)


if __name__ == "__main__":
    main()
