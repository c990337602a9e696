"""Measured selection of one implementation per region, and the on-disk decision cache.

For every region: all template points -> constraints (rejected with reasons, never built) ->
advisor ordering / pruning (the PyTorch fallback stays first and cannot be pruned) -> a
measurement schedule under the budget -> build -> check against the PyTorch reference on random
inputs at the real shapes -> time -> the fastest valid candidate wins if it beats the fallback by
more than ``margin``; otherwise the fallback stays.

The budget counts measured non-fallback candidates over the whole model. It is spent round-robin
over the regions in order of their share of the step's bytes, one candidate per region per round,
each region taking its candidates in advised order -- so a good order reaches a fast plan in fewer
measurements (the advisor ablation reads ``Plan.trace``).

Qwen3's q/k RMSNorm can be fused into the rotary kernel: a fused rotary candidate is checked
against the qk_norm+rotary reference and wins if it beats the best qk_norm plus the best plain
rotary.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from hercules.fileio import write_text_atomic

from . import advisor as adv_mod
from .constraints import DeviceInfo, check as constraint_check
from .reference import (EPILOGUE_NORM, NORM_FUSABLE, ROTARY_KV_ATTN_KEY, ROTARY_KV_KEY, add_norm_fused_key,
                        norm_fused_key)
from .regions import Region
from .templates import find_template, fallback_spec, templates_for
from .templates.base import Candidate, CandidateSpec
from .templates.expert_templates import expert_note, is_expert_id, library_versions, unavailable
from .timing import NotCapturable, time_region
from .validate import RegionWeights, check as validate_check, make_args

log = logging.getLogger(__name__)

PLAN_VERSION = 1
FUSED_PAIR = ("qk_norm", "rotary")  # a rotary candidate with fuses=("qk_norm",) serves both
# the projection that reads the norm a projection with the norm in its epilogue makes
EPILOGUE_CONSUMER = {"o_proj": "gate_up_silu_mul", "down_proj": "qkv_proj"}


@dataclass
class Trial:
    id: str
    template: str
    lang: str
    params: dict[str, Any]
    fuses: list[str]
    status: str  # ok | invalid | build_error | not_capturable | error
    reason: str = ""
    median_ms: float | None = None
    max_abs_err: float | None = None
    build_s: float = 0.0
    measurement: int | None = None  # index in the schedule (None: the free fallback measurement)


@dataclass
class RegionDecision:
    region: str
    kind: str
    count_per_token: int
    implementation: str
    template: str
    lang: str
    params: dict[str, Any]
    fuses: list[str]
    why: str
    fallback_ms: float | None = None
    chosen_ms: float | None = None
    label: str | None = None
    risk: list[str] = field(default_factory=list)
    tried: list[Trial] = field(default_factory=list)
    rejected: int = 0
    rejected_examples: list[list[str]] = field(default_factory=list)
    pruned: int = 0
    not_measured: int = 0
    fused_into: str | None = None
    build_group: list | None = None  # CUDA: the (region, params) items built together with the choice

    def adopt(self, trial: Trial, build_group: list | None, why: str) -> None:
        """Take a fused candidate's trial as this region's choice."""
        self.implementation, self.template, self.lang = trial.id, trial.template, trial.lang
        self.params, self.fuses, self.chosen_ms = dict(trial.params), list(trial.fuses), trial.median_ms
        self.build_group, self.why = build_group, why

    def fold_into(self, host: str, trial: Trial) -> None:
        """This region's work now runs inside ``host``'s chosen candidate (``trial``)."""
        self.implementation, self.template, self.lang = trial.id, trial.template, trial.lang
        self.params, self.fused_into, self.chosen_ms = dict(trial.params), host, 0.0
        self.why = f"fused into {host} ({trial.id})"


@dataclass
class Plan:
    model: dict[str, Any]
    device: str
    batch: int
    capacity: int
    advisor: str
    budget: int
    decisions: dict[str, RegionDecision]
    measurements: int = 0
    cache_hit: bool = False
    cache_key: str = ""
    compile_s: float = 0.0
    advisor_warnings: list[str] = field(default_factory=list)
    advice: dict[str, Any] | None = None
    trace: list[dict[str, Any]] = field(default_factory=list)
    step_check: dict[str, Any] | None = None
    versions: dict[str, str] = field(default_factory=dict)
    version: int = PLAN_VERSION

    def implementations(self) -> dict[str, str]:
        return {k: d.implementation for k, d in self.decisions.items()}

    def to_json(self) -> dict[str, Any]:
        return json.loads(json.dumps(asdict(self), default=str))

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Plan":
        decs = {}
        for k, v in d["decisions"].items():
            v = dict(v)
            v["tried"] = [Trial(**t) for t in v.get("tried", [])]
            decs[k] = RegionDecision(**v)
        d = dict(d)
        d["decisions"] = decs
        return cls(**d)

    def table(self) -> str:
        rows = [f"{'region':18} {'x/tok':>5} {'implementation':48} {'ms':>9} {'fallback':>9}  why"]
        for d in self.decisions.values():
            c = f"{d.chosen_ms:.4f}" if d.chosen_ms is not None else "-"
            f = f"{d.fallback_ms:.4f}" if d.fallback_ms is not None else "-"
            rows.append(f"{d.region:18} {d.count_per_token:5d} {d.implementation[:48]:48} {c:>9} {f:>9}  {d.why}")
        return "\n".join(rows)


def software_versions() -> dict[str, str]:
    v = {"torch": torch.__version__, "python": platform.python_version()}
    try:
        import triton

        v["triton"] = triton.__version__
    except Exception:
        v["triton"] = "none"
    try:
        import transformers

        v["transformers"] = transformers.__version__
    except Exception:
        v["transformers"] = "none"
    try:
        from hercules import __version__

        v["hercules"] = __version__
    except Exception:
        pass
    v.update(library_versions())  # the expert libraries: an upgrade re-measures their regions
    v["plan"] = str(PLAN_VERSION)
    return v


# ---------------------------------------------------------------------------------------------
# decision cache


def default_cache_dir() -> Path:
    env = os.environ.get("HERCULES_COMPILE_CACHE")
    if env:
        return Path(env)
    return Path(os.path.expanduser("~/.cache/hercules/compile"))


def cache_key(config_hash: str, device: DeviceInfo, dtype: str, batch: int, capacity: int, extra: dict[str, Any]) -> str:
    blob = json.dumps({"config": config_hash, "gpu": device.key(), "dtype": dtype, "batch": batch,
                       "capacity": capacity, "versions": software_versions(), **extra}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


class DecisionCache:
    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root) if root is not None else default_cache_dir()

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        p = self.path(key)
        try:
            with open(p) as f:
                d = json.load(f)
            return d if isinstance(d, dict) and d.get("version") == PLAN_VERSION else None
        except (OSError, json.JSONDecodeError):
            return None

    def put(self, key: str, plan: Plan) -> None:
        try:
            write_text_atomic(self.path(key), json.dumps(plan.to_json(), indent=1))
        except OSError as e:  # a read-only cache dir costs speed, never correctness
            log.warning("decision cache not written: %s", e)


# ---------------------------------------------------------------------------------------------
# selection


@dataclass
class SelectionResult:
    plan: Plan
    impls: dict[str, Callable]
    fused_qk_rotary: bool


def _spec_json(s: CandidateSpec) -> dict[str, Any]:
    return dict(template=s.template, lang=s.lang, params=dict(s.params), fuses=list(s.fuses))


def _winning_fold(options: list[tuple[Trial, float]], pins, margin: float) -> tuple[Trial, float, bool] | None:
    """Of (fused rotary candidate, time of the kernels it would replace) options: a pinned one, or
    (with no pin on the region: a pin to another template stands) the largest saving beyond the
    margin; with whether it was pinned."""
    pinned = [o for o in options if pins and _match(_trial_spec(o[0], "rotary"), pins)]
    winners = pinned or ([] if pins else [o for o in options if o[0].median_ms < o[1] * (1 - margin)])
    if not winners:
        return None
    fz, parts = max(winners, key=lambda o: o[1] - o[0].median_ms)
    return fz, parts, bool(pinned)


def _fold_rotary_neighbours(decisions: dict[str, RegionDecision], impls: dict[str, Callable], fz: Trial) -> bool:
    """The KV write (and the q/k norm when ``fz`` applies it) now run inside the rotary choice
    ``fz``; returns whether the norm was folded."""
    kv = decisions["kv_write"]
    # A later fold (attention too) moves the write into a new host: the plan names the kernel that
    # runs it now, and keeps what the write measured as a kernel of its own.
    alone = kv.why.partition("measured alone: ")[2] or kv.why if kv.fused_into else kv.why
    kv.fold_into("rotary", fz)
    kv.why = f"folded into rotary ({fz.id}); measured alone: {alone}"
    impls.pop("kv_write", None)
    if "qk_norm" in fz.fuses and "qk_norm" in decisions:
        decisions["qk_norm"].fold_into("rotary", fz)
        impls["qk_norm"] = None
        return True
    return False


def _rejection_examples(rej: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The first five rejections, and every expert's: the plan says why each library was not used."""
    return rej[:5] + [e for e in rej[5:] if is_expert_id(e[0])]


