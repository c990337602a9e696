"""``compile_model``: regions -> candidates -> measured selection -> a decode runtime.

    from hercules.compile import compile_model
    dec = compile_model(model, device="cuda", advisor="rules")
    out = dec.generate(input_ids, max_new_tokens=128)          # [B, T + 128], like HF generate
    print(dec.plan.table()); json.dumps(dec.plan.to_json())

Notes
* The model's q/k/v and gate/up weights are re-pointed at views of fused buffers (values
  unchanged, no extra memory; the HF model keeps working).
* Decoding is fixed-length (no EOS stop) and batches share one prompt length.
* Sampling is reproducible for a seed (a torch.Generator on the model's device) but does not draw
  the same random numbers as HF's sampler, so sampled tokens differ from HF's for the same seed.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable

import torch

from .advisor import Advisor, make_advisor
from .constraints import DeviceInfo
from .reference import Sampling
from .regions import config_hash, derive_regions, model_spec
from .runtime import DEFAULT_IMPLS, DecodeRuntime
from .selection import DecisionCache, Plan, SelectionResult, cache_key, load_cached, select
from .validate import RegionWeights

log = logging.getLogger(__name__)

DEFAULT_BUDGET = 48


class CompiledDecoder:
    def __init__(self, model, runtime: DecodeRuntime, *, options: dict[str, Any]):
        self.model = model
        self.runtime = runtime
        self.options = options
        self.plans: dict[int, Plan] = {}
        self._impls: dict[int, tuple[dict[str, Callable], bool]] = {}
        self.batch = options["batch_size"]

    @property
    def plan(self) -> Plan:
        return self.plans[self.batch]

    @property
    def device(self) -> torch.device:
        return self.runtime.device

    # -- compilation for one batch size ------------------------------------------------------

    def _compile_batch(self, batch: int) -> Plan:
        o = self.options
        t0 = time.perf_counter()
        rt = self.runtime
        spec = rt.spec
        capacity = o["capacity"]
        regions = derive_regions(spec, batch=batch, capacity=capacity)
        dev_info = DeviceInfo.detect(rt.device)
        advisor: Advisor = o["advisor"]
        weights = RegionWeights(rt.weights, spec, device=rt.device, seed=o["seed"])
        key = cache_key(config_hash(self.model), dev_info, spec.dtype, batch, capacity,
                        {"advisor": advisor.name, "budget": o["budget"], "languages": list(o["languages"]),
                         "force": o["force"], "seed": o["seed"], "timing": o["timing_method"]})
        cache = DecisionCache(o["cache_dir"]) if o["use_cache"] else None
        result: SelectionResult | None = None
        if rt.exact:
            result = _exact_result(regions, dev_info, batch, capacity, spec)
            self.plans[batch] = result.plan
            self._impls[batch] = ({}, False)
            self._active = None
            result.plan.compile_s = time.perf_counter() - t0
            return result.plan
        if cache is not None:
            hit = cache.get(key)
            if hit is not None:
                result = load_cached(hit, regions, weights)
        if result is None:
            result = select(regions, weights, device=rt.device, device_info=dev_info, advisor=advisor,
                            budget=o["budget"], languages=o["languages"], seed=o["seed"], force=o["force"],
                            timing_budget_s=o["timing_budget_s"], timing_method=o["timing_method"])
            plan = result.plan
            plan.model = {"arch": spec.arch, "config_hash": config_hash(self.model), "dtype": spec.dtype,
                          "layers": spec.layers, "hidden": spec.hidden}
            if o["step_check"]:
                self._step_check(result, batch, capacity)
            plan.cache_key = key
            plan.compile_s = time.perf_counter() - t0
            if cache is not None:
                cache.put(key, plan)
        else:
            result.plan.compile_s = time.perf_counter() - t0
            result.plan.cache_key = key
        self.plans[batch] = result.plan
        self._impls[batch] = (result.impls, result.fused_qk_rotary)
        self._active = None  # the step check may have left other implementations installed
        return result.plan

    def _step_check(self, result: SelectionResult, batch: int, capacity: int) -> None:
        """Time the whole decode step with the plan and with every region on PyTorch; keep the
        plan only if it is faster (per-region wins need not add up, e.g. through launch gaps)."""
        if all(d.lang == "torch" and d.template == "torch" for d in result.plan.decisions.values()):
            result.plan.step_check = {"skipped": "plan is the fallback"}
            return
        plan_ms = self._time_step(result.impls, result.fused_qk_rotary, batch, capacity)
        fb_ms = self._time_step({}, False, batch, capacity)
        keep = plan_ms <= fb_ms
        result.plan.step_check = {"plan_ms": plan_ms, "fallback_ms": fb_ms, "kept": keep}
        if not keep:
            for d in result.plan.decisions.values():
                d.why = f"step check reverted to fallback (plan {plan_ms:.3f} ms/step > fallback {fb_ms:.3f}); was: {d.why}"
                d.implementation, d.template, d.lang, d.params, d.fuses, d.fused_into = "torch", "torch", "torch", {}, [], None
                d.chosen_ms = d.fallback_ms
            result.impls.clear()
            result.fused_qk_rotary = False

    @torch.no_grad()
    def _time_step(self, impls, fused, batch, capacity, steps: int | None = None) -> float:
        rt = self.runtime
        rt.set_impls(impls, fused)
        st = rt.state(batch, capacity)
        st.pos.fill_(capacity // 2)
        st.token.zero_()
        sampling = Sampling()
        try:
            if rt.use_cuda_graph:
                saved = st.pos.clone()
                g = rt._graph(st, sampling, False)
                st.graphs.clear()
                st.pos.copy_(saved)
                n = steps or 20
                g.replay()
                torch.cuda.synchronize(rt.device)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                times = []
                for _ in range(5):
                    st.pos.copy_(saved)
                    start.record()
                    for _ in range(n):
                        g.replay()
                    end.record()
                    torch.cuda.synchronize(rt.device)
                    times.append(start.elapsed_time(end) / n)
                del g
                return sorted(times)[len(times) // 2]
            n = steps or 4
            for _ in range(3):
                rt._step_body(st, sampling, False)
            times = []
            for _ in range(5):
                st.pos.fill_(capacity // 2)
                t0 = time.perf_counter()
                for _ in range(n):
                    rt._step_body(st, sampling, False)
                times.append((time.perf_counter() - t0) * 1e3 / n)
            return min(times)  # CPU: the minimum is the noise-robust estimate on a shared machine
        finally:
            st.pos.zero_()

    def _use_batch(self, batch: int) -> None:
        if batch not in self.plans:
            self._compile_batch(batch)
        impls, fused = self._impls[batch]
        if getattr(self, "_active", None) != batch:
            self.runtime.set_impls(impls, fused)
            self._active = batch

    # -- generation --------------------------------------------------------------------------

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, max_new_tokens: int, do_sample: bool = False,
                 temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                 seed: int | None = None, return_logits: bool = False, forced: torch.Tensor | None = None):
        """Prompt plus ``max_new_tokens`` new tokens, [B, T + n] (as HF's generate returns).

        With ``return_logits`` also the fp32 logits of every step, [n, B, V]; ``forced`` [B, n]
        feeds given tokens instead of the selected ones (teacher forcing)."""
        ids = input_ids.to(self.device)
        if ids.dim() == 1:
            ids = ids[None]
        if do_sample and temperature <= 0:
            raise ValueError("temperature must be > 0 when sampling")
        sampling = Sampling(bool(do_sample), float(temperature), top_k, top_p) if do_sample else Sampling()
        self._use_batch(ids.shape[0])
        res = self.runtime.generate(ids, max_new_tokens, sampling, seed=seed, return_logits=return_logits,
                                    forced=forced.to(self.device) if forced is not None else None)
        if return_logits:
            new, logits = res
            return torch.cat([ids, new], dim=1), logits
        return torch.cat([ids, res], dim=1)

    def implementations(self) -> dict[str, str]:
        return self.plan.implementations()


def _exact_result(regions, dev_info, batch, capacity, spec) -> SelectionResult:
    from .selection import RegionDecision, software_versions

    decs = {}
    for n, r in regions.items():
        impl = "torch_exact_sdpa" if r.kind == "decode_attention" else "torch"
        decs[n] = RegionDecision(region=n, kind=r.kind, count_per_token=r.count_per_token, implementation=impl,
                                 template=impl, lang="torch", params={}, fuses=[],
                                 why="exact mode: HF-identical PyTorch ops, attention over the valid length, no CUDA graph")
    plan = Plan(model={"arch": spec.arch, "dtype": spec.dtype, "layers": spec.layers, "hidden": spec.hidden},
                device=dev_info.name, batch=batch, capacity=capacity, advisor="none", budget=0, decisions=decs,
                versions=software_versions())
    return SelectionResult(plan, {}, False)


def compile_model(
    model,
    *,
    device: str | torch.device | None = None,
    advisor: str | Advisor = "rules",
    budget: int = DEFAULT_BUDGET,
    cache_dir: str | os.PathLike | None = None,
    batch_size: int = 1,
    max_seq_len: int = 256,
    languages: tuple[str, ...] | None = None,
    force: dict[str, str | list[str]] | None = None,
    seed: int = 0,
    use_cache: bool = True,
    step_check: bool = True,
    timing_budget_s: float | None = None,
    timing_method: str = "graph",
    use_cuda_graph: bool | None = None,
    advisor_options: dict[str, Any] | None = None,
    exact: bool = False,
) -> CompiledDecoder:
    """Compile a transformers Llama / Qwen3 causal LM for decoding on ``device``.

    advisor: "rules" (default), "none" (unadvised: seeded random candidate order), "http"
        (OpenAI-compatible LLM; ``advisor_options`` or HERCULES_LLM_* env give URL/model/key).
    budget: measured non-fallback candidates, over all regions.
    cache_dir: decision cache (default ``~/.cache/hercules/compile`` or $HERCULES_COMPILE_CACHE).
    languages: which candidate languages to consider (default torch, triton, cuda; the
        constraints drop what the device cannot run).
    force: region kind -> template name / candidate id to pin (it must still pass the check).
    exact: no search; every region on its HF-identical PyTorch op and attention over exactly the
        valid length: bit-identical to HF eager (sdpa) in any dtype, but without a CUDA graph.
    timing_method: on CUDA, "graph" (default: candidates timed inside a CUDA graph, as the runtime
        runs them) or "harness" (the evaluation core's time_callable: eager launches, L2 flush).
    """
    if device is not None:
        model = model.to(device)
    model.eval()
    model_spec(model)  # raises UnsupportedModel early
    runtime = DecodeRuntime(model, use_cuda_graph=use_cuda_graph, exact=exact)
    options = dict(
        advisor=make_advisor(advisor, **(advisor_options or {})) if not isinstance(advisor, Advisor) else advisor,
        budget=int(budget),
        cache_dir=cache_dir,
        batch_size=int(batch_size),
        capacity=DecodeRuntime.capacity_for(int(max_seq_len)),
        languages=tuple(languages) if languages else ("torch", "triton", "cuda"),
        force=dict(force or {}),
        seed=int(seed),
        use_cache=use_cache,
        step_check=step_check,
        timing_budget_s=timing_budget_s,
        timing_method=timing_method,
    )
    dec = CompiledDecoder(model, runtime, options=options)
    dec._compile_batch(int(batch_size))
    dec._use_batch(int(batch_size))
    return dec


__all__ = ["CompiledDecoder", "compile_model", "DEFAULT_IMPLS"]
