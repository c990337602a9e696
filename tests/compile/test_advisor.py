"""Advisor answers are validated against a schema; invalid, partial or hostile advice is ignored
with a warning and can only reorder / prune the measured search, never change correctness."""

from __future__ import annotations

import json

import pytest
import torch

from hercules.compile import advisor as A
from hercules.compile.constraints import DeviceInfo, check
from hercules.compile.regions import ModelSpec, derive_regions
from hercules.compile.templates import fallback_spec, templates_for

from compile_helpers import Scripted, prompt

H200 = DeviceInfo(type="cuda", name="NVIDIA H200", sm=(9, 0), smem_per_block_optin=227 * 1024, sm_count=132)


@pytest.fixture(scope="module")
def catalogs():
    spec = ModelSpec("qwen3", 2048, 6144, 28, 16, 8, 128, 151936, 1e-6, True, "bfloat16", True)
    regs = derive_regions(spec, batch=1, capacity=256)
    cats = {}
    for n, r in regs.items():
        specs = [t.spec(p, r) for t in templates_for(r) for p in t.space(r) if not check(t, p, r, H200)]
        cats[n] = A.make_catalog(r, specs, fallback_spec(r))
    return cats


def test_rule_advisor_answer_is_valid_and_useful(catalogs):
    adv = A.RuleAdvisor().advise(catalogs, {"sm_count": 132})
    assert adv.warnings == []
    assert set(adv.regions) == set(catalogs)
    att = adv.regions["decode_attention"]
    assert att.priorities[0] == "triton_flash_decode" and att.param_hints["triton_flash_decode"]["SPLITS"][0] == 8
    assert adv.regions["rotary"].param_hints["triton_qk_rotary"]["HAS_NORM"] == (1,)
    ordered, pruned = A.order_candidates(catalogs["decode_attention"], att)
    assert ordered[0].id == "torch"  # the fallback always first
    assert ordered[1].template == "triton_flash_decode" and dict(ordered[1].params)["SPLITS"] == 8


def test_valid_llm_style_answer_orders_and_prunes(catalogs):
    answer = {"regions": {"o_proj": {"label": "GEMV", "priorities": ["triton_gemv"],
                                     "prune": [], "param_hints": {"triton_gemv": {"BLOCK_K": [256]}},
                                     "risk": ["none"]},
                          "decode_attention": {"prune": ["cuda_flash_decode"], "priorities": ["torch_sdpa"]}}}
    adv = A.validate_answer(answer, catalogs, "test")
    assert adv.warnings == [] and set(adv.regions) == {"o_proj", "decode_attention"}
    ordered, pruned = A.order_candidates(catalogs["decode_attention"], adv.regions["decode_attention"])
    assert ordered[0].id == "torch" and ordered[1].id == "torch_sdpa"
    assert pruned and all(p.template == "cuda_flash_decode" for p in pruned)
    assert not any(o.template == "cuda_flash_decode" for o in ordered)
    o, _ = A.order_candidates(catalogs["o_proj"], adv.regions["o_proj"])
    gemv = [s for s in o if s.template == "triton_gemv"]
    assert dict(gemv[0].params)["BLOCK_K"] == 256


HOSTILE = [
    ("not an object", "regions"),
    ({"regions": []}, None),
    ({"regions": {"o_proj": {"priorities": ["rm -rf /", "triton_gemv"]}}}, "unknown candidate"),
    ({"regions": {"o_proj": {"priorities": ["triton_gemv"] * 100000}}}, "more than"),
    ({"regions": {"o_proj": {"priorities": "triton_gemv"}}}, "must be a list"),
    ({"regions": {"o_proj": {"priorities": [1, 2]}}}, "not a string"),
    ({"regions": {"o_proj": {"prune": ["torch"]}}}, "fallback"),
    ({"regions": {"o_proj": {"label": "x" * 1000}}}, "label"),
    ({"regions": {"o_proj": {"label": 42}}}, "label"),
    ({"regions": {"o_proj": {"param_hints": {"triton_gemv": {"SPLIT_K": [3]}}}}}, "outside the space"),
    ({"regions": {"o_proj": {"param_hints": {"triton_gemv": {"EVIL": [1]}}}}}, "unknown parameter"),
    ({"regions": {"o_proj": {"param_hints": {"os.system": {}}}}}, "unknown template"),
    ({"regions": {"o_proj": {"risk": ["a" * 5000]}}}, "risk"),
    ({"regions": {"o_proj": {"priorities": ["triton_gemv"], "prune": ["triton_gemv"]}}}, "both"),
    ({"regions": {"o_proj": {"__class__": "x"}}}, "unknown keys"),
    ({"regions": {"not_a_region": {"label": "x"}}}, "unknown region"),
    ({"regions": {"o_proj": ["label"]}}, "not an object"),
]