def _trial_spec(t: Trial, kind: str) -> CandidateSpec:
    return CandidateSpec(t.template, t.lang, kind, tuple(sorted(t.params.items())), tuple(t.fuses))


def _match(spec: CandidateSpec, names: str | list[str]) -> bool:
    names = [names] if isinstance(names, str) else list(names)
    return spec.id in names or spec.template in names


def select(
    regions: dict[str, Region],
    weights: RegionWeights,
    *,
    device: torch.device,
    device_info: DeviceInfo,
    advisor: adv_mod.Advisor,
    budget: int = 48,
    languages: tuple[str, ...] = ("torch", "triton", "cuda"),
    seed: int = 0,
    force: dict[str, str | list[str]] | None = None,
    timing_budget_s: float | None = None,
    margin: float = 0.02,
    trials: int = 2,
    timing_sets: int | None = None,
    timing_method: str = "graph",
) -> SelectionResult:
    t_start = time.perf_counter()
    force = force or {}
    if timing_budget_s is None:
        timing_budget_s = 0.1 if device.type == "cuda" else 0.03
    n_sets = timing_sets or max(1, min(weights.layers, 8 if device.type == "cuda" else 2))

    # 1. candidate points per region, constraints
    catalogs: dict[str, adv_mod.RegionCatalog] = {}
    rejected: dict[str, list[tuple[str, str]]] = {}
    for name, r in regions.items():
        fb = fallback_spec(r)
        specs, rej = [], []
        for t in templates_for(r, languages if "torch" in languages else ("torch", *languages)):
            for p in t.space(r):
                s = t.spec(p, r)
                reasons = constraint_check(t, p, r, device_info)
                reasons += unavailable(t, p, r, device_info.type, trial_call=not reasons)
                if reasons:
                    rej.append((s.id, "; ".join(reasons)))
                else:
                    specs.append(s)
        if fb.id not in {s.id for s in specs}:
            specs.insert(0, fb)
        catalogs[name] = adv_mod.make_catalog(r, specs, fb, rejected=len(rej))
        rejected[name] = rej

    # 2. advice (validated; failures are warnings)
    context = {"device": device_info.name, "sm": device_info.sm, "sm_count": device_info.sm_count,
               "dtype": next(iter(regions.values())).dtype, "batch": next(iter(regions.values())).batch}
    try:
        advice = advisor.advise(catalogs, context)
    except Exception as e:  # an advisor bug must not stop compilation
        advice = adv_mod.Advice(source=getattr(advisor, "name", "?"), warnings=[f"advisor failed: {e}"])
    use_advice = advisor.name != "none"

    # 3. per-region queues
    queues: dict[str, list[CandidateSpec]] = {}
    pruned: dict[str, int] = {}
    for name, cat in catalogs.items():
        ra = advice.regions.get(name) if use_advice else None
        if use_advice and ra is None:
            ra = adv_mod.RegionAdvice()  # advised run, no (valid) advice for this region: default order
        ordered, pr = adv_mod.order_candidates(cat, ra, seed=seed)
        pins = force.get(cat.region.kind) or force.get(name)
        if pins:
            # a pin names a template (its first point in advised order) or an exact candidate id
            pinned = [s for s in ordered[1:] if _match(s, pins)][:1]
            ordered = [ordered[0], *pinned, *[s for s in ordered[1:] if s not in pinned]]
            if not pinned:
                advice.warnings.append(f"force: nothing in region {name!r} matches {pins!r} (after constraints)")
        queues[name] = ordered[1:]
        pruned[name] = len(pr)

    # 4. schedule: round-robin by share of step bytes
    importance = sorted(regions, key=lambda n: -regions[n].bytes_per_token)
    schedule: list[tuple[str, CandidateSpec]] = []
    pos = {n: 0 for n in regions}
    # pinned candidates are measured first, outside the budget
    for n in importance:
        pins = force.get(regions[n].kind) or force.get(n)
        if pins and pos[n] < len(queues[n]) and _match(queues[n][pos[n]], pins):
            schedule.append((n, queues[n][pos[n]]))
            pos[n] += 1
    n_pinned = len(schedule)
    while len(schedule) - n_pinned < budget:
        progressed = False
        for n in importance:
            if len(schedule) - n_pinned >= budget:
                break
            if pos[n] < len(queues[n]):
                schedule.append((n, queues[n][pos[n]]))
                pos[n] += 1
                progressed = True
        if not progressed:
            break

    # 5. build what the schedule needs. Non-CUDA: per (region, template). CUDA: one module per
    # template across regions (one nvcc run each), the templates' modules built in parallel.
    built: dict[tuple[str, str], Candidate | Exception] = {}
    build_groups: dict[tuple[str, str], list[list]] = {}  # (region, id) -> [[region, params], ...]
    groups: dict[tuple[str, str], list[tuple[str, CandidateSpec]]] = {}
    for n, s in schedule:
        key = ("*", s.template) if s.lang == "cuda" else (n, s.template)
        groups.setdefault(key, []).append((n, s))

    def build_group(key, items):
        t = find_template(key[1], regions[items[0][0]])
        if t is None:
            return [KeyError(f"template {key[1]} not found")] * len(items)
        try:
            if hasattr(t, "materialise_items"):
                return t.materialise_items([(s.param_dict, regions[n]) for n, s in items])
            return t.materialise_many([s.param_dict for _, s in items], regions[items[0][0]])
        except Exception as e:
            return [e] * len(items)

    cuda_keys = [k for k in groups if k[0] == "*"]
    if len(cuda_keys) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(4, len(cuda_keys))) as ex:
            futures = {k: ex.submit(build_group, k, groups[k]) for k in cuda_keys}
            results = {k: f.result() for k, f in futures.items()}
    else:
        results = {k: build_group(k, groups[k]) for k in cuda_keys}
    for k in groups:
        if k not in results:
            results[k] = build_group(k, groups[k])
    for k, items in groups.items():
        for (n, s), c in zip(items, results[k]):
            built[(n, s.id)] = c
            if k[0] == "*":
                build_groups[(n, s.id)] = [[m, sp.param_dict] for m, sp in items]
    for n in regions:
        fb = catalogs[n].fallback
        built[(n, fb.id)] = find_template(fb.template, regions[n]).materialise({}, regions[n])

    # 6. measure
    trials_by: dict[str, list[Trial]] = {n: [] for n in regions}
    cands_by: dict[str, dict[str, Candidate]] = {n: {} for n in regions}
    trace: list[dict[str, Any]] = []

    def measure(n: str, s: CandidateSpec, index: int | None) -> Trial:
        r = regions[n]
        c = built.get((n, s.id))
        tr = Trial(s.id, s.template, s.lang, dict(s.params), list(s.fuses), "ok", measurement=index)
        if isinstance(c, Exception) or c is None:
            tr.status, tr.reason = "build_error", str(c)[:500]
            return tr
        tr.build_s = round(c.build_seconds, 3)
        fused = tuple(s.fuses)
        ok, err, msg = validate_check(c.fn, r, weights, fused=fused, trials=trials, seed=seed + 17)
        tr.max_abs_err = err if err != float("inf") else None
        if not ok:
            tr.status, tr.reason = "invalid", msg
            return tr
        try:
            arg_sets = [make_args(r, weights, fused=fused, seed=seed + 1, trial=0, layer=i) for i in range(n_sets)]
            tm = time_region(c.fn, arg_sets, device=device, budget_s=timing_budget_s, method=timing_method)
            tr.median_ms = tm.median_ms
        except NotCapturable as e:
            tr.status, tr.reason = "not_capturable", str(e)
            return tr
        except Exception as e:
            tr.status, tr.reason = "error", f"{type(e).__name__}: {str(e)[:300]}"
            return tr
        cands_by[n][s.id] = c
        return tr

    def best(n: str, fused: bool | None = None, fuses: tuple[str, ...] | None = None) -> Trial | None:
        """The fastest valid trial of region ``n``: any, unfused or fused (``fused``), or fusing
        exactly ``fuses``."""
        ok = [t for t in trials_by[n] if t.status == "ok" and t.median_ms is not None
              and (fused is None or bool(t.fuses) == fused) and (fuses is None or tuple(t.fuses) == fuses)]
        return min(ok, key=lambda t: t.median_ms) if ok else None

    def step_estimate() -> float:
        total = 0.0
        for n, r in regions.items():
            if r.kind in FUSED_PAIR and "qk_norm" in regions and "rotary" in regions:
                continue
            # fused candidates also do their neighbour's work: estimated as the parts
            b = best(n, False if r.kind in NORM_FUSABLE or r.kind in EPILOGUE_NORM or r.kind == "rotary" else None)
            total += r.count_per_token * (b.median_ms if b else 0.0)
        if "qk_norm" in regions and "rotary" in regions:
            rot_plain, qkn, rot_fused = best("rotary", False), best("qk_norm"), best("rotary", fuses=("qk_norm",))
            plain = (rot_plain.median_ms if rot_plain else 0.0) + (qkn.median_ms if qkn else 0.0)
            opts = [plain] + ([rot_fused.median_ms] if rot_fused else [])
            total += regions["rotary"].count_per_token * min(opts)
        return total

    for n in regions:  # the fallback: always measured, not counted
        tr = measure(n, catalogs[n].fallback, None)
        trials_by[n].append(tr)
    trace.append({"measurements": 0, "step_estimate_ms": step_estimate()})
    for i, (n, s) in enumerate(schedule):
        tr = measure(n, s, i + 1)
        trials_by[n].append(tr)
        trace.append({"measurements": i + 1, "region": n, "candidate": s.id, "status": tr.status,
                      "ms": tr.median_ms, "step_estimate_ms": step_estimate()})

    # 7. decide
    decisions: dict[str, RegionDecision] = {}
    impls: dict[str, Callable] = {}
    chosen_spec: dict[str, CandidateSpec] = {}
    for n, r in regions.items():
        fb = catalogs[n].fallback
        fb_trial = trials_by[n][0]
        ra = advice.regions.get(n)
        pins = force.get(r.kind) or force.get(n)
        cand_trials = [t for t in trials_by[n][1:] if not t.fuses]
        valid = [t for t in cand_trials if t.status == "ok" and t.median_ms is not None]
        pick, why = None, ""
        fb_ms = fb_trial.median_ms
        if fb_trial.status != "ok":  # cannot happen unless the reference itself broke
            why = f"fallback (its own check failed: {fb_trial.reason})"
        elif pins and any(_match(_trial_spec(t, r.kind), pins) for t in valid):
            pick = next(t for t in valid if _match(_trial_spec(t, r.kind), pins))
            why = f"pinned by force={pins!r}; passed the reference check"
        elif valid:
            b = min(valid, key=lambda t: t.median_ms)
            if fb_ms is not None and b.median_ms < fb_ms * (1 - margin):
                pick = b
                why = (f"fastest valid: {b.median_ms:.4f} ms vs fallback {fb_ms:.4f} ms "
                       f"({len(cand_trials)} measured, {len(valid)} valid)")
            else:
                why = (f"fallback: no candidate beat PyTorch by >{margin:.0%} (best {b.id} {b.median_ms:.4f} ms "
                       f"vs {fb_ms:.4f} ms)")
        elif cand_trials:
            why = f"fallback: none of {len(cand_trials)} measured candidates was valid"
        else:
            why = "fallback: no other candidate survived constraints/advice/budget"
        t_sel = pick or fb_trial
        chosen_spec[n] = _trial_spec(t_sel, r.kind)
        impls[r.kind] = (cands_by[n].get(t_sel.id) or built[(n, fb.id)]).fn
        rej = rejected[n]
        decisions[n] = RegionDecision(
            region=n, kind=r.kind, count_per_token=r.count_per_token, implementation=t_sel.id,
            template=t_sel.template, lang=t_sel.lang, params=dict(t_sel.params), fuses=list(t_sel.fuses), why=why,
            fallback_ms=fb_ms, chosen_ms=t_sel.median_ms, label=ra.label if ra else None,
            risk=list(ra.risk) if ra else [], tried=trials_by[n], rejected=len(rej),
            rejected_examples=[[i, reason] for i, reason in _rejection_examples(rej)], pruned=pruned[n],
            not_measured=max(0, len(queues[n]) - pos[n]),
            build_group=build_groups.get((n, t_sel.id)),
        )

    fused_flag = False
    if "qk_norm" in regions and "rotary" in regions:
        fz = best("rotary", fuses=("qk_norm",))
        plain_rot = decisions["rotary"].chosen_ms
        qkn = decisions["qk_norm"].chosen_ms
        pins = force.get("rotary")
        pinned_fused = bool(pins and fz and _match(_trial_spec(fz, "rotary"), pins))
        if fz and plain_rot is not None and qkn is not None and (
                pinned_fused or fz.median_ms < (plain_rot + qkn) * (1 - margin)):
            fused_flag = True
            decisions["rotary"].adopt(
                fz, build_groups.get(("rotary", fz.id)),
                f"fused q/k RMSNorm + rotary: {fz.median_ms:.4f} ms vs {plain_rot:.4f} + {qkn:.4f} ms unfused"
                + (" (pinned)" if pinned_fused else ""))
            impls["rotary"] = cands_by["rotary"][fz.id].fn
            decisions["qk_norm"].fold_into("rotary", fz)
            impls["qk_norm"] = None  # not called: the rotary implementation applies the norm

    # The KV-cache write folded into the rotary kernel (with the q/k norm too when that fusion was
    # kept): the rotated k goes straight into the cache, one kernel a layer fewer.
    if "rotary" in regions and "kv_write" in regions:
        rot_ms, kv_ms = decisions["rotary"].chosen_ms, decisions["kv_write"].chosen_ms
        qk_ms = decisions["qk_norm"].chosen_ms if "qk_norm" in regions and not fused_flag else None
        pins = force.get("rotary")
        # (candidate, the time of the kernels it would replace); with the norm already folded into
        # the rotary, only a candidate that keeps it can follow
        options = [(best("rotary", fuses=("qk_norm", "kv_write")),
                    (rot_ms or 0.0) + (kv_ms or 0.0) + (qk_ms or 0.0) if "qk_norm" in regions else None)]
        if not fused_flag:
            options.append((best("rotary", fuses=("kv_write",)), (rot_ms or 0.0) + (kv_ms or 0.0)))
        options = [(fz, parts) for fz, parts in options if fz is not None and parts is not None
                   and rot_ms is not None and kv_ms is not None]
        won = _winning_fold(options, pins, margin)
        if won:
            fz, parts, pinned = won
            decisions["rotary"].adopt(
                fz, build_groups.get(("rotary", fz.id)),
                f"KV-cache write folded in: {fz.median_ms:.4f} ms vs {parts:.4f} ms for the kernels it replaces"
                + (" (pinned)" if pinned else ""))
            impls[ROTARY_KV_KEY] = cands_by["rotary"][fz.id].fn
            impls.pop("rotary", None)
            fused_flag = _fold_rotary_neighbours(decisions, impls, fz) or fused_flag

    # Rotary, KV-cache write and attention in one kernel: kept where it beats the kernels the plan
    # has for them now (the rotary decision already holds whatever it absorbed above). A candidate
    # that applies the q/k norm replaces it too; one that does not needs the norm done before it.
    if "rotary" in regions and "kv_write" in regions and "decode_attention" in regions:
        rot, kv, attn = decisions["rotary"], decisions["kv_write"], decisions["decode_attention"]
        qkn = decisions.get("qk_norm")
        pins = force.get("rotary")
        kv_ms = 0.0 if kv.fused_into else kv.chosen_ms  # already inside the rotary decision's time
        if None not in (rot.chosen_ms, kv_ms, attn.chosen_ms):
            base = rot.chosen_ms + kv_ms + attn.chosen_ms
            options = []
            if qkn is not None:  # Qwen3: the norm inside, replacing the separate one if there is one
                full = best("rotary", fuses=("qk_norm", "kv_write", "decode_attention"))
                extra = 0.0 if fused_flag else (qkn.chosen_ms or 0.0)
                if full is not None:
                    options.append((full, base + extra))
            if qkn is None or not fused_flag:  # no norm to fold, or it stays a kernel of its own
                plain = best("rotary", fuses=("kv_write", "decode_attention"))
                if plain is not None:
                    options.append((plain, base))
            won = _winning_fold(options, pins, margin)
            if won:
                fz, parts, pinned = won
                rot.adopt(fz, build_groups.get(("rotary", fz.id)),
                          f"KV-cache write and attention folded in: {fz.median_ms:.4f} ms vs {parts:.4f} ms for the "
                          "kernels it replaces" + (" (pinned)" if pinned else ""))
                impls[ROTARY_KV_ATTN_KEY] = cands_by["rotary"][fz.id].fn
                for key in ("rotary", ROTARY_KV_KEY, "decode_attention"):
                    impls.pop(key, None)
                attn.fold_into("rotary", fz)
                fused_flag = _fold_rotary_neighbours(decisions, impls, fz) or fused_flag

    # The residual add + RMSNorm folded into the epilogue of the projection before it (o_proj: the
    # post-attention norm; down_proj: the next layer's input norm, the final norm after the last
    # layer). The projection reading the norm (gate/up; the next layer's QKV) then runs its plain
    # choice. Kept where the fused kernel plus that plain choice beat the best the plan has without
    # it: projection, norm and consumer as three kernels, or the norm folded into the consumer.
    consumers_fed: set[str] = set()  # their norm comes from the epilogue: no fold into them
    down_fold: Trial | None = None
    for n, r in regions.items():
        if r.kind not in EPILOGUE_NORM or "residual_rmsnorm" not in decisions:
            continue
        fz = best(n, fuses=("residual_rmsnorm",))
        cons = next((m for m, c in regions.items() if c.kind == EPILOGUE_CONSUMER[r.kind]), None)
        if fz is None or cons is None:
            continue
        pins, cons_pins = force.get(r.kind) or force.get(n), force.get(regions[cons].kind) or force.get(cons)
        pinned = bool(pins and _match(_trial_spec(fz, r.kind), pins))
        cons_fold = best(cons, fuses=("residual_rmsnorm",))
        norm_pinned = force.get("residual_rmsnorm") or (r.kind == "down_proj" and force.get("final_norm"))
        if (pins and not pinned) or (not pinned and (norm_pinned or cons_pins and cons_fold and _match(
                _trial_spec(cons_fold, regions[cons].kind), cons_pins))):
            continue  # a pin elsewhere stands: on this projection, on the norm kernel, on the consumer's fold
        proj_ms, norm_ms = decisions[n].chosen_ms, decisions["residual_rmsnorm"].chosen_ms
        cons_ms = decisions[cons].chosen_ms
        if None in (proj_ms, norm_ms, cons_ms):
            continue
        without = proj_ms + min([norm_ms + cons_ms] + ([cons_fold.median_ms] if cons_fold else []))
        if pinned or fz.median_ms + cons_ms < without * (1 - margin):
            decisions[n].adopt(
                fz, build_groups.get((n, fz.id)),
                f"residual add + RMSNorm after it folded into the epilogue: {fz.median_ms:.4f} + {cons_ms:.4f} ms "
                f"({cons} plain) vs {without:.4f} ms without" + (" (pinned)" if pinned else ""))
            impls[add_norm_fused_key(r.kind)] = cands_by[n][fz.id].fn
            impls.pop(r.kind, None)
            consumers_fed.add(cons)
            if r.kind == "down_proj":
                down_fold = fz
    if down_fold is not None and "final_norm" in decisions:  # the last layer's down_proj applies it
        decisions["final_norm"].fold_into("down_proj", down_fold)
        impls.pop("final_norm", None)

    # The residual add + RMSNorm folded into the projection after it: kept where one fused kernel
    # beats the two it replaces (the norm's own decision stays: final_norm and any unfused
    # consumer still use it).
    for n, r in regions.items():
        if r.kind not in NORM_FUSABLE or "residual_rmsnorm" not in decisions:
            continue
        if n in consumers_fed:
            continue  # the epilogue before it makes its norm (layer 0's QKV: the norm kernel)
        fz = best(n, True)
        norm_ms, proj_ms = decisions["residual_rmsnorm"].chosen_ms, decisions[n].chosen_ms
        pins = force.get(r.kind) or force.get(n)
        pinned = bool(pins and fz and _match(_trial_spec(fz, r.kind), pins))
        if pins and not pinned:
            continue  # the region is pinned to something else: the pin stands
        if fz and norm_ms is not None and proj_ms is not None and (
                pinned or fz.median_ms < (norm_ms + proj_ms) * (1 - margin)):
            decisions[n].adopt(
                fz, build_groups.get((n, fz.id)),
                f"residual add + RMSNorm folded in: {fz.median_ms:.4f} ms vs {norm_ms:.4f} + {proj_ms:.4f} ms as two "
                "kernels" + (" (pinned)" if pinned else ""))
            impls[norm_fused_key(r.kind)] = cands_by[n][fz.id].fn
            impls.pop(r.kind, None)
    folded = [n for n in regions if (regions[n].kind in NORM_FUSABLE or regions[n].kind == "o_proj")
              and "residual_rmsnorm" in decisions[n].fuses]
    # every use of the norm kernel: the layers' input norm (layer 0's too: only a QKV fold covers
    # it) and the post-attention norm (a gate/up fold or o_proj's epilogue)
    covered_in = "qkv_proj" in decisions and "residual_rmsnorm" in decisions["qkv_proj"].fuses
    covered_post = any(regions[m].kind in ("o_proj", "gate_up_silu_mul") for m in folded)
    if folded and covered_in and covered_post:
        d = decisions["residual_rmsnorm"]  # every use of it now runs inside a projection
        d.fused_into = ", ".join(folded)
        d.why = f"folded into {d.fused_into}; measured alone: {d.why}"
        impls.pop("residual_rmsnorm", None)

    for d in decisions.values():  # where a library's kernel runs, the plan says which and whose
        note = expert_note(d.template, d.params) if not d.fused_into else None
        if note:
            d.why = f"{d.why}; {note}"

    plan = Plan(
        model={}, device=device_info.name, batch=next(iter(regions.values())).batch,
        capacity=next((r.attr("capacity") for r in regions.values() if r.attr("capacity")), 0),
        advisor=advisor.name, budget=budget, decisions=decisions, measurements=len(schedule),
        compile_s=time.perf_counter() - t_start, advisor_warnings=list(advice.warnings),
        advice=advice.to_json() if use_advice else None, trace=trace, versions=software_versions(),
    )
    return SelectionResult(plan, {k: v for k, v in impls.items() if v is not None}, fused_flag)


