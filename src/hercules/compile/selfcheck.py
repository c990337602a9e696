"""Check template kernels against the PyTorch references on small shapes, without a model.

    TRITON_INTERPRET=1 python -m hercules.compile.selfcheck --lang triton --device cpu --dtype float32
    python -m hercules.compile.selfcheck --lang cuda --device cuda --dtype bfloat16      # on a GPU

Prints one JSON object: per (arch, batch, template, params) whether it built and matched.
For each template it takes up to ``--per-template`` points that pass the constraints, spread over
the space (first, last and evenly between), plus, for rotary, both the plain and fused variants.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from .constraints import DeviceInfo, check as constraint_check
from .regions import ModelSpec, derive_regions
from .templates import ALL_TEMPLATES
from .validate import RegionWeights, check

TINY_SPECS = {
    # head_dim 64 so the CUDA rotary (head_dim % 64) and the Triton dot (>= 16) both apply;
    # GQA group 4 and 2; odd-ish hidden sizes to exercise masks
    "llama": dict(arch="llama", hidden=192, intermediate=320, layers=2, heads=4, kv_heads=1, head_dim=64, vocab=300,
                  eps=1e-5, tied=False, qk_norm=False),
    "qwen3": dict(arch="qwen3", hidden=256, intermediate=384, layers=2, heads=4, kv_heads=2, head_dim=64, vocab=300,
                  eps=1e-6, tied=True, qk_norm=True),
}


def spread(items: list, k: int) -> list:
    if len(items) <= k:
        return items
    if k <= 1:
        return items[:1]
    idx = sorted({round(i * (len(items) - 1) / (k - 1)) for i in range(k)})
    return [items[i] for i in idx]


def _points(t, region, dev, per_template: int) -> list[dict]:
    space = [p for p in t.space(region) if not constraint_check(t, p, region, dev)]
    chosen = spread(space, per_template)
    # make sure the structurally different variants run: plain and fused rotary,
    # both GEMV modes with and without split-K
    groups = {}
    for p in space:
        key = (p.get("HAS_NORM"), p.get("MODE"), p.get("SPLIT_K", 1) > 1, p.get("SPLITS", 1) > 1)
        groups.setdefault(key, p)
    return chosen + [p for p in groups.values() if p not in chosen]


def _build(t, items: list[tuple[dict, object]]) -> list:
    """Every point of one template, for every shape, in one build where the template allows it:
    a CUDA template compiles them as one module (one nvcc run, ~40 s on 8 cores, instead of one
    per region and batch: 2 archs x 3 batches x regions made the CUDA self-check run past 10 min)."""
    if hasattr(t, "materialise_items"):
        return t.materialise_items(items)
    out = []
    for p, region in items:
        try:
            out.append(t.materialise(p, region))
        except Exception as e:  # noqa: BLE001 -- reported per point
            out.append(e)
    return out


def run(lang: str, device: str, dtype: str, per_template: int, batches=(1, 2), capacity: int = 48,
        templates: tuple[str, ...] = (), kinds: tuple[str, ...] = (), trials: int = 2,
        build_threads: int = 4) -> dict:
    from concurrent.futures import ThreadPoolExecutor

    dev = DeviceInfo.detect(device)
    results = []
    jobs: dict[str, list[tuple[dict, object, dict]]] = {}  # template -> (params, region, row) in order
    weights_for = {}
    for arch, kw in TINY_SPECS.items():
        spec = ModelSpec(dtype=dtype, **kw)
        weights_for[arch] = RegionWeights(None, spec, device=device, seed=1)
        for batch in batches:
            regions = derive_regions(spec, batch=batch, capacity=capacity)
            for t in ALL_TEMPLATES:
                if t.lang != lang or (templates and t.name not in templates):
                    continue
                for region in regions.values():
                    if not t.applies(region) or (kinds and region.kind not in kinds):
                        continue
                    chosen = _points(t, region, dev, per_template)
                    if not chosen:
                        results.append(dict(arch=arch, batch=batch, region=region.kind, template=t.name,
                                            params=None, ok=None, error="no point passes the constraints"))
                    for p in chosen:
                        row = dict(arch=arch, batch=batch, region=region.kind, template=t.name, params=p)
                        jobs.setdefault(t.name, []).append((p, region, row))
    by_name = {t.name: t for t in ALL_TEMPLATES}
    print(f"selfcheck: {sum(map(len, jobs.values()))} points of {len(jobs)} templates, building", file=sys.stderr)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, build_threads)) as ex:
        built = dict(zip(jobs, ex.map(lambda n: _build(by_name[n], [(p, r) for p, r, _ in jobs[n]]), jobs)))
    print(f"selfcheck: built in {time.perf_counter() - t0:.1f} s, checking", file=sys.stderr)
    for name, items in jobs.items():
        failures = 0
        for (p, region, row), cand in zip(items, built[name]):
            if isinstance(cand, Exception):
                row.update(ok=False, error=f"build: {cand}")
            else:
                t1 = time.perf_counter()
                ok, err, msg = check(cand.fn, region, weights_for[row["arch"]], fused=tuple(cand.spec.fuses),
                                     trials=trials)
                row.update(ok=ok, max_abs_err=err, error=msg or None, seconds=round(time.perf_counter() - t1, 3))
            failures += row["ok"] is False
            results.append(row)
        print(f"selfcheck: {name}: {len(items) - failures}/{len(items)} ok", file=sys.stderr)
    failed = [r for r in results if r["ok"] is False]
    return {"lang": lang, "device": device, "dtype": dtype, "checked": sum(r["ok"] is not None for r in results),
            "failed": len(failed), "results": results}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lang", default="triton", choices=["triton", "cuda", "torch"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--per-template", type=int, default=2)
    ap.add_argument("--batches", default="1,2")
    ap.add_argument("--templates", default="", help="comma-separated template names (default: all)")
    ap.add_argument("--regions", default="", help="comma-separated region kinds (default: all)")
    ap.add_argument("--trials", type=int, default=2)
    a = ap.parse_args(argv)
    torch.manual_seed(0)
    out = run(a.lang, a.device, a.dtype, a.per_template, tuple(int(b) for b in a.batches.split(",")),
              templates=tuple(t for t in a.templates.split(",") if t),
              kinds=tuple(k for k in a.regions.split(",") if k), trials=a.trials)
    print(json.dumps(out, default=str))
    return 0 if out["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