@pytest.mark.parametrize("answer, needle", HOSTILE)
def test_invalid_and_hostile_answers_are_ignored_with_a_warning(catalogs, answer, needle):
    with pytest.warns(A.AdvisorWarning):
        adv = A.validate_answer(answer, catalogs, "test")
    assert adv.regions == {}  # nothing accepted
    assert adv.warnings
    if needle:
        assert needle in " ".join(adv.warnings)


def test_partial_answer_keeps_only_the_valid_regions(catalogs):
    answer = {"regions": {"o_proj": {"priorities": ["triton_gemv"]},
                          "down_proj": {"priorities": ["nonexistent"]}}}
    with pytest.warns(A.AdvisorWarning, match="down_proj"):
        adv = A.validate_answer(answer, catalogs, "test")
    assert set(adv.regions) == {"o_proj"}


def test_no_advisor_is_a_seeded_random_order(catalogs):
    cat = catalogs["down_proj"]
    a, _ = A.order_candidates(cat, None, seed=1)
    b, _ = A.order_candidates(cat, None, seed=1)
    c, _ = A.order_candidates(cat, None, seed=2)
    assert [s.id for s in a] == [s.id for s in b] != [s.id for s in c]
    assert a[0].id == "torch" and sorted(s.id for s in a) == sorted(s.id for s in cat.specs)


class HostileAdvisor(A.Advisor):
    """Prunes everything it can, prioritises junk, and hints values outside the space."""

    name = "hostile"

    def advise(self, catalogs, context):
        answer = {"regions": {}}
        for n, c in catalogs.items():
            answer["regions"][n] = {"prune": sorted(c.names), "priorities": ["../../etc/passwd"],
                                    "param_hints": {"torch": {"x": [1]}}, "label": "\x00" * 5}
        answer["regions"]["decode_attention"] = {"prune": [s for s in sorted(catalogs["decode_attention"].names)
                                                           if s != "torch"]}
        return A.validate_answer(answer, catalogs, self.name)


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen3"])
def test_hostile_advice_never_changes_correctness(tiny_models, cache_dir, name):
    from hercules.compile import compile_model

    m = tiny_models[name]
    ids = prompt(1, 9, seed=7)
    ref = m.generate(ids, max_new_tokens=32, do_sample=False)
    with pytest.warns(A.AdvisorWarning):
        dec = compile_model(m, advisor=HostileAdvisor(), cache_dir=cache_dir)
    assert torch.equal(dec.generate(ids, 32), ref)
    plan = dec.plan
    assert plan.advisor_warnings
    # the one valid entry (prune everything but the fallback in decode_attention) only pruned
    d = plan.decisions["decode_attention"]
    assert d.implementation == "torch" and d.pruned >= 1


# -- the HTTP advisor against a scripted local server -----------------------------------------


def http_advisor(server, **kw):
    return A.HTTPAdvisor(base_url=server.base_url, model="scripted", api_key="k", timeout=5, retries=0, **kw)


