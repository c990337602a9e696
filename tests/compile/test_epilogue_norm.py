"""The residual add + RMSNorm folded into the epilogue of o_proj / down_proj: when selection keeps
it (measured time against every alternative the plan has: three kernels, or the norm folded into
the projection after it), and that the runtime feeds each fused call the right norm weight.

Stand-in candidates (PyTorch references with the fused call conventions) and fixed region times
make the decisions deterministic on the CPU; the Triton kernel itself is checked under the
interpreter in test_triton_templates.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import hercules.compile.selection as S
import hercules.compile.templates as T
from hercules.compile import compile_model
from hercules.compile import reference as ref
from hercules.compile.presets import build_model
from hercules.compile.templates.base import TorchVariant

from compile_helpers import prompt


def _then_norm_linear(x, weight, residual, norm_weight, eps):
    return ref.then_norm(ref.linear)(x, weight, residual, norm_weight, eps)


def _norm_then_gate_up(x, residual, norm_weight, eps, weight, intermediate):
    return ref.norm_then(ref.gate_up_silu_mul_fused)(x, residual, norm_weight, eps, weight, intermediate)


_EPILOGUE = TorchVariant(name="stand_in_gemv_add_rmsnorm", kinds=("o_proj", "down_proj"), fn=_then_norm_linear,
                         fallback=False, fused=("residual_rmsnorm",))
_NORM_GATE_UP = TorchVariant(name="stand_in_norm_gate_up", kinds=("gate_up_silu_mul",), fn=_norm_then_gate_up,
                             fallback=False, fused=("residual_rmsnorm",))


@pytest.fixture()
def timed(monkeypatch):
    """Registers the stand-ins and returns the table of fixed times (ms, by function; 0.010 for
    every other candidate) that selection's timing reads."""
    monkeypatch.setattr(T, "ALL_TEMPLATES", [*T.ALL_TEMPLATES, _EPILOGUE, _NORM_GATE_UP])
    times: dict = {}
    monkeypatch.setattr(S, "time_region", lambda fn, arg_sets, **kw: SimpleNamespace(median_ms=times.get(fn, 0.010)))
    return times


def _model():
    """tiny-llama with every RMSNorm weight drawn at random (its own are all ones, which would not
    tell one layer's norm weight from the next one's)."""
    m = build_model("tiny-llama", dtype="fp32", device="cpu", seed=1)
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for mod in m.modules():
            if type(mod).__name__.endswith("RMSNorm"):
                mod.weight.copy_(1 + 0.5 * torch.randn(mod.weight.shape, generator=g))
    return m


def _compile(m, cache_dir, **kw):
    return compile_model(m, languages=("torch",), budget=64, step_check=False, cache_dir=cache_dir, **kw)


def test_the_epilogue_fold_is_kept_where_it_beats_both_alternatives_and_decodes_like_hf(timed, cache_dir):
    """Every plain kernel 10 us, the epilogue-fused projection 11 us, the norm folded into gate/up
    15 us: o_proj + gate/up as 11 + 10 beats 10 + min(10 + 10, 15) by more than the margin, and
    down_proj + QKV (no QKV fold here) 21 against 30. The plan folds both, no norm kernel runs
    after layer 0's, and greedy decoding reproduces HF's tokens; the cached plan reloads it."""
    timed[_then_norm_linear] = 0.011
    timed[_norm_then_gate_up] = 0.015
    m = _model()
    ids = prompt(2, 6)
    expect = m.generate(ids, max_new_tokens=12, do_sample=False)
    dec = _compile(m, cache_dir)
    d = dec.plan.decisions
    for n, cons in (("o_proj", "gate_up_silu_mul"), ("down_proj", "qkv_proj")):
        assert d[n].template == _EPILOGUE.name and d[n].fuses == ["residual_rmsnorm"], d[n].why
        assert f"0.0110 + 0.0100 ms ({cons} plain)" in d[n].why, d[n].why
        assert ref.add_norm_fused_key(n) in dec.runtime.impls
    assert "vs 0.0250 ms without" in d["o_proj"].why and "vs 0.0300 ms without" in d["down_proj"].why
    assert d["gate_up_silu_mul"].fuses == [], "gate/up reads o_proj's norm: no second fold"
    assert d["final_norm"].fused_into == "down_proj"
    assert d["residual_rmsnorm"].fused_into is None  # layer 0's input norm still runs it
    assert torch.equal(dec.generate(ids, 12), expect)
    _check_budget(dec)
    again = _compile(m, cache_dir)
    assert again.plan.cache_hit
    assert sorted(k for k in again.runtime.impls if "+" in k) == ["down_proj+residual_rmsnorm",
                                                                   "o_proj+residual_rmsnorm"]
    assert torch.equal(again.generate(ids, 12), expect)


