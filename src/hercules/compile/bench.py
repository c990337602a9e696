"""Measurement helpers for ``benchmarks/decode.py`` (the lead's script): HF eager, HF static cache +
torch.compile, Hercules, the weights-read roofline, and the advisor ablation.

Tokens/s here are *aggregate* (batch * new tokens / seconds of one ``generate`` call, prefill
included), measured after warm-up calls (graph capture, torch.compile and Triton JIT happen
there).
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch

from .regions import model_spec, roofline_tok_s

H200_COPY_BW = 4.24e12  # DESIGN.md: measured device copy rate, bytes/s


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


def decode_row(model, *, batch: int = 1, prompt_len: int = 32, new_tokens: int = 128, bandwidth: float = H200_COPY_BW,
               baselines: tuple[str, ...] = ("eager", "static_compile"), compile_kwargs: dict | None = None,
               seed: int = 0, warmup: int = 1, reps: int = 3) -> dict[str, Any]:
    """One row of the decode table for ``model`` (already on its device, in its dtype)."""
    from .api import compile_model

    dev = next(model.parameters()).device
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (batch, prompt_len), generator=g).to(dev)
    row: dict[str, Any] = {"batch": batch, "prompt_len": prompt_len, "new_tokens": new_tokens}
    spec = model_spec(model)
    row["roofline_tok_s"] = roofline_tok_s(spec, bandwidth) * batch  # weights read once per step
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
    row["plan"] = dec.plan.implementations()
    # Where a step's time goes: per region, calls per token and the chosen / fallback times as
    # measured in isolation (their weighted sum against the step check shows the launch gaps).
    row["regions"] = {k: {"x_per_token": d.count_per_token, "chosen_ms": d.chosen_ms, "fallback_ms": d.fallback_ms,
                          "why": d.why} for k, d in dec.plan.decisions.items()}
    row["step_check"] = dec.plan.step_check
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