def test_http_advisor_uses_a_valid_answer(llm_server, catalogs):
    """Scripted local server (127.0.0.1, random port) plays a valid advice JSON in a code fence."""
    answer = {"regions": {"decode_attention": {"label": "GQA decode", "priorities": ["cuda_flash_decode"],
                                               "param_hints": {"cuda_flash_decode": {"SPLITS": [8]}},
                                               "risk": ["combine splits carefully"]}}}
    llm_server.play(Scripted(content="Here you go:\n```json\n" + json.dumps(answer) + "\n```"))
    adv = http_advisor(llm_server).advise(catalogs, {"device": "H200"})
    assert adv.warnings == [] and adv.regions["decode_attention"].label == "GQA decode"
    sent = llm_server.requests[0]["json"]
    assert sent["messages"][0]["role"] == "system" and "JSON" in sent["messages"][0]["content"]
    payload = json.loads(sent["messages"][1]["content"])
    kinds = {r["kind"] for r in payload["regions"]}
    assert "decode_attention" in kinds and "qk_norm" in kinds
    att = next(r for r in payload["regions"] if r["kind"] == "decode_attention")
    assert "cuda_flash_decode" in att["candidate_templates"] and att["fallback"] == "torch"
    ordered, _ = A.order_candidates(catalogs["decode_attention"], adv.regions["decode_attention"])
    assert ordered[1].template == "cuda_flash_decode" and dict(ordered[1].params)["SPLITS"] == 8


@pytest.mark.parametrize("content, needle", [
    ("I think you should use Triton everywhere.", "malformed JSON"),
    ('{"regions": {"decode_attention": {"priorities": ', "malformed JSON"),
    ('{"advice": "use cuda"}', "regions"),
    ('{"regions": {"decode_attention": {"priorities": ["cuda_flash_decode"], "prune": ["torch"]}}}', "fallback"),
    (json.dumps({"regions": {"lm_head": {"priorities": [f"cand{i}" for i in range(5000)]}}}), "lm_head"),
])
def test_http_advisor_ignores_bad_answers(llm_server, catalogs, content, needle):
    """Scripted local server plays malformed / schema-violating / hostile answers."""
    llm_server.play(Scripted(content=content))
    with pytest.warns(A.AdvisorWarning):
        adv = http_advisor(llm_server).advise(catalogs, {})
    assert adv.regions == {}
    assert needle in " ".join(adv.warnings)


def test_http_advisor_server_errors_mean_unadvised(llm_server, catalogs):
    llm_server.play(Scripted(503, raw_body=b"overloaded"))
    with pytest.warns(A.AdvisorWarning, match="unavailable"):
        adv = http_advisor(llm_server).advise(catalogs, {})
    assert adv.regions == {}


def test_http_advisor_oversized_answer(llm_server, catalogs):
    llm_server.play(Scripted(content="{" + " " * (A.MAX_ANSWER_CHARS + 10) + "}"))
    with pytest.warns(A.AdvisorWarning, match="exceeds"):
        adv = http_advisor(llm_server).advise(catalogs, {})
    assert adv.regions == {}


def test_compile_with_http_advisor_from_env(llm_server, monkeypatch, tiny_models, cache_dir):
    """End to end: compile_model(advisor="http") reads HERCULES_LLM_* and talks to the scripted
    local server; a hostile answer is ignored and the tokens still equal HF eager."""
    from hercules.compile import compile_model

    monkeypatch.setenv("HERCULES_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("HERCULES_LLM_MODEL", "scripted")
    hostile = {"regions": {"qkv_proj": {"prune": ["torch"], "priorities": ["evil"]},
                           "gate_up_silu_mul": {"label": "SwiGLU GEMV", "priorities": ["torch_fused"]}}}
    llm_server.play(Scripted(content=json.dumps(hostile)))
    m = tiny_models["tiny-llama"]
    ids = prompt(1, 5, seed=8)
    with pytest.warns(A.AdvisorWarning, match="qkv_proj"):
        dec = compile_model(m, advisor="http", cache_dir=cache_dir)
    assert len(llm_server.requests) == 1
    assert torch.equal(dec.generate(ids, 32), m.generate(ids, max_new_tokens=32, do_sample=False))
    assert dec.plan.advisor == "http"
    assert dec.plan.decisions["gate_up_silu_mul"].label == "SwiGLU GEMV"
    assert dec.plan.decisions["qkv_proj"].label is None
