"""Measurement helpers for ``benchmarks/decode.py`` (the lead's script): HF eager, HF static cache +
torch.compile, Hercules, the weights-read roofline, the fidelity gate, the long-context rows, and
the advisor ablation.

Tokens/s in ``decode_row`` are *aggregate* (batch * new tokens / seconds of one ``generate`` call,
prefill included), measured after warm-up calls (graph capture, torch.compile and Triton JIT
happen there). ``long_context_row`` times the decode steps alone, behind a prompt of ``position``
tokens: the difference of a ``generate`` of 1 + m tokens and one of 1 token (both include the
same prompt pass), so the prompt pass of thousands of tokens does not enter the step rate.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch

from .fidelity import measure_fidelity, release
from .regions import ModelSpec, Region, derive_regions, dtype_from_name, model_spec, roofline_tok_s, weight_bytes


def roofline_bandwidth(device) -> float:
    """The copy rate (bytes read + written per second) the weights-read roofline assumes: this
    device's own, measured now. A fixed H200 figure (4.24e12, docs/design.md) put an H100's
    Llama-3.2-1B row at 0.508 of a roofline its 3.35 TB/s HBM cannot reach."""
    from hercules.harness.roofline import copy_rate

    return copy_rate(torch.device(device))


def _roofline_into(row: dict[str, Any], spec: ModelSpec, bandwidth: float | None, batch: int, device) -> float:
    """The weights-read roofline into ``row`` at ``bandwidth`` (None: the device's, measured now);
    returns the bandwidth used."""
    bandwidth = bandwidth or roofline_bandwidth(device)
    row["roofline_bandwidth_gbs"] = bandwidth / 1e9  # said in every row: the rooflines below divide by it
    row["roofline_tok_s"] = roofline_tok_s(spec, bandwidth) * batch  # weights read once per step
    return bandwidth


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_generate(fn: Callable[[], Any], device, warmup: int = 1, reps: int = 3) -> float:
    """Median seconds of ``fn()`` after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    _sync(device)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def step_tok_s(run: Callable[[int], Any], device, batch: int, steps: int, warmup: int = 1, reps: int = 3) -> float:
    """Aggregate tokens/s of ``steps`` decode steps: ``run(n)`` generates n tokens after the same
    prompt; (time of run(1 + steps) - time of run(1)) is the steps alone."""
    long = time_generate(lambda: run(1 + steps), device, warmup, reps)
    short = time_generate(lambda: run(1), device, warmup, reps)
    return batch * steps / max(long - short, 1e-9)


def kv_bytes_per_position(spec: ModelSpec, batch: int) -> int:
    """KV-cache bytes one decode step reads per cached position: K and V of every layer."""
    es = torch.empty((), dtype=dtype_from_name(spec.dtype)).element_size()
    return spec.layers * 2 * spec.kv_heads * spec.head_dim * es * batch


def kv_roofline(spec: ModelSpec, bandwidth: float, batch: int, position: int, steps: int) -> dict[str, float]:
    """The roofline of ``steps`` decode steps behind a cache of ``position`` tokens, counting the
    weights (read once per step) and the KV cache read: step i (1..steps) attends over position + i
    entries, so the mean step reads position + (steps + 1) / 2 of them."""
    mean_len = position + (steps + 1) / 2
    kv = kv_bytes_per_position(spec, batch) * mean_len
    w = weight_bytes(spec)
    return {"weight_bytes": w, "kv_bytes_per_step": kv, "kv_share": kv / (w + kv),
            "roofline_kv_tok_s": batch * bandwidth / (w + kv)}


def hf_eager(model, ids, new_tokens: int):
    return model.generate(ids, max_new_tokens=new_tokens, do_sample=False)


def hf_static_compile(model, ids, new_tokens: int):
    """HF with a static KV cache; transformers 5.x compiles the decoding forward itself for a
    static cache on CUDA (CompileConfig: inductor, mode reduce-overhead, fullgraph)."""
    from transformers import CompileConfig

    return model.generate(ids, max_new_tokens=new_tokens, do_sample=False, cache_implementation="static",
                          compile_config=CompileConfig(fullgraph=True, mode="reduce-overhead"))


def agreement(out: torch.Tensor, reference: torch.Tensor, prompt_len: int) -> float:
    """Fraction of generated positions where ``out`` has the same token as ``reference``."""
    n = min(out.shape[1], reference.shape[1])
    return float((out[:, prompt_len:n] == reference[:, prompt_len:n]).float().mean())


def decode_row(model, *, batch: int = 1, prompt_len: int = 32, new_tokens: int = 128, bandwidth: float | None = None,
               baselines: tuple[str, ...] = ("eager", "static_compile"), compile_kwargs: dict | None = None,
               seed: int = 0, warmup: int = 1, reps: int = 3, fidelity: bool = True) -> dict[str, Any]:
    """One row of the decode table for ``model`` (already on its device, in its dtype); with
    ``fidelity`` also the fidelity gate (``fidelity.measure_fidelity``) over the same prompt."""
    from .api import compile_model

    dev = next(model.parameters()).device
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (batch, prompt_len), generator=g).to(dev)
    row: dict[str, Any] = {"row": "prompt", "batch": batch, "prompt_len": prompt_len, "position": prompt_len,
                           "new_tokens": new_tokens, "timing": "generate (prompt pass included)"}
    spec = model_spec(model)
    bandwidth = _roofline_into(row, spec, bandwidth, batch, dev)
    row.update(kv_roofline(spec, bandwidth, batch, prompt_len, new_tokens - 1))  # its new_tokens - 1 decode steps
    eager_out = None
    if "eager" in baselines:
        s = time_generate(lambda: hf_eager(model, ids, new_tokens), dev, warmup, reps)
        row["eager_tok_s"] = batch * new_tokens / s
        eager = model.generate(ids, max_new_tokens=new_tokens, do_sample=False, output_logits=True,
                               return_dict_in_generate=True)
        eager_out, eager_logits = eager.sequences, torch.stack(eager.logits).float()  # [n, B, V]
    if "static_compile" in baselines:  # before compile_model re-points the q/k/v, gate/up weights
        s = time_generate(lambda: hf_static_compile(model, ids, new_tokens), dev, max(warmup, 2), reps)
        row["static_compile_tok_s"] = batch * new_tokens / s
        if eager_out is not None:  # the control: how far greedy paths part with no Hercules involved
            row["static_compile_token_agreement"] = agreement(hf_static_compile(model, ids, new_tokens), eager_out,
                                                              prompt_len)
    t0 = time.perf_counter()
    dec = compile_model(model, batch_size=batch, max_seq_len=prompt_len + new_tokens, **(compile_kwargs or {}))
    row["compile_s"] = time.perf_counter() - t0
    row["cache_hit"] = dec.plan.cache_hit
    s = time_generate(lambda: dec.generate(ids, new_tokens), dev, warmup, reps)
    row["hercules_tok_s"] = batch * new_tokens / s
    row["hercules_roofline_fraction"] = row["hercules_tok_s"] / row["roofline_tok_s"]
    _plan_into(row, dec)
    if eager_out is not None:
        ours = dec.generate(ids, new_tokens)
        row["token_agreement"] = agreement(ours, eager_out, prompt_len)
        # Free-running greedy paths part at the first near-tie (random weights give many), after which
        # agreement says nothing about numerics; on eager's own tokens every step sees the same
        # context, so this counts the steps whose argmax differs.
        forced = eager_out[:, prompt_len:]
        _, logits = dec.generate(ids, new_tokens, forced=forced, return_logits=True)
        row["teacher_forced_agreement"] = float((logits.argmax(-1).T.to(forced.device) == forced).float().mean())
        # the same contexts on both sides: per step, the largest logit difference from HF eager
        steps = min(len(logits), len(eager_logits))
        per_step = (logits[:steps].to(eager_logits.device) - eager_logits[:steps]).abs().amax(dim=(1, 2))
        row["max_logit_diff"] = float(per_step.max())
        row["median_step_max_logit_diff"] = float(per_step.median())
    if fidelity:
        _fidelity_into(row, model, dec, ids, new_tokens)
    # A second compile of the same model: the decision cache and the built modules are found.
    t0 = time.perf_counter()
    again = compile_model(model, batch_size=batch, max_seq_len=prompt_len + new_tokens, **(compile_kwargs or {}))
    row["compile_again_s"] = time.perf_counter() - t0
    row["compile_again_cache_hit"] = again.plan.cache_hit
    del again
    if "static_compile_tok_s" in row:
        row["speedup_vs_static_compile"] = row["hercules_tok_s"] / row["static_compile_tok_s"]
    if "eager_tok_s" in row:
        row["speedup_vs_eager"] = row["hercules_tok_s"] / row["eager_tok_s"]
    return row


