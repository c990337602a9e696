"""Measured selection: the plan, the budget, validation failures, pins and the decision cache."""

from __future__ import annotations

import json
import time

import pytest
import torch

import hercules.compile.templates as T
from hercules.compile import compile_model
from hercules.compile.templates.base import TorchVariant

from compile_helpers import prompt


def test_plan_records_choice_reason_and_times(tiny_models, cache_dir):
    dec = compile_model(tiny_models["tiny-qwen3"], cache_dir=cache_dir)
    plan = dec.plan
    js = json.loads(json.dumps(plan.to_json()))
    assert set(js["decisions"]) == set(plan.implementations())
    for name, d in plan.decisions.items():
        assert d.implementation and d.why
        assert d.tried and d.tried[0].id == "torch" and d.tried[0].median_ms > 0  # fallback always measured
        if d.implementation != "torch" and not d.fused_into:
            assert d.chosen_ms < d.fallback_ms
    assert plan.measurements <= plan.budget
    assert plan.trace[0]["measurements"] == 0
    est = [t["step_estimate_ms"] for t in plan.trace]
    assert all(b <= a + 1e-12 for a, b in zip(est, est[1:]))  # best-so-far only improves
    assert "rows" not in plan.table() and "decode_attention" in plan.table()
    assert plan.versions["torch"] == torch.__version__


def test_second_compile_hits_the_decision_cache(tiny_models, cache_dir):
    m = tiny_models["tiny-llama"]
    t0 = time.perf_counter()
    first = compile_model(m, cache_dir=cache_dir)
    t_first = time.perf_counter() - t0
    assert not first.plan.cache_hit
    files = list(cache_dir.glob("*.json"))
    assert len(files) == 1
    t0 = time.perf_counter()
    second = compile_model(m, cache_dir=cache_dir)
    t_second = time.perf_counter() - t0
    assert second.plan.cache_hit and second.plan.cache_key == first.plan.cache_key
    assert second.plan.implementations() == first.plan.implementations()
    assert t_second < t_first
    ids = prompt(1, 4)
    assert torch.equal(second.generate(ids, 32), m.generate(ids, max_new_tokens=32, do_sample=False))
    # another batch size (or dtype, GPU, versions) is another key
    third = compile_model(m, cache_dir=cache_dir, batch_size=2)
    assert not third.plan.cache_hit and third.plan.cache_key != first.plan.cache_key
    # a corrupted entry is ignored, not fatal
    files[0].write_text("{ not json")
    fourth = compile_model(m, cache_dir=cache_dir)
    assert not fourth.plan.cache_hit
    assert not compile_model(m, cache_dir=cache_dir, use_cache=False).plan.cache_hit


def test_budget_zero_keeps_every_fallback(tiny_models, cache_dir):
    dec = compile_model(tiny_models["tiny-llama"], cache_dir=cache_dir, budget=0)
    assert dec.plan.measurements == 0
    assert set(dec.plan.implementations().values()) == {"torch"}
    assert all(d.not_measured == 0 or "no other candidate" in d.why or "fallback" in d.why
               for d in dec.plan.decisions.values())


@pytest.fixture()
def extra_templates(monkeypatch):
    """Register extra PyTorch 'candidates' for the test: a fast wrong one, a crashing one."""

    def wrong(x, weight):  # fast and wrong
        return torch.zeros(x.shape[0], weight.shape[0], dtype=x.dtype)

    def crash(x, weight):
        raise RuntimeError("kernel exploded")

    def off_by_a_bit(x, weight):
        return torch.nn.functional.linear(x, weight) * 1.01

    extra = [TorchVariant(name="wrong_fast", kinds=("o_proj",), fn=wrong, fallback=False),
             TorchVariant(name="crashes", kinds=("o_proj",), fn=crash, fallback=False),
             TorchVariant(name="off_by_1pct", kinds=("o_proj",), fn=off_by_a_bit, fallback=False)]
    monkeypatch.setattr(T, "ALL_TEMPLATES", [*T.ALL_TEMPLATES, *extra])
    return extra


def test_invalid_candidates_are_recorded_and_never_chosen(tiny_models, cache_dir, extra_templates):
    m = tiny_models["tiny-llama"]
    dec = compile_model(m, cache_dir=cache_dir, advisor="none", budget=50, use_cache=False)
    d = dec.plan.decisions["o_proj"]
    status = {t.template: t for t in d.tried}
    assert status["wrong_fast"].status == "invalid" and "over tolerance" in status["wrong_fast"].reason
    assert status["crashes"].status == "invalid" and "kernel exploded" in status["crashes"].reason
    assert status["off_by_1pct"].status == "invalid"
    assert d.implementation == "torch" and "none of 3 measured candidates was valid" in d.why
    ids = prompt(1, 6)
    assert torch.equal(dec.generate(ids, 32), m.generate(ids, max_new_tokens=32, do_sample=False))


def test_a_pin_must_still_pass_the_check(tiny_models, cache_dir, extra_templates):
    dec = compile_model(tiny_models["tiny-llama"], cache_dir=cache_dir, force={"o_proj": "wrong_fast"},
                        budget=0, use_cache=False)
    d = dec.plan.decisions["o_proj"]
    assert d.implementation == "torch"
    assert [t.template for t in d.tried] == ["torch", "wrong_fast"]
    dec = compile_model(tiny_models["tiny-llama"], cache_dir=cache_dir, force={"qkv_proj": "torch_fused"},
                        budget=0, use_cache=False, step_check=False)
    assert dec.plan.decisions["qkv_proj"].implementation == "torch_fused"
    assert "pinned" in dec.plan.decisions["qkv_proj"].why


def test_step_check_is_recorded(tiny_models, cache_dir):
    dec = compile_model(tiny_models["tiny-qwen3"], cache_dir=cache_dir, use_cache=False)
    sc = dec.plan.step_check
    assert sc is not None
    if "kept" in sc:
        assert sc["plan_ms"] > 0 and sc["fallback_ms"] > 0
        if not sc["kept"]:
            assert set(dec.plan.implementations().values()) == {"torch"}