def load_cached(plan_json: dict[str, Any], regions: dict[str, Region], weights: RegionWeights) -> SelectionResult | None:
    """Rebuild the implementation table a cached plan names; each chosen candidate is checked once
    more against the reference. None if anything is missing or fails (then selection reruns)."""
    try:
        plan = Plan.from_json(plan_json)
    except Exception as e:
        log.warning("cached plan unreadable: %s", e)
        return None
    impls: dict[str, Callable] = {}
    fused = False
    for n, r in regions.items():
        d = plan.decisions.get(n)
        if d is None:
            return None
        if d.fused_into:
            continue
        t = find_template(d.template, r)
        if t is None:
            return None
        try:
            if d.build_group and hasattr(t, "materialise_items"):
                # rebuild the same module source as at selection: a load from torch's extension cache
                items = [(dict(p), regions[m]) for m, p in d.build_group if m in regions]
                built = t.materialise_items(items)
                idx = next(i for i, (p, m) in enumerate(items) if m is r and p == dict(d.params))
                c = built[idx]
                if isinstance(c, Exception):
                    raise c
            else:
                c = t.materialise(dict(d.params), r)
        except Exception as e:
            log.warning("cached choice %s for %s no longer builds: %s", d.implementation, n, e)
            return None
        if d.lang != "torch":
            ok, _, msg = validate_check(c.fn, r, weights, fused=tuple(d.fuses), trials=1)
            if not ok:
                log.warning("cached choice %s for %s fails its check now: %s", d.implementation, n, msg)
                return None
        if r.kind in NORM_FUSABLE and "residual_rmsnorm" in d.fuses:
            impls[norm_fused_key(r.kind)] = c.fn
            continue
        if r.kind in EPILOGUE_NORM and "residual_rmsnorm" in d.fuses:
            impls[add_norm_fused_key(r.kind)] = c.fn
            continue
        if r.kind == "rotary":
            fused = "qk_norm" in d.fuses
            if "decode_attention" in d.fuses:
                impls[ROTARY_KV_ATTN_KEY] = c.fn
                continue
            if "kv_write" in d.fuses:
                impls[ROTARY_KV_KEY] = c.fn
                continue
        impls[r.kind] = c.fn
    plan.cache_hit = True
    return SelectionResult(plan, impls, fused)
