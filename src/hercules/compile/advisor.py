"""Advisors: they see region summaries and candidate spaces and answer JSON advice that can only
*order and prune* the measured search. They never choose an implementation: every candidate is
still checked against the PyTorch reference and timed, and the PyTorch fallback can be neither
pruned nor displaced by advice.

Answer schema (every field optional except ``regions``)::

    {"regions": {
        "<region name>": {
            "label": "short semantic label (<= 80 chars)",
            "priorities": ["<template name or candidate id>", ...],   # try these first, in order
            "prune": ["<template name or candidate id>", ...],        # do not try these
            "param_hints": {"<template name>": {"<param>": [values from its space]}},
            "risk": ["short note", ...]
        }, ...}}

Validation is strict and per region: an entry with any error (unknown region / template /
candidate / parameter / value, wrong type, oversized list, duplicate, an attempt to prune the
fallback) is dropped whole with a warning; the other regions' advice is kept. An answer that is
not a JSON object with a ``regions`` object, or is larger than ``MAX_ANSWER_CHARS``, is dropped
whole. Dropped advice means the default (unadvised) order.

Three advisors: ``rules`` (default, needs nothing), ``none`` (no advice: a seeded random order, the
ablation baseline) and ``http`` (an OpenAI-compatible LLM via ``hercules.llm.client``).
"""

from __future__ import annotations

import json
import logging
import random
import warnings
from dataclasses import dataclass, field
from typing import Any

from .regions import Region
from .templates.base import CandidateSpec
from .templates.expert_templates import EXPERT_NAMES

log = logging.getLogger(__name__)

MAX_ANSWER_CHARS = 200_000
MAX_LABEL = 80
MAX_RISK_NOTES = 8
MAX_RISK_CHARS = 300
ALLOWED_KEYS = {"label", "priorities", "prune", "param_hints", "risk"}