def _plan_into(row: dict[str, Any], dec) -> None:
    row["plan"] = dec.plan.implementations()
    # Where a step's time goes: per region, calls per token and the chosen / fallback times as
    # measured in isolation (their weighted sum against the step check shows the launch gaps).
    # (with the fused candidates' own times, chosen or not: what each fusion cost where it lost)
    row["regions"] = {k: {"x_per_token": d.count_per_token, "chosen_ms": d.chosen_ms, "fallback_ms": d.fallback_ms,
                          "why": d.why, "fused_tried": [[t.id, t.status, t.median_ms] for t in d.tried if t.fuses]}
                      for k, d in dec.plan.decisions.items()}
    row["step_check"] = dec.plan.step_check
    row["budget"] = region_budget(dec.plan, derive_regions(dec.runtime.spec, batch=dec.plan.batch,
                                                           capacity=dec.plan.capacity))


def region_budget(plan, regions: dict[str, Region]) -> dict[str, Any]:
    """The step's budget by region, from the plan: per region the kernels it launches a step
    (``calls``: a region whose work runs inside another's kernel has none; the norm kernel loses
    the calls projections took into their own), the time they take (calls x the chosen candidate's
    time, measured alone in a graph over distinct layers' weights), the bytes they move (a fused
    candidate's own plus those of the regions it does; attention at the full cache capacity), the
    bandwidth that makes, and the share of the step; then the sum of those kernel times against the
    step's wall time as the step check measured it (the whole graphed step), the difference being
    the launch gaps and whatever isolated timing misses."""
    decisions = plan.decisions
    calls = {n: 0 if d.fused_into else d.count_per_token for n, d in decisions.items()}
    for n, d in decisions.items():
        if "residual_rmsnorm" in d.fuses and n in regions and "residual_rmsnorm" in calls and not d.fused_into:
            # down_proj's last call applies the final norm (its own region), not a layer's input norm
            took = d.count_per_token - (1 if regions[n].kind == "down_proj" else 0)
            calls["residual_rmsnorm"] = max(0, calls["residual_rmsnorm"] - took)
    rows: dict[str, dict[str, Any]] = {}
    for n, d in decisions.items():
        if n not in regions or not calls[n] or d.chosen_ms is None:
            continue
        nbytes = regions[n].bytes + sum(regions[k].bytes for k in d.fuses if k in regions)
        ms = calls[n] * d.chosen_ms
        rows[n] = {"implementation": d.implementation, "calls": calls[n], "ms": ms, "bytes": calls[n] * nbytes,
                   "gb_s": calls[n] * nbytes / (ms * 1e6) if ms > 0 else None}
    kernel_ms = sum(r["ms"] for r in rows.values())
    check = plan.step_check or {}
    wall = check.get("plan_ms") if check.get("kept", True) else check.get("fallback_ms")
    for r in rows.values():
        r["share"] = r["ms"] / kernel_ms if kernel_ms > 0 else None
        r["share_of_wall"] = r["ms"] / wall if wall else None
    return {"regions": rows, "kernels_per_step": sum(r["calls"] for r in rows.values()), "kernel_ms": kernel_ms,
            "bytes": sum(r["bytes"] for r in rows.values()), "step_wall_ms": wall,
            "launch_gap_ms": wall - kernel_ms if wall is not None else None,
            "kernel_fraction_of_wall": kernel_ms / wall if wall else None}


