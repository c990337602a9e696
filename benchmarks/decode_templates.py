"""Per-region ablation of the decode templates of issue 16 on one GPU: token selection (the two-stage
argmax), split-K GEMV shapes (one launch or two; inside a block for the CUDA GEMV) and
programmatic dependent launch (PDL on / off), each against the PyTorch fallback and the variant
without the new parameter, at a preset's real shapes.

    python benchmarks/decode_templates.py [--preset llama-3.2-1b] [--batch 1] [--out FILE]

Every candidate is checked against the PyTorch reference first and timed the way selection times
it (``time_region``: a CUDA graph calling it once per layer's weights, median replay / calls), so
a PDL kernel's predecessor in the measurement is another call of itself: the gain it shows is the
most PDL can give between two such kernels; the decode step (benchmarks/decode.py) is the verdict.
Prints one table; writes the rows as JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from hercules.compile.constraints import DeviceInfo, check as constraint_check
from hercules.compile.presets import get_preset
from hercules.compile.regions import ModelSpec, derive_regions
from hercules.compile.templates import find_template, fallback_spec
from hercules.compile.timing import time_region
from hercules.compile.validate import RegionWeights, check, make_args

TOGGLES = [dict(KSPLIT=k, PDL=d) for k in (1, 2, 4) for d in (0, 1)]


def _spec(name: str, dtype: str) -> ModelSpec:
    p = get_preset(name)
    return ModelSpec(p.arch, p.hidden_size, p.intermediate_size, p.num_hidden_layers, p.num_attention_heads,
                     p.num_key_value_heads, p.head_dim, p.vocab_size, p.rms_norm_eps, p.tie_word_embeddings, dtype,
                     p.arch == "qwen3")


def _triton_gemv(region) -> list[dict]:
    block_n = 32 if region.kind == "gate_up_silu_mul" else 64  # the up rows double the tile
    base = dict(MODE="reduce" if region.batch == 1 else "dot", BLOCK_N=block_n, BLOCK_K=256, num_warps=4)
    pts = [dict(base, SPLIT_K=1, SPLIT_REDUCE="none", PDL=d) for d in (0, 1)]
    return pts + [dict(base, SPLIT_K=s, SPLIT_REDUCE=r, PDL=d)
                  for s in (4, 8) for r in ("kernel", "last") for d in (0, 1)]


def candidates(kind: str, region) -> list[tuple[str, dict, tuple]]:
    """(template, params, fuses) to measure in ``region`` (the fallback first)."""
    out: list[tuple[str, dict, tuple]] = [(fallback_spec(region).template, {}, ())]
    if kind == "token_select":
        for chunk, block in ((1024, 1024), (512, 512), (2048, 1024), (4096, 1024)):
            for one in (1, 0):
                for pdl in (0, 1):
                    p = dict(CHUNK=chunk, BLOCK=block, num_warps=4, ONE_LAUNCH=one, PDL=pdl)
                    out.append(("triton_argmax", p, ()))
        return out
    if kind in ("o_proj", "down_proj", "qkv_proj", "lm_head"):
        rows = 4 if kind == "lm_head" else 1
        out += [("cuda_gemv", dict(WARPS=4, ROWS=rows, UNROLL=u, **t), ()) for u in (2, 4) for t in TOGGLES]
        out += [("triton_gemv", p, ()) for p in _triton_gemv(region)]
    if kind == "gate_up_silu_mul":
        out += [("cuda_gemv_swiglu", dict(WARPS=4, ROWS=1, UNROLL=4, **t), ()) for t in TOGGLES]
        out += [("triton_gemv", p, ()) for p in _triton_gemv(region)]
    if kind == "qkv_proj":  # the residual add + RMSNorm folded in
        out += [("cuda_norm_gemv", dict(WARPS=4, ROWS=1, UNROLL=4, **t), ("residual_rmsnorm",)) for t in TOGGLES]
        out += [("triton_norm_gemv", dict(BLOCK_N=16, BLOCK_K=128, num_warps=4, PDL=d), ("residual_rmsnorm",))
                for d in (0, 1)]
    return out


def measure(region, weights, device, dev_info, items, n_sets: int) -> list[dict]:
    rows = []
    by_template: dict[str, list[tuple[dict, tuple]]] = {}
    for name, p, fuses in items:
        by_template.setdefault(name, []).append((p, fuses))
    for name, pts in by_template.items():
        t = find_template(name, region)
        feasible = [(p, f) for p, f in pts if not constraint_check(t, p, region, dev_info)]
        for p, f in pts:
            if (p, f) not in feasible:
                rows.append(dict(region=region.kind, template=name, params=p, status="rejected",
                                 reason="; ".join(constraint_check(t, p, region, dev_info))))
        built = t.materialise_many([p for p, _ in feasible], region)  # CUDA: one module for the points
        for (p, fuses), c in zip(feasible, built):
            row = dict(region=region.kind, template=name, params=p, fuses=list(fuses))
            if isinstance(c, Exception):
                rows.append(dict(row, status="build_error", reason=str(c)[-800:]))
                continue
            ok, err, msg = check(c.fn, region, weights, fused=fuses, trials=2, seed=17)
            if not ok:
                rows.append(dict(row, status="invalid", reason=msg, max_abs_err=err))
                continue
            args = [make_args(region, weights, fused=fuses, seed=1, trial=0, layer=i) for i in range(n_sets)]
            try:
                tm = time_region(c.fn, args, device=device, budget_s=0.2)
            except Exception as e:  # a launch that fails (or cannot be captured) is a result
                rows.append(dict(row, status="error", reason=f"{type(e).__name__}: {str(e)[:300]}"))
                continue
            rows.append(dict(row, status="ok", us=round(tm.median_ms * 1e3, 2), max_abs_err=err))
            print(f"{region.kind:18} {c.spec.id[:86]:86} {rows[-1]['us']:9.2f} us", file=sys.stderr, flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="llama-3.2-1b")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--regions", default="token_select,o_proj,down_proj,qkv_proj,gate_up_silu_mul,lm_head")
    ap.add_argument("--out", default="decode_templates.json")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks/decode_templates.py measures GPU kernels; no CUDA device is present")
    device = torch.device("cuda")
    dev_info = DeviceInfo.detect(device)
    spec = _spec(a.preset, a.dtype)
    regions = derive_regions(spec, batch=a.batch, capacity=256)
    # random weights, one set per layer (the timing walks through 8 distinct layers: L2 stays cold)
    weights = RegionWeights(None, spec, device=device, seed=1)
    rows = []
    for kind in a.regions.split(","):
        r = regions[kind]
        n_sets = 1 if kind in ("lm_head", "token_select") else min(8, spec.layers)
        rows += measure(r, weights, device, dev_info, candidates(kind, r), n_sets)
    Path(a.out).write_text(json.dumps({"preset": a.preset, "batch": a.batch, "dtype": a.dtype,
                                       "device": dev_info.name, "rows": rows}, indent=1))
    print(f"{'region':18} {'candidate':90} {'us':>9}  status")
    for r in rows:
        ident = f"{r['template']}[{','.join(f'{k}={v}' for k, v in sorted(r['params'].items()))}]"
        us = f"{r['us']:.2f}" if r.get("us") is not None else "-"
        print(f"{r['region']:18} {ident[:90]:90} {us:>9}  {r['status']} {r.get('reason', '')[:80]}")


if __name__ == "__main__":
    main()