def _decode_split_hint(region: Region, sms: int) -> list[int]:
    """Split counts to try first for decode attention over ``region``'s cache: the one that fills
    the SMs with (batch x kv heads) blocks, each split >= 32 positions, half of it, and one split
    (which writes its output directly, no combine launch: worth a try at short contexts)."""
    blocks, capacity = region.batch * region.attr("kv_heads"), region.attr("capacity")
    splits = 1
    while blocks * splits < sms and splits < 32 and capacity // (splits * 2) >= 32:
        splits *= 2
    return sorted({splits, max(1, splits // 2), 1}, reverse=True)


class AdvisorWarning(UserWarning):
    pass


@dataclass(frozen=True)
class RegionAdvice:
    label: str | None = None
    priorities: tuple[str, ...] = ()
    prune: tuple[str, ...] = ()
    param_hints: dict[str, dict[str, tuple]] = field(default_factory=dict)
    risk: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "priorities": list(self.priorities), "prune": list(self.prune),
                "param_hints": {t: {p: list(v) for p, v in h.items()} for t, h in self.param_hints.items()},
                "risk": list(self.risk)}


@dataclass
class Advice:
    source: str
    regions: dict[str, RegionAdvice] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    raw: str | None = None  # the answer text as received (http), for the record

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "regions": {k: v.to_json() for k, v in self.regions.items()},
                "warnings": list(self.warnings)}


# ---------------------------------------------------------------------------------------------
# what the advisor is shown, and what its answer is validated against


@dataclass
class RegionCatalog:
    region: Region
    specs: list[CandidateSpec]  # candidates that passed the constraints (fallback included)
    fallback: CandidateSpec
    spaces: dict[str, dict[str, list]]  # template -> param -> declared values
    langs: dict[str, str]  # template -> language
    rejected: int = 0  # points removed by the constraints

    @property
    def ids(self) -> set[str]:
        return {s.id for s in self.specs}

    @property
    def names(self) -> set[str]:
        return set(self.spaces) | self.ids

    def request(self) -> dict[str, Any]:
        s = self.region.summary()
        keep = {k: s[k] for k in ("name", "kind", "count_per_token", "flops", "bytes", "dtype", "batch",
                                  "arithmetic_intensity", "attrs", "fusable_with")}
        keep["inputs"] = [{"name": t["name"], "shape": t["shape"], "stride": t["stride"]} for t in s["inputs"]]
        keep["candidate_templates"] = {
            t: {"lang": self.langs[t], "params": self.spaces[t],
                "surviving_points": sum(1 for sp in self.specs if sp.template == t)}
            for t in self.spaces
        }
        keep["fallback"] = self.fallback.id
        return keep


def _space_of(specs: list[CandidateSpec]) -> dict[str, dict[str, list]]:
    out: dict[str, dict[str, list]] = {}
    for s in specs:
        t = out.setdefault(s.template, {})
        for k, v in s.params:
            vals = t.setdefault(k, [])
            if v not in vals:
                vals.append(v)
    return out


def make_catalog(region: Region, specs: list[CandidateSpec], fallback: CandidateSpec, rejected: int = 0) -> RegionCatalog:
    return RegionCatalog(region, specs, fallback, _space_of(specs), {s.template: s.lang for s in specs}, rejected)


# ---------------------------------------------------------------------------------------------
# validation


def _validate_names(value, what: str, cat: RegionCatalog, errors: list[str]) -> tuple[str, ...]:
    if not isinstance(value, list):
        errors.append(f"{what} must be a list, got {type(value).__name__}")
        return ()
    limit = len(cat.names)
    if len(value) > limit:
        errors.append(f"{what} has {len(value)} entries, more than the {limit} known names")
        return ()
    out = []
    for v in value:
        if not isinstance(v, str):
            errors.append(f"{what} entry {v!r} is not a string")
        elif v not in cat.names:
            errors.append(f"{what} names unknown candidate/template {v[:80]!r}")
        elif v in out:
            errors.append(f"{what} repeats {v[:80]!r}")
        else:
            out.append(v)
    return tuple(out)


def validate_region_advice(entry: Any, cat: RegionCatalog) -> tuple[RegionAdvice | None, list[str]]:
    errors: list[str] = []
    if not isinstance(entry, dict):
        return None, [f"entry is {type(entry).__name__}, not an object"]
    extra = set(entry) - ALLOWED_KEYS
    if extra:
        errors.append(f"unknown keys {sorted(str(k)[:40] for k in extra)[:5]}")
    label = entry.get("label")
    if label is not None and (not isinstance(label, str) or not (0 < len(label) <= MAX_LABEL) or not label.isprintable()):
        errors.append(f"label must be a printable string of 1..{MAX_LABEL} chars")
    pri = _validate_names(entry.get("priorities", []), "priorities", cat, errors)
    prune = _validate_names(entry.get("prune", []), "prune", cat, errors)
    if cat.fallback.id in prune or cat.fallback.template in prune:
        errors.append(f"prune names the PyTorch fallback {cat.fallback.id!r}, which is always kept")
    if set(pri) & set(prune):
        errors.append("the same name is both prioritised and pruned")
    hints_in = entry.get("param_hints", {})
    hints: dict[str, dict[str, tuple]] = {}
    if not isinstance(hints_in, dict):
        errors.append(f"param_hints must be an object, got {type(hints_in).__name__}")
    else:
        for t, h in hints_in.items():
            if t not in cat.spaces:
                errors.append(f"param_hints names unknown template {str(t)[:80]!r}")
                continue
            if not isinstance(h, dict):
                errors.append(f"param_hints[{t!r}] must be an object")
                continue
            th: dict[str, tuple] = {}
            for p, vals in h.items():
                space = cat.spaces[t].get(p)
                if space is None:
                    errors.append(f"param_hints[{t!r}] names unknown parameter {str(p)[:40]!r}")
                    continue
                if not isinstance(vals, list):
                    vals = [vals]
                if len(vals) > len(space):
                    errors.append(f"param_hints[{t!r}][{p!r}] lists more values than the space has")
                    continue
                bad = [v for v in vals if isinstance(v, bool) and not isinstance(space[0], bool) or v not in space]
                if bad:
                    errors.append(f"param_hints[{t!r}][{p!r}] values {bad[:3]!r} are outside the space {space}")
                    continue
                th[p] = tuple(vals)
            hints[t] = th
    risk = entry.get("risk", [])
    if not isinstance(risk, list) or len(risk) > MAX_RISK_NOTES or not all(
            isinstance(r, str) and len(r) <= MAX_RISK_CHARS for r in risk):
        errors.append(f"risk must be a list of at most {MAX_RISK_NOTES} strings of <= {MAX_RISK_CHARS} chars")
        risk = []
    if errors:
        return None, errors
    return RegionAdvice(label=label, priorities=pri, prune=prune, param_hints=hints, risk=tuple(risk)), []


def validate_answer(answer: Any, catalogs: dict[str, RegionCatalog], source: str) -> Advice:
    """Advice from a parsed answer; every problem becomes a warning, never an exception."""
    adv = Advice(source=source)

    def warn(msg: str) -> None:
        adv.warnings.append(msg)
        warnings.warn(f"advisor[{source}]: {msg}", AdvisorWarning, stacklevel=3)
        log.warning("advisor[%s]: %s", source, msg)

    if not isinstance(answer, dict) or not isinstance(answer.get("regions"), dict):
        warn("answer ignored: not a JSON object with a 'regions' object")
        return adv
    for name, entry in answer["regions"].items():
        if name not in catalogs:
            warn(f"advice for unknown region {str(name)[:80]!r} ignored")
            continue
        ra, errs = validate_region_advice(entry, catalogs[name])
        if ra is None:
            warn(f"advice for region {name!r} ignored: {'; '.join(errs)[:500]}")
        else:
            adv.regions[name] = ra
    return adv


# ---------------------------------------------------------------------------------------------
# applying advice: order and prune (never the fallback)


def order_candidates(cat: RegionCatalog, advice: RegionAdvice | None, *, seed: int = 0) -> tuple[list[CandidateSpec], list[CandidateSpec]]:
    """(ordered candidates to try, pruned ones). The fallback is always first and never pruned.

    Without advice the order is a seeded random permutation (the 'no advisor' baseline)."""
    others = [s for s in cat.specs if s.id != cat.fallback.id]
    if advice is None:
        rng = random.Random(seed)
        rng.shuffle(others)
        return [cat.fallback, *others], []
    pruned = [s for s in others if s.id in advice.prune or s.template in advice.prune]
    keep = [s for s in others if s not in pruned]
    rank = {n: i for i, n in enumerate(advice.priorities)}
    big = len(rank) + 1

    def key(item):
        i, s = item
        r = min(rank.get(s.id, big), rank.get(s.template, big))
        hints = advice.param_hints.get(s.template, {})
        miss = 0
        for p, vals in hints.items():
            v = dict(s.params).get(p)
            miss += 0 if v in vals else 1
            if v in vals:
                miss += vals.index(v) / (10 * max(1, len(vals)))  # earlier hinted values first
        return (r, miss, i)

    # Round-robin over the prioritised templates (each one's best-hinted point, then each one's
    # second, ...): a small measurement budget then sees every template the advice ranks instead of
    # spending itself on the first template's space. Unranked templates follow.
    groups: dict[str, list] = {}
    for item in sorted(enumerate(keep), key=key):
        s = item[1]
        groups.setdefault(s.id if s.id in rank else s.template, []).append(s)
    ranked = [g for g in groups if g in rank or groups[g][0].template in rank]
    ordered: list[CandidateSpec] = []
    for level in range(max((len(groups[g]) for g in ranked), default=0)):
        ordered.extend(groups[g][level] for g in ranked if level < len(groups[g]))
    for g in groups:
        if g not in ranked:
            ordered.extend(groups[g])
    return [cat.fallback, *ordered], pruned


# ---------------------------------------------------------------------------------------------
# advisors


class Advisor:
    name = "base"

    def advise(self, catalogs: dict[str, RegionCatalog], context: dict[str, Any]) -> Advice:
        raise NotImplementedError


class NoAdvisor(Advisor):
    name = "none"

    def advise(self, catalogs, context):
        return Advice(source=self.name)


def _pow2_at_most(n: int, choices: list[int]) -> list[int]:
    ok = [c for c in choices if c <= n]
    return ok or choices[:1]


class RuleAdvisor(Advisor):
    """Hand-written rules from decode-kernel practice; answers through the same validation path."""

    name = "rules"

    LABELS = {
        "embedding": "row gather (memory-bound, tiny)",
        "residual_rmsnorm": "residual add + RMSNorm (memory-bound, latency-bound at small batch)",
        "final_norm": "final residual add + RMSNorm",
        "qkv_proj": "QKV projection: GEMV at small batch (weight-read bound)",
        "qk_norm": "per-head RMSNorm of q and k (Qwen3)",
        "rotary": "rotary position embedding on q and k",
        "kv_write": "KV-cache store at the current position",
        "decode_attention": "grouped-query decode attention over the KV cache (cache-read bound)",
        "o_proj": "attention output projection: GEMV (weight-read bound)",
        "gate_up_silu_mul": "gate/up projection + SwiGLU: the largest GEMV per layer",
        "down_proj": "down projection: GEMV with a long reduction",
        "lm_head": "vocabulary projection: the largest single GEMV",
        "token_select": "argmax / sampling over the vocabulary",
    }

    def advise(self, catalogs, context):
        answer: dict[str, Any] = {"regions": {}}
        sms = int(context.get("sm_count") or 132)
        for name, cat in catalogs.items():
            r = cat.region
            entry: dict[str, Any] = {"label": self.LABELS.get(r.kind, r.kind)}
            pri: list[str] = []
            hints: dict[str, dict[str, list]] = {}
            risk: list[str] = []
            es = 2 if r.dtype in ("bfloat16", "float16") else 4
            if r.kind in ("qkv_proj", "o_proj", "down_proj", "lm_head", "gate_up_silu_mul"):
                n = r.attr("out_features") // (2 if r.kind == "gate_up_silu_mul" else 1)
                k = r.attr("in_features")
                # the norm-folded variants save two kernels a layer; measured like the rest
                if r.kind == "gate_up_silu_mul":
                    pri = ["cuda_gemv_swiglu", "cuda_norm_gemv_swiglu", "triton_gemv", "triton_norm_gemv",
                           "torch_fused", "cuda_swiglu", "triton_swiglu"]
                elif r.kind == "qkv_proj":
                    pri = ["triton_gemv", "cuda_norm_gemv", "cuda_gemv", "triton_norm_gemv", "torch_fused"]
                elif r.kind in ("o_proj", "down_proj"):
                    # the residual add + the next RMSNorm in the epilogue: one kernel a layer fewer
                    pri = ["triton_gemv", "cuda_gemv", "cuda_gemv_add_rmsnorm", "triton_gemv_add_rmsnorm", "torch_fused"]
                    hints["triton_gemv_add_rmsnorm"] = {"BLOCK_N": [16, 32], "BLOCK_K": [128, 256], "num_warps": [4],
                                                        "PDL": [1, 0]}
                else:
                    pri = ["triton_gemv", "cuda_gemv", "torch_fused"]
                if r.kind in ("qkv_proj", "gate_up_silu_mul"):
                    hints["triton_norm_gemv"] = {"BLOCK_N": [16, 32], "BLOCK_K": [128, 256], "num_warps": [4]}
                # enough programs to cover the SMs twice: n / BLOCK_N * SPLIT_K >= 2 * SMs
                split = 1
                while n // 64 * split < 2 * sms and split < 8 and k // (128 * split * 2) >= 1:
                    split *= 2
                hints["triton_gemv"] = {"MODE": ["reduce" if r.batch == 1 else "dot"], "BLOCK_N": [64, 32],
                                        "BLOCK_K": [128, 256], "SPLIT_K": [split, max(1, split // 2)],
                                        "num_warps": [4]}
                # one warp per ROWS output rows: a few thousand warps keep every SM streaming
                rows = [4, 2] if n >= 64 * sms else [1, 2]
                cuda_gemvs = {"gate_up_silu_mul": ("cuda_gemv_swiglu", "cuda_norm_gemv_swiglu"),
                              "qkv_proj": ("cuda_gemv", "cuda_norm_gemv"),
                              "o_proj": ("cuda_gemv", "cuda_gemv_add_rmsnorm"),
                              "down_proj": ("cuda_gemv", "cuda_gemv_add_rmsnorm")}.get(r.kind, ("cuda_gemv",))
                # PDL overlaps a GEMV's first weight loads with the kernel before it; split-K inside
                # a block feeds the long-K projections. H200, Llama-3.2-1B batch 1, chained:
                # o_proj 4.95 -> 4.28 us (PDL), QKV 6.18 -> 4.94, down_proj 12.57 -> 11.45 (KSPLIT 2 +
                # PDL), gate/up 17.87 -> 17.08 (KSPLIT 4); each still measured in the real step.
                ksplit = [2, 4] if r.kind in ("down_proj", "gate_up_silu_mul") else [1, 2]
                for template in cuda_gemvs:
                    hints[template] = {"WARPS": [4, 8], "ROWS": rows, "UNROLL": [4, 2], "PDL": [1, 0],
                                       "KSPLIT": ksplit}
                if r.kind == "gate_up_silu_mul":
                    hints["cuda_swiglu"] = {"VEC": [16 // es], "THREADS": [256], "FAST_EXP": [0]}
                    hints["triton_swiglu"] = {"BLOCK": [1024], "num_warps": [4]}
                if r.kind == "lm_head":
                    risk.append("vocabulary-sized output: a wrong tile mask shows only in the last block")
            elif r.kind in ("residual_rmsnorm", "final_norm"):
                h = r.attr("hidden")
                vec = 16 // es
                threads = _pow2_at_most(max(32, h // vec), [1024, 512, 256, 128, 64])[0]
                pri = ["cuda_add_rmsnorm", "triton_add_rmsnorm"]
                hints["cuda_add_rmsnorm"] = {"VEC": [vec, vec // 2 or 1], "THREADS": [min(256, threads), threads]}
                hints["triton_add_rmsnorm"] = {"num_warps": [4, 8]}
            elif r.kind == "rotary":
                # triton_qk_rotary_kv also writes the KV cache: the kv_write kernel goes away;
                # triton_rotary_flash_decode also attends: the attention kernels go too
                pri = ["triton_qk_rotary", "triton_qk_rotary_kv", "triton_rotary_flash_decode", "cuda_qk_rotary"]
                if r.attr("qk_norm_fusable"):
                    hints["triton_qk_rotary"] = {"HAS_NORM": [1], "HEADS": [2, 4], "num_warps": [1, 2]}
                    hints["cuda_qk_rotary"] = {"HAS_NORM": [1], "WARPS": [4]}
                    risk.append("fused q/k RMSNorm must round to the model dtype before the weight multiply, as HF")
                else:
                    hints["triton_qk_rotary"] = {"HEADS": [2, 4], "num_warps": [1, 2]}
                    hints["cuda_qk_rotary"] = {"WARPS": [4]}
                hints["triton_qk_rotary_kv"] = dict(hints["triton_qk_rotary"])  # the same kernel plus the cache write
                hints["triton_rotary_flash_decode"] = {
                    "SPLITS": _decode_split_hint(r, sms), "BLOCK_N": [32, 64], "num_warps": [4],
                    **({"HAS_NORM": [1]} if r.attr("qk_norm_fusable") else {})}
            elif r.kind == "decode_attention":
                split_hint = _decode_split_hint(r, sms)
                pri = ["triton_flash_decode", "cuda_flash_decode", "torch_sdpa"]
                hints["triton_flash_decode"] = {"SPLITS": split_hint, "BLOCK_N": [32, 64], "num_warps": [4]}
                hints["cuda_flash_decode"] = {"SPLITS": split_hint, "WARPS": [4, 8]}
                risk.append("split-K partials must be combined with the running max; empty splits contribute 0")
            elif r.kind == "kv_write":
                pri = ["triton_kv_write"]  # one launch for k and v instead of two index_copy_
                hints["triton_kv_write"] = {"HEADS": [min(8, r.attr("kv_heads"))], "num_warps": [1]}
            elif r.kind == "token_select":
                # a two-stage argmax over the vocabulary: 10.5 us against torch.argmax's 28.1 us
                # (H200, 128k logits, batch 1)
                pri = ["triton_argmax"]
                hints["triton_argmax"] = {"CHUNK": [1024, 2048], "ONE_LAUNCH": [0, 1], "PDL": [1, 0]}
                risk.append("greedy ties must resolve to the lowest index, as torch.argmax")
            # keep only names/values the catalog actually has (rules are generic)
            entry["priorities"] = [p for p in pri if p in cat.names]
            # a maintained library's kernel for the region is measured in the first round, after
            # the rules' own picks: the plan must say whether Hercules' kernels beat it
            entry["priorities"] += [t for t in cat.spaces if t in EXPERT_NAMES and t not in entry["priorities"]]
            clean_hints: dict[str, dict[str, list]] = {}
            for t, h in hints.items():
                if t not in cat.spaces:
                    continue
                th = {}
                for p, vals in h.items():
                    space = cat.spaces[t].get(p, [])
                    vv = list(dict.fromkeys(v for v in vals if v in space))
                    if vv:
                        th[p] = vv
                if th:
                    clean_hints[t] = th
            entry["param_hints"] = clean_hints
            entry["risk"] = risk
            answer["regions"][name] = entry
        return validate_answer(answer, catalogs, self.name)


SYSTEM_PROMPT = """You advise a kernel compiler for LLM decoding. You get the regions of one decode step \
(kind, shapes, dtype, FLOPs and bytes per call, calls per token) and, per region, the candidate kernel \
templates with their parameter spaces. The compiler measures candidates itself; your advice only decides \
which to try first and which to skip. Answer with ONE JSON object and nothing else:
{"regions": {"<region name>": {"label": "<short semantic label>", "priorities": ["<template name>", ...], \
"prune": ["<template name>", ...], "param_hints": {"<template name>": {"<param>": [<values from its space>]}}, \
"risk": ["<short note>", ...]}}}
Use only region names, template names, parameter names and values that appear in the request. \
Never prune the fallback."""


class HTTPAdvisor(Advisor):
    """An OpenAI-compatible chat model as advisor (vLLM, SGLang, hosted APIs)."""

    name = "http"

    def __init__(self, client=None, *, base_url=None, model=None, api_key=None, timeout: float = 60.0,
                 retries: int = 2, max_tokens: int = 4096):
        if client is None:
            from hercules.llm.client import ChatClient

            client = ChatClient.from_env(base_url=base_url, model=model, api_key=api_key, timeout=timeout,
                                         retries=retries)
        self.client = client
        self.max_tokens = max_tokens

    def request_payload(self, catalogs, context) -> dict[str, Any]:
        return {"context": context, "regions": [c.request() for c in catalogs.values()]}

    def advise(self, catalogs, context):
        from hercules.llm.client import LLMError, extract_json_object

        payload = self.request_payload(catalogs, context)
        messages = [{"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": json.dumps(payload, default=str)}]
        try:
            res = self.client.chat(messages, temperature=0.0, max_tokens=self.max_tokens)
        except LLMError as e:
            adv = Advice(source=self.name)
            msg = f"advisor unavailable, search runs unadvised: {e}"
            adv.warnings.append(msg)
            warnings.warn(f"advisor[http]: {msg}", AdvisorWarning, stacklevel=2)
            return adv
        text = res.text
        if len(text) > MAX_ANSWER_CHARS:
            adv = Advice(source=self.name, raw=text[:2000])
            msg = f"answer ignored: {len(text)} chars exceeds {MAX_ANSWER_CHARS}"
            adv.warnings.append(msg)
            warnings.warn(f"advisor[http]: {msg}", AdvisorWarning, stacklevel=2)
            return adv
        try:
            obj = extract_json_object(text)
        except ValueError as e:
            adv = Advice(source=self.name, raw=text[:2000])
            msg = f"answer ignored: malformed JSON ({e})"
            adv.warnings.append(msg)
            warnings.warn(f"advisor[http]: {msg}", AdvisorWarning, stacklevel=2)
            return adv
        adv = validate_answer(obj, catalogs, self.name)
        adv.raw = text[:20000]
        return adv


def make_advisor(kind: str | Advisor | None, **kwargs) -> Advisor:
    if isinstance(kind, Advisor):
        return kind
    if kind in (None, "rules"):
        return RuleAdvisor()
    if kind == "none":
        return NoAdvisor()
    if kind == "http":
        return HTTPAdvisor(**kwargs)
    raise ValueError(f"unknown advisor {kind!r} (rules, none, http)")