def budget_table(budget: dict[str, Any]) -> str:
    """``region_budget`` as text: one line per region, then the step's totals."""
    lines = [f"    {'region':18} {'calls':>7} {'us/step':>9} {'MB/step':>9} {'GB/s':>7} {'share':>6}  implementation"]
    for n, r in sorted(budget["regions"].items(), key=lambda kv: -kv[1]["ms"]):
        bw = f"{r['gb_s']:.0f}" if r["gb_s"] is not None else "-"
        lines.append(f"    {n:18} {r['calls']:7d} {r['ms'] * 1e3:9.1f} {r['bytes'] / 1e6:9.2f} {bw:>7} "
                     f"{r['share']:6.1%}  {r['implementation'][:60]}")
    wall = budget["step_wall_ms"]
    # a call is one kernel for the Triton / CUDA candidates; a PyTorch one may launch several
    lines.append(f"    step: {budget['kernels_per_step']} region calls, {budget['kernel_ms'] * 1e3:.1f} us of kernel time, "
                 f"{budget['bytes'] / 1e6:.1f} MB; wall " + (
                     f"{wall * 1e3:.1f} us (kernels {budget['kernel_fraction_of_wall']:.1%} of it, launch gaps "
                     f"{budget['launch_gap_ms'] * 1e3:.1f} us)" if wall is not None else "not measured"))
    return "\n".join(lines)


def _fidelity_into(row: dict[str, Any], model, dec, ids, new_tokens: int) -> None:
    f = measure_fidelity(model, dec, ids, new_tokens)
    row["kl_hercules"], row["kl_hf_same_dtype"], row["fidelity_passed"] = f.kl_hercules, f.kl_hf_same_dtype, f.passed
    row["fidelity"] = f.to_json()