def test_the_norm_folded_into_gate_up_wins_when_it_is_faster(timed, cache_dir):
    """The norm folded into gate/up at 11 us: o_proj + folded gate/up (10 + 11) ties the epilogue
    fold (11 + 10), so the epilogue fold is not kept on o_proj (it must win by the margin) and
    gate/up keeps its own fold; down_proj's still wins (QKV has no fold here)."""
    timed[_then_norm_linear] = 0.011
    timed[_norm_then_gate_up] = 0.011
    m = _model()
    dec = _compile(m, cache_dir)
    d = dec.plan.decisions
    assert d["o_proj"].fuses == [] and d["o_proj"].template != _EPILOGUE.name
    assert d["gate_up_silu_mul"].template == _NORM_GATE_UP.name, d["gate_up_silu_mul"].why
    assert d["down_proj"].template == _EPILOGUE.name
    assert sorted(k for k in dec.runtime.impls if "+" in k) == ["down_proj+residual_rmsnorm",
                                                                 "residual_rmsnorm+gate_up_silu_mul"]
    ids = prompt(1, 5)
    assert torch.equal(dec.generate(ids, 12), m.generate(ids, max_new_tokens=12, do_sample=False))


def test_a_slow_epilogue_fold_is_not_kept_and_pins_decide_between_the_two_folds(timed, cache_dir):
    """At 25 us the fused projection loses (25 + 10 against 30): the plan keeps the plain kernels;
    pinned, it is taken anyway. At 11 us it would win, but a pin on gate/up's norm fold stands and
    o_proj stays plain; with both pinned the epilogue's pin is taken and gate/up runs plain (one
    norm, made once). A pin on the norm kernel keeps the projections before it plain."""
    timed[_then_norm_linear] = 0.025
    m = _model()
    d = _compile(m, cache_dir, use_cache=False).plan.decisions
    assert d["o_proj"].fuses == [] and d["down_proj"].fuses == []
    assert d["final_norm"].fused_into is None
    d = _compile(m, cache_dir, use_cache=False, force={"o_proj": _EPILOGUE.name}).plan.decisions
    assert d["o_proj"].template == _EPILOGUE.name and "(pinned)" in d["o_proj"].why
    assert d["down_proj"].fuses == []
    timed[_then_norm_linear] = 0.011
    d = _compile(m, cache_dir, use_cache=False, force={"gate_up_silu_mul": _NORM_GATE_UP.name}).plan.decisions
    assert d["o_proj"].fuses == [] and d["gate_up_silu_mul"].template == _NORM_GATE_UP.name
    assert d["down_proj"].template == _EPILOGUE.name  # no pin on QKV: down_proj's fold is measured as before
    d = _compile(m, cache_dir, use_cache=False,
                 force={"o_proj": _EPILOGUE.name, "gate_up_silu_mul": _NORM_GATE_UP.name}).plan.decisions
    assert d["o_proj"].template == _EPILOGUE.name and d["gate_up_silu_mul"].fuses == []
    # a pin on the norm kernel itself stands too (down_proj's fold would also take the final norm's)
    timed[_norm_then_gate_up] = 0.015  # o_proj's fold wins unless a pin stops it, as in the first test
    for pin in ("residual_rmsnorm", "final_norm"):
        d = _compile(m, cache_dir, use_cache=False, force={pin: "torch"}).plan.decisions
        assert d["down_proj"].fuses == [], pin
        assert (d["o_proj"].fuses == []) == (pin == "residual_rmsnorm"), pin


