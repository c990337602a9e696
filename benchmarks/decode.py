"""Decode speed of the three presets: HF eager, HF static cache + torch.compile, Hercules; the
fidelity gate; and long-context rows.

    python benchmarks/decode.py [--models llama-3.2-1b,qwen3-1.7b,qwen3-4b] [--batches 1,8]
                                [--new-tokens 128] [--prompt-len 32] [--positions 1024,4096]
                                [--no-fidelity] [--ablation qwen3-1.7b] [--out FILE]
    python benchmarks/decode.py --device cpu --dtype float32 --models tiny-llama --batches 1   # smoke run

bf16 random weights from the published configs, greedy decoding, tokens/s aggregate over the batch
(prefill included, after warm-up), and the fraction of the weights-read roofline (bf16 weight bytes
read once per decode step over the H200's measured 4.24 TB/s copy rate).

Fidelity (on by default): teacher-forced next-token distributions of Hercules and of HF's own
model in the same dtype, each scored by the mean KL against a float32 copy of the model on the
prompt plus the copy's greedy tokens; the gate passes when kl_hercules <= kl_hf_same_dtype (plus
a 1e-9-nat float-noise floor; see hercules/compile/fidelity.py).

Long-context rows (--positions; default 1024,4096 on CUDA, none on the CPU): per position P and
batch, a random prompt of P tokens, then the decode steps alone are timed (a generate of 1 + m
tokens minus one of 1 token) for Hercules (compiled for that cache capacity) and HF eager, against
a roofline that counts the KV-cache bytes read (layers x 2 x kv_heads x head_dim x entries x dtype
bytes x batch, at the mean entries of the timed steps) besides the weights. HF static + compile is
not timed there (its static cache is sized per generate call, recompiled per length).

After each row, the step's budget by region (kernels a step, time, bytes, bandwidth, share of
the kernel time) and the sum of kernel times against the step's wall time (``bench.region_budget``;
the row's "budget" in the JSON).

Prints the table and the long-context table; writes every row (with the chosen plan and the
fidelity record) as JSON to --out, rewritten after each model: every model (and the ablation)
runs in a process of its own, so one that faults or is cut off loses only itself.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch

from hercules.compile.bench import ablation, budget_table, decode_row, long_context_row
from hercules.compile.presets import build_model

COLUMNS = ("model", "batch", "eager_tok_s", "static_compile_tok_s", "hercules_tok_s", "roofline_tok_s",
           "hercules_roofline_fraction", "speedup_vs_static_compile", "token_agreement",
           "static_compile_token_agreement", "teacher_forced_agreement", "max_logit_diff", "kl_hercules",
           "kl_hf_same_dtype", "fidelity_passed", "compile_s", "compile_again_s")
# decode steps alone behind a cache of ``position`` tokens; the roofline counts the KV bytes read
LONG_COLUMNS = ("model", "batch", "position", "eager_tok_s", "hercules_tok_s", "roofline_kv_tok_s",
                "hercules_roofline_kv_fraction", "kv_share", "speedup_vs_eager", "kl_hercules", "kl_hf_same_dtype",
                "fidelity_passed", "compile_s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="llama-3.2-1b,qwen3-1.7b,qwen3-4b")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--positions", default=None,
                        help="long-context rows: cache positions, comma-separated (default 1024,4096 on CUDA, "
                             "none on the CPU; '' for none)")
    parser.add_argument("--fidelity", action=argparse.BooleanOptionalAction, default=True,
                        help="the fidelity gate in every row (a float32 copy of the model while it runs)")
    parser.add_argument("--ablation", default=None, help="Preset for the rules-vs-no-advisor ablation.")
    parser.add_argument("--budget", type=int, default=48, help="Measurement budget of the ablation.")
    parser.add_argument("--out", default="decode_results.json")
    parser.add_argument("--device", default="cuda", help="cpu: a smoke run of the script on tiny presets")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--job", default=None, help=argparse.SUPPRESS)  # one model or the ablation, in a child
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("benchmarks/decode.py measures GPU decoding; no CUDA device is present")
    if args.positions is None:
        args.positions = "1024,4096" if args.device == "cuda" else ""
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
               "--budget", str(args.budget), "--device", args.device, "--dtype", args.dtype,
               "--positions", args.positions, "--fidelity" if args.fidelity else "--no-fidelity"]
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
    _table(COLUMNS, [r for r in result["rows"] if r.get("row") != "long_context"])
    long_rows = [r for r in result["rows"] if r.get("row") == "long_context"]
    if long_rows:
        print()
        _table(LONG_COLUMNS, long_rows)


def _table(columns, rows) -> None:
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(_cell(row.get(c)) for c in columns) + " |")


def _child(args) -> None:
    kind, name = args.job.split(":", 1)
    model = build_model(name, dtype=args.dtype, device=args.device)
    result: dict = {"rows": []}
    if kind == "ablation":
        result["ablation"] = ablation(model, budget=args.budget)
        print(json.dumps(result["ablation"]["summary"], indent=1), flush=True)
    else:
        batches = [int(b) for b in args.batches.split(",")]
        # the usual rows first (a run cut off keeps them), then the long-context ones
        jobs = [(b, None) for b in batches] + [(b, int(p)) for p in args.positions.split(",") if p for b in batches]
        for batch, position in jobs:
            if position is None:
                row = decode_row(model, batch=batch, prompt_len=args.prompt_len, new_tokens=args.new_tokens,
                                 fidelity=args.fidelity)
            else:
                row = long_context_row(model, position=position, batch=batch, new_tokens=args.new_tokens,
                                       fidelity=args.fidelity)
            row["model"] = name
            result["rows"].append(row)
            print(" | ".join(_cell(row.get(c)) for c in (COLUMNS if position is None else LONG_COLUMNS)), flush=True)
            for region, r in row["regions"].items():
                print(f"    {region:18} x{r['x_per_token']:<3} {_ms(r['chosen_ms'])} ms (fallback "
                      f"{_ms(r['fallback_ms'])})  {r['why'][:90]}", flush=True)
            print(budget_table(row["budget"]), flush=True)
            Path(args.out).write_text(json.dumps(result, indent=1, default=str))  # rows so far
    Path(args.out).write_text(json.dumps(result, indent=1, default=str))


def _ms(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def _cell(value) -> str:
    if isinstance(value, float) and 0 < abs(value) < 1e-2:  # the KLs: 1e-12 (fp32) to 1e-2 (bf16)
        return f"{value:.2e}"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 10 else f"{value:.0f}"
    return "-" if value is None else str(value)


if __name__ == "__main__":
    main()
