"""Maintained libraries' kernels as decode-region candidates: listed for the regions they fit,
unavailable with a reason where the library or device is missing, checked against the reference
like every candidate, named with library and version in the plan, and part of the cache key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from click.testing import CliRunner

import hercules.compile.templates as T
from hercules.compile import advisor as A
from hercules.compile import compile_model
from hercules.compile.constraints import DeviceInfo, check
from hercules.compile.regions import ModelSpec, derive_regions
from hercules.compile.selection import cache_key, software_versions
from hercules.compile.templates import expert_templates as E

from compile_helpers import prompt

H200 = DeviceInfo(type="cuda", name="NVIDIA H200", sm=(9, 0), smem_per_block_optin=227 * 1024, sm_count=132)
QWEN3_1_7B = ModelSpec("qwen3", 2048, 6144, 28, 16, 8, 128, 151936, 1e-6, True, "bfloat16", True)

FITS = {
    "residual_rmsnorm": {"liger.fused_add_rms_norm", "quack.rms_norm"},
    "final_norm": {"liger.fused_add_rms_norm", "quack.rms_norm"},
    "qk_norm": {"liger.rms_norm", "quack.rms_norm"},
    "rotary": {"liger.rope"},
    "gate_up_silu_mul": {"liger.swiglu"},
    "decode_attention": {"flashinfer.batch_decode", "torch.sdpa.flash", "torch.sdpa.cudnn", "torch.sdpa.efficient"},
}


def _experts(region, languages=("torch", "triton", "cuda")) -> set[str]:
    return {t.name for t in T.templates_for(region, languages) if isinstance(t, T.ExpertTemplate)}


def test_experts_are_listed_for_the_regions_they_fit_and_selected_by_language():
    regions = derive_regions(QWEN3_1_7B, batch=1, capacity=256)
    assert {n: _experts(r) for n, r in regions.items() if _experts(r)} == FITS
    att, norm = regions["decode_attention"], regions["residual_rmsnorm"]
    assert _experts(att, ("torch",)) == set()  # every compile has "torch": it must not switch them on
    assert _experts(att, ("torch", "expert")) == FITS["decode_attention"]
    assert _experts(norm, ("torch", "triton")) == {"liger.fused_add_rms_norm"}  # Liger's kernels are Triton
    assert _experts(norm, ("torch", "quack")) == {"quack.rms_norm"}
    for t in T.templates_for(norm):
        if isinstance(t, T.ExpertTemplate):
            (p,) = t.space(norm)
            s = t.spec(p, norm)
            assert s.lang == t.library.label and p["library"] == t.library.distribution
            assert p["version"] == (t.library.version() or "none") and "version=" in s.id


def test_rule_advisor_measures_the_experts_in_the_first_round():
    regions = derive_regions(QWEN3_1_7B, batch=1, capacity=256)
    cats = {}
    for n, r in regions.items():
        specs = [t.spec(p, r) for t in T.templates_for(r) for p in t.space(r) if not check(t, p, r, H200)]
        cats[n] = A.make_catalog(r, specs, T.fallback_spec(r))
    adv = A.RuleAdvisor().advise(cats, {"sm_count": 132})
    assert adv.warnings == []
    pri = adv.regions["residual_rmsnorm"].priorities
    assert pri[:2] == ("cuda_add_rmsnorm", "triton_add_rmsnorm")  # the rules' own picks stay first
    assert {"liger.fused_add_rms_norm", "quack.rms_norm"} <= set(pri)
    ordered, _ = A.order_candidates(cats["decode_attention"], adv.regions["decode_attention"])
    first_round = [s.template for s in ordered[1:8]]
    assert "flashinfer.batch_decode" in first_round and "torch.sdpa.cudnn" in first_round


def test_unavailable_experts_have_reasons_and_compile_falls_back(tiny_models, cache_dir):
    """On the CPU without Triton's interpreter: Liger is refused by the constraints, QuACK and
    FlashInfer are not installed (or need CUDA); each says why; the decode still matches HF."""
    m = tiny_models["tiny-qwen3"]
    dec = compile_model(m, cache_dir=cache_dir, use_cache=False, max_seq_len=32)
    seen: dict[str, str] = {}
    for name, d in dec.plan.decisions.items():
        for cid, reason in d.rejected_examples:
            if E.is_expert_id(cid):
                assert reason, cid
                seen.setdefault(cid.split("[")[0], reason)
        for t in d.tried:
            if E.is_expert_id(t.id):
                seen.setdefault(t.template, t.status)
    assert set(seen) == set().union(*FITS.values())
    assert "Triton candidate needs a CUDA device" in seen["liger.rope"]
    for template, lib in (("quack.rms_norm", E.QUACK), ("flashinfer.batch_decode", E.FLASHINFER)):
        if lib.version() is None:
            assert f"unavailable: {lib.distribution} is not installed" in seen[template], seen[template]
    assert "needs a CUDA device" in seen["torch.sdpa.cudnn"]
    assert seen["torch.sdpa.flash"] == "ok"  # SDPA's flash backend runs on the CPU: measured like the rest
    ids = prompt(1, 7)
    assert torch.equal(dec.generate(ids, 24), m.generate(ids, max_new_tokens=24, do_sample=False))


def test_compile_json_lists_the_expert_candidates_with_versions(cache_dir):
    from hercules.compile.cli import compile_cmd

    r = CliRunner().invoke(compile_cmd, ["--preset", "tiny-llama", "--device", "cpu", "--json", "--no-cache",
                                         "--max-seq-len", "32", "--cache-dir", str(cache_dir)])
    assert r.exit_code == 0, r.output
    plan = json.loads(r.output.strip().splitlines()[-1])["plan"]
    assert plan["versions"]["liger-kernel"] == E.LIGER.version()
    assert plan["versions"]["flashinfer-python"] == (E.FLASHINFER.version() or "none")
    norm = plan["decisions"]["final_norm"]
    listed = {cid.split("[")[0]: reason for cid, reason in norm["rejected_examples"]}
    assert "liger.fused_add_rms_norm" in listed and "quack.rms_norm" in listed
    for region in E.chosen_experts(plan):  # torch.sdpa.flash may win on the CPU
        d = plan["decisions"][region]
        assert "expert " in d["why"] and d["params"]["version"] in d["why"]


def _unmasked_sdpa(variant, region):
    """SDPA called without the mask: a real kernel that attends to the whole static cache instead
    of positions 0..pos (the mistake a mask-less backend invites) -- the reference check rejects it."""

    def attention(q, k_cache, v_cache, pos, scale):
        out = torch.nn.functional.scaled_dot_product_attention(q.unsqueeze(2), k_cache, v_cache, scale=scale,
                                                               enable_gqa=True)
        return out.reshape(q.shape)

    return attention


def test_a_wrong_expert_is_rejected_with_its_error(tiny_models, cache_dir, monkeypatch):
    wrong = T.ExpertTemplate(name="torch.sdpa.unmasked", kinds=("decode_attention",), library=E.TORCH,
                             make=_unmasked_sdpa, entry="scaled_dot_product_attention without the mask")
    monkeypatch.setattr(T, "ALL_TEMPLATES", [*T.ALL_TEMPLATES, wrong])
    m = tiny_models["tiny-llama"]
    dec = compile_model(m, cache_dir=cache_dir, use_cache=False, budget=0, max_seq_len=32,
                        force={"decode_attention": "torch.sdpa.unmasked"})
    d = dec.plan.decisions["decode_attention"]
    trial = next(t for t in d.tried if t.template == "torch.sdpa.unmasked")
    assert trial.status == "invalid" and "over tolerance" in trial.reason
    assert d.implementation == "torch"
    ids = prompt(1, 5)
    assert torch.equal(dec.generate(ids, 16), m.generate(ids, max_new_tokens=16, do_sample=False))


def test_cache_key_follows_the_expert_library_versions(tmp_path, monkeypatch):
    """An upgraded library is another key (its decisions are measured again), and a plan made
    with another version does not rebuild from the cache."""
    regions = derive_regions(QWEN3_1_7B, batch=1, capacity=64)
    dev = DeviceInfo(type="cpu", name="cpu")
    before = cache_key("cfg", dev, "bfloat16", 1, 64, {})
    assert cache_key("cfg", dev, "bfloat16", 1, 64, {}) == before
    # a newer liger-kernel's metadata ahead on the path: what importlib.metadata reports after an upgrade
    meta = tmp_path / "liger_kernel-99.0.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: liger-kernel\nVersion: 99.0.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert software_versions()["liger-kernel"] == "99.0.0"
    assert cache_key("cfg", dev, "bfloat16", 1, 64, {}) != before
    rope = T.find_template("liger.rope", regions["rotary"])
    with pytest.raises(RuntimeError, match="planned with liger-kernel 0.8.5, 99.0.0 is installed"):
        rope.materialise({"library": "liger-kernel", "version": "0.8.5"}, regions["rotary"])


# -- under Triton's CPU interpreter (set before triton is imported: a subprocess) ----------------


def _interpreted(code: str, timeout: float = 600) -> dict:
    env = dict(os.environ, TRITON_INTERPRET="1", OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                       timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(E.LIGER.version() is None, reason="liger-kernel is not installed")
def test_liger_under_the_interpreter_matches_the_reference_or_says_why():
    """Liger's rotary runs under the interpreter and matches the reference in fp32 (batch 1 and 3);
    in bf16 the interpreter multiplies two bf16 operands wrongly (values ~1e37; Hercules' kernels
    widen to fp32 first), so there the check must reject it, not pass it. Its RMSNorm / SwiGLU
    kernels fail there and must be reported unavailable with the library's error -- or, should a
    Liger release run there, pass the same check."""
    out = _interpreted("""
        import json, torch
        from hercules.compile.regions import ModelSpec, derive_regions
        from hercules.compile.templates.expert_templates import EXPERT_TEMPLATES, LIGER, unavailable
        from hercules.compile import reference as ref
        from hercules.compile.validate import RegionWeights, check
        res = []
        for dtype in ("float32", "bfloat16"):
            for batch in (1, 3):
                spec = ModelSpec("qwen3", 64, 128, 2, 4, 2, 16, 512, 1e-6, False, dtype, True)
                for name, r in derive_regions(spec, batch=batch, capacity=16).items():
                    for t in EXPERT_TEMPLATES:
                        if t.library is not LIGER or not t.applies(r):
                            continue
                        for p in t.space(r):
                            why = unavailable(t, p, r, "cpu")
                            ok, _, msg = (None, 0, "") if why else check(t.materialise(p, r).fn, r, RegionWeights(),
                                                                          trials=2)
                            res.append(dict(t=t.name, region=name, dtype=dtype, batch=batch, why=why, ok=ok,
                                            msg=msg))
        # the runtime also feeds contiguous q and k (the split QKV projection's outputs), which the
        # reference check's strided views of one QKV buffer do not cover
        r = derive_regions(ModelSpec("llama", 64, 128, 2, 4, 2, 16, 512, 1e-6, False, "float32", False), batch=3,
                           capacity=16)["rotary"]
        t = next(t for t in EXPERT_TEMPLATES if t.name == "liger.rope")
        half = torch.randn(1, 8)
        cos, sin = torch.cat([half, half], -1).cos(), torch.cat([half, half], -1).sin()
        q, k = torch.randn(3, 4, 16), torch.randn(3, 2, 16)
        expect = ref.rotary(q.clone(), k.clone(), cos, sin)
        got = t.materialise(t.space(r)[0], r).fn(q, k, cos, sin)
        res.append(dict(t="contiguous", ok=all(torch.allclose(g, e, atol=1e-5) for g, e in zip(got, expect))))
        print(json.dumps(res))
    """)
    assert out.pop() == {"t": "contiguous", "ok": True}
    assert {r["t"] for r in out} == {"liger.fused_add_rms_norm", "liger.rms_norm", "liger.rope", "liger.swiglu"}
    rope = [r for r in out if r["t"] == "liger.rope"]
    assert len(rope) == 4 and all(r["ok"] is True for r in rope if r["dtype"] == "float32"), rope
    for r in rope:
        assert r["ok"] is True or "over tolerance" in r["msg"], r
    for r in out:
        if r["t"] == "liger.rope":
            continue
        if r["why"]:
            assert r["why"][0].startswith(f"unavailable: liger-kernel {E.LIGER.version()}: {r['t']} fails a trial call "
                                          "under the Triton CPU interpreter: "), r
        else:
            assert r["ok"] is True, r


@pytest.mark.skipif(E.LIGER.version() is None, reason="liger-kernel is not installed")
def test_decode_with_liger_rope_pinned_reproduces_hf_tokens(tmp_path):
    """Tiny Llama and Qwen3 (batch 2) with Liger's rotary in the decode step (interpreted; Liger
    is selected by "triton", its kernels' language): HF's greedy tokens, the plan names library
    and version, the cached plan reloads it."""
    from test_triton_templates import _decode_with_fusions_pinned

    res = _decode_with_fusions_pinned({"rotary": "liger.rope"}, tmp_path)
    for name, r in res.items():
        assert r["match"], (name, r)
        assert r["plan"]["rotary"] == f"liger.rope[library=liger-kernel,version={E.LIGER.version()}]", r["plan"]
        assert r["cached"]["hit"] and r["cached"]["match"], r["cached"]


def test_a_chosen_expert_is_named_in_the_plan(tiny_models, cache_dir):
    dec = compile_model(tiny_models["tiny-llama"], cache_dir=cache_dir, use_cache=False, budget=0, max_seq_len=32,
                        force={"decode_attention": "torch.sdpa.flash"}, step_check=False)
    plan = dec.plan.to_json()
    assert E.chosen_experts(plan) == {"decode_attention": {"template": "torch.sdpa.flash", "library": "torch",
                                                           "version": torch.__version__}}
    why = plan["decisions"]["decode_attention"]["why"]
    assert why.startswith("pinned") and f"expert torch.sdpa.flash: torch {torch.__version__}" in why
    assert "SDPBackend.FLASH_ATTENTION" in why


# -- on a CUDA GPU (skipped without one) ----------------------------------------------------------

LIGER_PINS = {"residual_rmsnorm": "liger.fused_add_rms_norm", "final_norm": "liger.fused_add_rms_norm",
              "qk_norm": "liger.rms_norm", "rotary": "liger.rope", "gate_up_silu_mul": "liger.swiglu"}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.skipif(E.LIGER.version() is None, reason="liger-kernel is not installed")
@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen3"])
def test_liger_pinned_on_the_gpu_reproduces_hf_tokens(name, cache_dir):
    """fp32, CUDA graphs: every Liger kernel in the decode step, SDPA's efficient backend for the
    attention where it passes its check; HF eager's greedy tokens."""
    from hercules.compile import build_model

    m = build_model(name, dtype="fp32", device="cuda", seed=1)
    force = {**LIGER_PINS, "decode_attention": "torch.sdpa.efficient"}
    dec = compile_model(m, device="cuda", cache_dir=cache_dir, use_cache=False, budget=0, force=force,
                        step_check=False, max_seq_len=64)
    plan = dec.plan
    for region, template in force.items():
        if region not in plan.decisions:
            continue  # qk_norm: Qwen3 only
        d = plan.decisions[region]
        trial = next((t for t in d.tried if t.template == template), None)
        reasons = [r for i, r in d.rejected_examples if i.startswith(template + "[")]
        assert trial is not None or reasons, (region, d.rejected_examples)
        if region in LIGER_PINS:
            assert trial is not None and trial.status == "ok" and d.template == template, (region, trial, d.why)
    ids = prompt(2, 7).cuda()
    assert torch.equal(dec.generate(ids, 32), m.generate(ids, max_new_tokens=32, do_sample=False))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_every_expert_is_measured_or_explained_on_the_gpu(cache_dir):
    """bf16, the experts beside PyTorch: each expert of each region it fits was measured (its time
    or its error in the plan) or rejected with a reason (a library not carried, a backend refused)."""
    from hercules.compile import build_model

    m = build_model("tiny-qwen3", dtype="bf16", device="cuda", seed=1)
    plan = compile_model(m, device="cuda", cache_dir=cache_dir, use_cache=False, max_seq_len=64,
                         languages=("torch", "expert")).plan
    for region, names in FITS.items():
        d = plan.decisions[region]
        accounted = {t.template: t.status + (f": {t.reason}" if t.reason else "") for t in d.tried}
        accounted.update({i.split("[")[0]: r for i, r in d.rejected_examples if E.is_expert_id(i)})
        assert names <= set(accounted), (region, accounted)
        assert all(accounted[n] for n in names), (region, accounted)