def _check_budget(dec):
    """The step budget of the plan above (tiny-llama: 3 layers): o_proj and down_proj launch 3
    kernels each that also move the norm's bytes, the norm kernel runs once (layer 0's input norm),
    the final norm not at all; the step's totals against a wall time."""
    from hercules.compile.bench import budget_table, region_budget
    from hercules.compile.regions import derive_regions

    plan = dec.plan
    regions = derive_regions(dec.runtime.spec, batch=plan.batch, capacity=plan.capacity)
    b = region_budget(plan, regions)["regions"]
    assert "final_norm" not in b and b["residual_rmsnorm"]["calls"] == 1
    for n in ("o_proj", "down_proj"):
        assert b[n]["calls"] == 3 and b[n]["ms"] == pytest.approx(3 * 0.011)
        assert b[n]["bytes"] == 3 * (regions[n].bytes + regions["residual_rmsnorm"].bytes)
        assert b[n]["gb_s"] == pytest.approx(b[n]["bytes"] / (b[n]["ms"] * 1e6))
    assert b["qkv_proj"]["calls"] == 3 and b["lm_head"]["calls"] == 1
    plan.step_check = {"plan_ms": 0.5, "fallback_ms": 0.9, "kept": True}
    budget = region_budget(plan, regions)
    assert budget["kernel_ms"] == pytest.approx(sum(r["ms"] for r in budget["regions"].values()))
    assert sum(r["share"] for r in budget["regions"].values()) == pytest.approx(1.0)
    assert budget["launch_gap_ms"] == pytest.approx(0.5 - budget["kernel_ms"])
    assert budget["kernels_per_step"] == sum(r["calls"] for r in budget["regions"].values())
    text = budget_table(budget)
    assert "o_proj" in text and f"{budget['kernels_per_step']} region calls" in text and "wall 500.0 us" in text


_WIDE_ROWS = """
import json, torch
from hercules.compile import reference as ref
from hercules.compile.templates import triton_kernels as k
g = torch.Generator().manual_seed(0)
out = []
for dtype in (torch.float32, torch.bfloat16):
    # N 2304: three 1024-wide passes of the normalising program, the last one masked; K 96: a
    # masked second K tile; 9 column tiles of 256 take the tickets
    x, w = torch.randn(3, 96, generator=g).to(dtype), (torch.randn(2304, 96, generator=g) * 0.1).to(dtype)
    r, nw = torch.randn(3, 2304, generator=g).to(dtype), (1 + 0.5 * torch.randn(2304, generator=g)).to(dtype)
    t = k.Tickets(1)
    expect = ref.then_norm(ref.linear)(x, w, r, nw, 1e-5)
    for call in range(2):  # the second call sees the counter the first one reset
        got = k.gemv_add_rmsnorm(x, w, r, nw, 1e-5, BLOCK_N=256, BLOCK_K=64, num_warps=4, tickets=t)
        ok, err, msg = ref.compare(list(got), list(expect), dtype)
        out.append(dict(dtype=str(dtype), call=call, ok=ok, err=err, msg=msg, ticket=int(t.get(x.device)[0])))
print(json.dumps(out))
"""


def test_the_normalising_program_covers_rows_wider_than_one_pass_under_interpreter():
    """triton_gemv_add_rmsnorm's last program normalises rows wider than its 1024-column pass (the
    Llama / Qwen3 hidden sizes take two to four passes; the self-check's tiny models one), called
    twice on one ticket counter, fp32 and bf16, against the reference."""
    import json
    import os
    import subprocess
    import sys

    pytest.importorskip("triton")
    p = subprocess.run([sys.executable, "-c", _WIDE_ROWS], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, TRITON_INTERPRET="1", OMP_NUM_THREADS="1"))
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert len(out) == 4 and all(r["ok"] and r["ticket"] == 0 for r in out), out