def long_context_row(model, *, position: int, batch: int = 1, new_tokens: int = 128,
                     bandwidth: float | None = None,
                     baselines: tuple[str, ...] = ("eager",), compile_kwargs: dict | None = None, seed: int = 0,
                     warmup: int = 1, reps: int = 3, fidelity: bool = True) -> dict[str, Any]:
    """Decode steps behind a KV cache already holding ``position`` tokens (a random prompt of that
    length): Hercules (compiled for that capacity) and HF eager step rates, the roofline with the
    KV-cache bytes read, and (``fidelity``) the gate at that context length.

    HF static cache + torch.compile is not timed here: its static cache is sized per ``generate``
    call (prompt + max_new_tokens), so the two calls of the step-rate difference would run two
    cache shapes, and each new length recompiles (about a minute per position and batch)."""
    from .api import compile_model

    release(next(model.parameters()).device)  # the previous row's caches and graphs
    dev = next(model.parameters()).device
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (batch, position), generator=g).to(dev)
    spec = model_spec(model)
    row: dict[str, Any] = {"row": "long_context", "batch": batch, "prompt_len": position, "position": position,
                           "new_tokens": new_tokens, "timing": "decode steps (generate 1 + m minus generate 1)"}
    bandwidth = _roofline_into(row, spec, bandwidth, batch, dev)
    row.update(kv_roofline(spec, bandwidth, batch, position, new_tokens))
    if "eager" in baselines:
        row["eager_tok_s"] = step_tok_s(
            lambda n: model.generate(ids, max_new_tokens=n, do_sample=False), dev, batch, new_tokens, warmup, reps)
    row["static_compile_note"] = "not timed: a static cache per generate length, recompiled per position"
    t0 = time.perf_counter()
    # + 1: the fidelity pass decodes one step past the timed ones (the prediction after the last token)
    dec = compile_model(model, batch_size=batch, max_seq_len=position + new_tokens + 1, **(compile_kwargs or {}))
    row["compile_s"] = time.perf_counter() - t0
    row["capacity"] = dec.plan.capacity
    row["hercules_tok_s"] = step_tok_s(lambda n: dec.generate(ids, n), dev, batch, new_tokens, warmup, reps)
    row["hercules_roofline_kv_fraction"] = row["hercules_tok_s"] / row["roofline_kv_tok_s"]
    row["hercules_roofline_fraction"] = row["hercules_tok_s"] / row["roofline_tok_s"]
    if "eager_tok_s" in row:
        row["speedup_vs_eager"] = row["hercules_tok_s"] / row["eager_tok_s"]
    _plan_into(row, dec)
    if fidelity:
        _fidelity_into(row, model, dec, ids, new_tokens)
    return row


def measurements_to_reach(trace: list[dict[str, Any]], target_ms: float, tol: float = 0.05) -> int | None:
    for t in trace:
        if t["step_estimate_ms"] <= target_ms * (1 + tol):
            return int(t["measurements"])
    return None


def ablation(model, *, budget: int = 48, seeds: tuple[int, ...] = (0, 1, 2), batch: int = 1, max_seq_len: int = 160,
             advisors: tuple[str, ...] = ("rules", "none"), tol: float = 0.05, **compile_kwargs) -> dict[str, Any]:
    """Rule-based advisor vs. no advisor (seeded random order) under the same measurement budget.

    For each run: the decode-step estimate after each measurement (sum over regions of calls per
    token x best time so far, from ``Plan.trace``), the final estimate, the measured step time
    (the plan's step check), and how many measurements it took to get within ``tol`` of (a) its
    own final estimate and (b) the best final estimate of all runs."""
    from .api import compile_model

    runs = []
    for a in advisors:
        for s in (seeds if a == "none" else seeds[:1]):  # the rules advisor is deterministic
            dec = compile_model(model, advisor=a, budget=budget, seed=s, use_cache=False, batch_size=batch,
                                max_seq_len=max_seq_len, **compile_kwargs)
            p = dec.plan
            runs.append({"advisor": a, "seed": s, "trace": [(t["measurements"], t["step_estimate_ms"]) for t in p.trace],
                         "final_estimate_ms": p.trace[-1]["step_estimate_ms"], "step_check": p.step_check,
                         "measurements": p.measurements, "_trace": p.trace})
    best = min(r["final_estimate_ms"] for r in runs)
    for r in runs:
        r["to_own_final"] = measurements_to_reach(r["_trace"], r["final_estimate_ms"], tol)
        r["to_best_final"] = measurements_to_reach(r["_trace"], best, tol)
        del r["_trace"]
    summary = {}
    for a in advisors:
        rs = [r for r in runs if r["advisor"] == a]
        reach = [r["to_best_final"] for r in rs]
        summary[a] = {"runs": len(rs), "final_estimate_ms": statistics.median(r["final_estimate_ms"] for r in rs),
                      "to_best_final": reach,
                      "reached": sum(x is not None for x in reach)}
    return {"budget": budget, "tolerance": tol, "best_final_estimate_ms": best, "summary": summary, "runs": runs}
