"""Per-region ablation of the decode templates of issue 16 on one GPU: token selection (the two-stage
argmax), split-K GEMV shapes (one launch or two; inside a block for the CUDA GEMV) and
programmatic dependent launch (PDL on / off), each against the PyTorch fallback and the variant
without the new parameter, at a preset's real shapes.

    python benchmarks/decode_templates.py [--preset llama-3.2-1b] [--batch 1] [--regions ...] [--out FILE]
    python benchmarks/decode_templates.py --step [--preset llama-3.2-1b] [--out FILE]   # whole step

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

TOGGLES = [dict(KSPLIT=k, PDL=d) for k in (1, 2, 4) for d in (0, 1)]  # the CUDA GEMV's new parameters


def _spec(name: str, dtype: str) -> ModelSpec:
    p = get_preset(name)
    return ModelSpec(p.arch, p.hidden_size, p.intermediate_size, p.num_hidden_layers, p.num_attention_heads,
                     p.num_key_value_heads, p.head_dim, p.vocab_size, p.rms_norm_eps, p.tie_word_embeddings, dtype,
                     p.arch == "qwen3")


def _triton_gemv(region) -> list[dict]:
    block_n = 32 if region.kind == "gate_up_silu_mul" else 64  # the up rows double the tile
    base = dict(MODE="reduce" if region.batch == 1 else "dot", BLOCK_N=block_n, BLOCK_K=256, num_warps=4)
    return [dict(base, SPLIT_K=1, SPLIT_REDUCE="none", PDL=d) for d in (0, 1)] + [
        dict(base, SPLIT_K=8, SPLIT_REDUCE=r, PDL=d) for r in ("kernel", "last") for d in (0, 1)]


# the CUDA GEMV points the H200 plans chose (benchmarks/results), with every (KSPLIT, PDL) twin
CUDA_BASE = {"o_proj": dict(WARPS=4, ROWS=1, UNROLL=2), "down_proj": dict(WARPS=4, ROWS=1, UNROLL=2),
             "qkv_proj": dict(WARPS=4, ROWS=1, UNROLL=4), "lm_head": dict(WARPS=4, ROWS=4, UNROLL=4),
             "gate_up_silu_mul": dict(WARPS=4, ROWS=1, UNROLL=4)}


def candidates(kind: str, region) -> list[tuple[str, dict, tuple]]:
    """(template, params, fuses) to measure in ``region`` (the fallback first)."""
    out: list[tuple[str, dict, tuple]] = [(fallback_spec(region).template, {}, ())]
    if kind == "token_select":
        for chunk, block in ((1024, 1024), (512, 512), (2048, 1024)):
            for one in (1, 0):
                for pdl in (0, 1):
                    p = dict(CHUNK=chunk, BLOCK=block, num_warps=4, ONE_LAUNCH=one, PDL=pdl)
                    out.append(("triton_argmax", p, ()))
        return out
    base = CUDA_BASE.get(kind, {})
    if kind in ("o_proj", "down_proj", "qkv_proj", "lm_head"):
        out += [("cuda_gemv", dict(base, **t), ()) for t in TOGGLES]
    if kind == "gate_up_silu_mul":
        out += [("cuda_gemv_swiglu", dict(base, **t), ()) for t in TOGGLES]
    if kind in ("o_proj", "down_proj", "qkv_proj"):
        out += [("triton_gemv", p, ()) for p in _triton_gemv(region)]
    if kind == "qkv_proj":  # the residual add + RMSNorm folded in
        out += [("cuda_norm_gemv", dict(base, **t), ("residual_rmsnorm",)) for t in TOGGLES]
        out += [("triton_norm_gemv", dict(BLOCK_N=16, BLOCK_K=128, num_warps=4, PDL=d), ("residual_rmsnorm",))
                for d in (0, 1)]
    return out


def build(items: list[tuple[object, str, dict, tuple]], dev_info) -> list[tuple[object, str, dict, tuple, object]]:
    """Build every feasible (region, template, params, fuses): each CUDA template's points of every
    region in one module (one nvcc run), the templates in parallel; a rejection or a failed build
    is returned in place of the candidate."""
    from concurrent.futures import ThreadPoolExecutor

    by_template: dict[tuple[str, str], list[int]] = {}
    results: list[object] = [None] * len(items)
    for i, (r, name, p, _) in enumerate(items):
        t = find_template(name, r)
        reasons = constraint_check(t, p, r, dev_info)
        if reasons:
            results[i] = ValueError("rejected: " + "; ".join(reasons))
        else:  # a name can mean one template per region kind ("torch"): group by both but for CUDA
            by_template.setdefault((name, "*" if hasattr(t, "materialise_items") else r.kind), []).append(i)

    def build_one(key: tuple[str, str]) -> None:
        idx = by_template[key]
        t = find_template(key[0], items[idx[0]][0])
        pts = [(items[i][2], items[i][0]) for i in idx]
        built = t.materialise_items(pts) if hasattr(t, "materialise_items") else [
            _try(t.materialise, p, r) for p, r in pts]
        for i, c in zip(idx, built):
            results[i] = c

    with ThreadPoolExecutor(max_workers=4) as ex:
        list(ex.map(build_one, by_template))
    return [(*it, c) for it, c in zip(items, results)]


def _try(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # a build failure is a result
        return e


def measure(built, weights, device, n_sets_of) -> list[dict]:
    rows = []
    for region, name, p, fuses, c in built:
        row = dict(region=region.kind, template=name, params=p, fuses=list(fuses))
        if isinstance(c, Exception):
            status = "rejected" if str(c).startswith("rejected") else "build_error"
            rows.append(dict(row, status=status, reason=str(c)[-800:]))
            continue
        ok, err, msg = check(c.fn, region, weights, fused=fuses, trials=2, seed=17)
        if not ok:
            rows.append(dict(row, status="invalid", reason=msg, max_abs_err=err))
            continue
        args = [make_args(region, weights, fused=fuses, seed=1, trial=0, layer=i) for i in range(n_sets_of(region))]
        try:
            tm = time_region(c.fn, args, device=device, budget_s=0.2)
        except Exception as e:  # a launch that fails (or cannot be captured) is a result
            rows.append(dict(row, status="error", reason=f"{type(e).__name__}: {str(e)[:300]}"))
            continue
        rows.append(dict(row, status="ok", us=round(tm.median_ms * 1e3, 2), max_abs_err=err))
        print(f"{region.kind:18} {c.spec.id[:86]:86} {rows[-1]['us']:9.2f} us", file=sys.stderr, flush=True)
    return rows


def _ids(template: str, **params) -> str:
    from hercules.compile.templates.base import CandidateSpec, params_key

    return CandidateSpec(template, "", "", params_key(params)).id


# Llama-3.2-1B batch 1 as the H200 plan chose it before issue 16 (benchmarks/results), pinned so the
# step is compared with one thing changed at a time
INCUMBENT = {
    "residual_rmsnorm": _ids("triton_add_rmsnorm", BLOCK=2048, num_warps=8),
    "final_norm": _ids("triton_add_rmsnorm", BLOCK=2048, num_warps=4),
    "qkv_proj": _ids("cuda_norm_gemv", WARPS=4, ROWS=1, UNROLL=4, KSPLIT=1, PDL=0),
    "rotary": _ids("triton_rotary_flash_decode", BLOCK_N=32, SPLITS=8, num_warps=4, HAS_NORM=0),
    "o_proj": _ids("cuda_gemv", WARPS=4, ROWS=1, UNROLL=2, KSPLIT=1, PDL=0),
    "gate_up_silu_mul": _ids("cuda_gemv_swiglu", WARPS=4, ROWS=1, UNROLL=4, KSPLIT=1, PDL=0),
    "down_proj": _ids("cuda_gemv", WARPS=4, ROWS=1, UNROLL=2, KSPLIT=1, PDL=0),
    "lm_head": _ids("cuda_gemv", WARPS=4, ROWS=4, UNROLL=4, KSPLIT=1, PDL=0),
}
ARGMAX = {"token_select": _ids("triton_argmax", CHUNK=1024, BLOCK=1024, num_warps=4, ONE_LAUNCH=0, PDL=0)}
SPLIT = {"down_proj": _ids("cuda_gemv", WARPS=4, ROWS=1, UNROLL=2, KSPLIT=2, PDL=0),
         "gate_up_silu_mul": _ids("cuda_gemv_swiglu", WARPS=4, ROWS=1, UNROLL=4, KSPLIT=4, PDL=0)}
PDL = {"o_proj": _ids("cuda_gemv", WARPS=4, ROWS=1, UNROLL=2, KSPLIT=1, PDL=1),
       "down_proj": _ids("cuda_gemv", WARPS=4, ROWS=1, UNROLL=2, KSPLIT=2, PDL=1),
       "qkv_proj": _ids("cuda_norm_gemv", WARPS=4, ROWS=1, UNROLL=4, KSPLIT=1, PDL=1),
       "token_select": _ids("triton_argmax", CHUNK=1024, BLOCK=1024, num_warps=4, ONE_LAUNCH=0, PDL=1)}
STEP_PLANS = {"incumbent": INCUMBENT, "+argmax": {**INCUMBENT, **ARGMAX},
              "+argmax+split-K": {**INCUMBENT, **ARGMAX, **SPLIT},
              "+argmax+split-K+PDL": {**INCUMBENT, **ARGMAX, **SPLIT, **PDL}}


def step_ablation(preset: str, batch: int, new_tokens: int = 128) -> list[dict]:
    """The whole graphed decode step (the plan's step check) and decode tokens/s for each plan of
    STEP_PLANS: the incumbent, then the issue-16 templates added one kind at a time."""
    import tempfile
    import time

    from hercules.compile import build_model, compile_model

    m = build_model(preset, dtype="bf16", device="cuda", seed=1)
    ids = torch.randint(0, 1000, (batch, 32), generator=torch.Generator().manual_seed(0)).cuda()
    rows, first = [], None
    for label, force in STEP_PLANS.items():
        with tempfile.TemporaryDirectory() as cache:
            dec = compile_model(m, force=force, budget=0, cache_dir=cache, batch_size=batch, max_seq_len=256)
            dec.generate(ids, new_tokens)  # capture and warm up
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = dec.generate(ids, new_tokens)
            torch.cuda.synchronize()
            secs = time.perf_counter() - t0
        first = out if first is None else first
        plan = dec.plan.implementations()
        rows.append(dict(plan=label, step_ms=dec.plan.step_check.get("plan_ms"),
                         tok_s=round(batch * new_tokens / secs, 1),
                         same_tokens_as_incumbent=bool(torch.equal(out, first)),
                         pinned_ok=all(plan[k] == v for k, v in force.items())))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="llama-3.2-1b")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--regions", default="token_select,o_proj,down_proj,qkv_proj,gate_up_silu_mul,lm_head")
    ap.add_argument("--out", default="decode_templates.json")
    ap.add_argument("--step", action="store_true", help="the whole-step ablation (STEP_PLANS) instead")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks/decode_templates.py measures GPU kernels; no CUDA device is present")
    if a.step:
        rows = step_ablation(a.preset, a.batch)
        Path(a.out).write_text(json.dumps({"preset": a.preset, "batch": a.batch, "step": rows}, indent=1))
        return
    device = torch.device("cuda")
    dev_info = DeviceInfo.detect(device)
    spec = _spec(a.preset, a.dtype)
    regions = derive_regions(spec, batch=a.batch, capacity=256)
    # random weights, one set per layer (the timing walks through 8 distinct layers: L2 stays cold)
    weights = RegionWeights(None, spec, device=device, seed=1)
    items = [(regions[kind], *c) for kind in a.regions.split(",") for c in candidates(kind, regions[kind])]
    built = build(items, dev_info)
    # eight arg sets a graph replay, as selection times (one set: the replay's own launch cost
    # would dominate a few-microsecond kernel); the lm_head's 0.5 GB weight: two
    rows = measure(built, weights, device, lambda r: 2 if r.kind == "lm_head" else min(8, spec.layers))
    Path(a.out).write_text(json.dumps({"preset": a.preset, "batch": a.batch, "dtype": a.dtype,
                                       "device": dev_info.name, "rows": rows}, indent=1))
    print(f"{'region':18} {'candidate':90} {'us':>9}  status")
    for r in rows:
        ident = f"{r['template']}[{','.join(f'{k}={v}' for k, v in sorted(r['params'].items()))}]"
        us = f"{r['us']:.2f}" if r.get("us") is not None else "-"
        print(f"{r['region']:18} {ident[:90]:90} {us:>9}  {r['status']} {r.get('reason', '')[:80]}")


if __name__ == "__main__":
    main()
