"""Triton templates under the CPU interpreter (TRITON_INTERPRET=1 must be set before triton is
imported, so the checks run in subprocesses: one for the self-checks, one for the decodes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import side_by_side

pytest.importorskip("triton")


def _run(code: str, arg: str, timeout: float) -> subprocess.CompletedProcess:
    """``code`` run by Python under the interpreter, with ``arg`` as its one argument."""
    env = dict(os.environ, TRITON_INTERPRET="1", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, env=env, timeout=timeout)


NON_GEMV = "triton_add_rmsnorm,triton_swiglu,triton_qk_rotary,triton_qk_rotary_kv,triton_flash_decode,triton_kv_write"

# Interpreted, each case alone on the loaded 2-core machine: fp32 non-GEMV 13.8 s, bf16 non-GEMV
# 9.0 s, rotary + attention 5.8 s, argmax 0.9 s; the two GEMV cases 127 and 97 s (every program of
# their grids runs in Python), so those run on demand (scripts/slow-tests). CI keeps an interpreted
# split-K GEMV against its reference (test_argmax_splitk_pdl.py, ~11 s). The fp32 non-GEMV case and
# the bf16 epilogue case run on demand too: CI keeps the same templates in the other dtype.
SELFCHECKS = [
    pytest.param("float32", "1,2", NON_GEMV, "", marks=pytest.mark.ondemand),
    # the GEMV in both modes, with and without split-K, plain and with the SwiGLU epilogue
    pytest.param("float32", "1,2", "triton_gemv", "gate_up_silu_mul,o_proj", marks=pytest.mark.ondemand),
    ("bfloat16", "2", NON_GEMV, ""),
    # residual add + RMSNorm folded into QKV and gate/up (with the SwiGLU epilogue)
    pytest.param("bfloat16", "1,3", "triton_norm_gemv", "", marks=pytest.mark.ondemand),
    # rotary + KV write + attention in one kernel (fp32: the interpreter truncates to bf16 where
    # GPUs round to nearest, and attention compounds that past the bf16 tolerance)
    ("float32", "1,3", "triton_rotary_flash_decode", ""),
    # greedy token selection: the first (one-launch) and the last (two-launch) point of the space
    ("bfloat16", "1,2", "triton_argmax", ""),
    # residual add + RMSNorm in o_proj's and down_proj's epilogue (the last program normalises):
    # 8 points each, ~4 s (fp32) and ~5 s (bf16) interpreted
    ("float32", "1,3", "triton_gemv_add_rmsnorm", ""),
    pytest.param("bfloat16", "1,3", "triton_gemv_add_rmsnorm", "", marks=pytest.mark.ondemand),
]


def _selfcheck_args(dtype, batches, templates, regions) -> list[str]:
    per_template = "2" if templates == "triton_argmax" else "1"
    args = ["--lang", "triton", "--device", "cpu", "--dtype", dtype, "--per-template", per_template,
            "--batches", batches, "--templates", templates]
    return args + (["--regions", regions] if regions else [])


_SELFCHECK = """
import contextlib, io, json, sys, traceback
from hercules.compile import selfcheck
out = {}
for case, argv in json.loads(sys.argv[1]).items():
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            rc = selfcheck.main(argv)
        out[case] = dict(rc=rc, stdout=buf.getvalue())
    except Exception:
        out[case] = dict(rc=None, stdout=buf.getvalue(), error=traceback.format_exc())
print(json.dumps(out))
"""


def _selfcheck_cases(session: pytest.Session) -> dict:
    return {i.callspec.id: _selfcheck_args(**i.callspec.params) for i in session.items
            if i.module.__name__ == __name__
            and i.originalname == "test_triton_templates_match_references_under_interpreter"}


def _run_selfchecks(request) -> dict:
    """``hercules.compile.selfcheck``'s main (its stdout and return value) for each selected case
    of the test below, all in one interpreted subprocess: one start-up and import of torch and
    triton (~3 s on the CI machine) instead of one per case. main seeds torch itself."""
    p = _run(_SELFCHECK, json.dumps(_selfcheck_cases(request.session)), timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


side_by_side.register("interpreted triton self-checks", lambda session: bool(_selfcheck_cases(session)),
                      _run_selfchecks)


@pytest.fixture(scope="module")
def selfchecks(request) -> dict:
    return side_by_side.result("interpreted triton self-checks", request)


@pytest.mark.parametrize("dtype, batches, templates, regions", SELFCHECKS)
def test_triton_templates_match_references_under_interpreter(dtype, batches, templates, regions, selfchecks, request):
    p = selfchecks[request.node.callspec.id]
    assert p["stdout"], p.get("error")
    out = json.loads(p["stdout"])
    bad = [r for r in out["results"] if r["ok"] is not True]
    assert not bad, bad[:5]
    kinds = {(r["template"], r["region"]) for r in out["results"]}
    if templates == NON_GEMV:
        assert ("triton_flash_decode", "decode_attention") in kinds
        assert ("triton_qk_rotary", "rotary") in kinds
        assert ("triton_add_rmsnorm", "final_norm") in kinds
        assert ("triton_swiglu", "gate_up_silu_mul") in kinds
        assert ("triton_kv_write", "kv_write") in kinds
        # fused q/k-norm + rotary was exercised on the Qwen3 shapes
        assert any(r["template"] == "triton_qk_rotary" and r["params"]["HAS_NORM"] == 1 for r in out["results"])
        # and the rotary that writes the KV cache, with and without the norm
        assert {r["params"]["HAS_NORM"] for r in out["results"] if r["template"] == "triton_qk_rotary_kv"} == {0, 1}
    elif templates == "triton_rotary_flash_decode":
        rows = [r for r in out["results"] if r["template"] == templates]
        assert {r["params"]["HAS_NORM"] for r in rows} == {0, 1}  # Llama without, Qwen3 with the q/k norm
        assert {r["params"]["SPLITS"] > 1 for r in rows} == {False, True}  # direct output and split + combine
    elif templates == "triton_argmax":
        assert kinds == {("triton_argmax", "token_select")}
        assert {r["params"]["ONE_LAUNCH"] for r in out["results"]} == {0, 1}
    elif templates == "triton_norm_gemv":
        assert kinds == {("triton_norm_gemv", "qkv_proj"), ("triton_norm_gemv", "gate_up_silu_mul")}
    elif templates == "triton_gemv_add_rmsnorm":
        assert kinds == {(templates, "o_proj"), (templates, "down_proj")}
        # batch 1 and 3 on both models, with one and with several column tiles' tickets
        assert {(r["arch"], r["batch"]) for r in out["results"]} == {(a, b) for a in ("llama", "qwen3") for b in (1, 3)}
        assert len(out["results"]) == 8
    else:
        modes = {(r["params"]["MODE"], r["params"]["SPLIT_K"] > 1) for r in out["results"] if r["template"] == "triton_gemv"}
        assert modes == {("reduce", False), ("reduce", True), ("dot", False), ("dot", True)}
    assert p["rc"] == 0


# Pinned points with few programs per launch: Triton's interpreter runs each program of a grid in
# Python, so a decode step's time grows with the grid. Two splits keep the split + combine path,
# BLOCK_N 64 keeps several column tiles on every projection (128 to 768 output rows).
_FLASH_TWO_SPLITS = "triton_flash_decode[BLOCK_N=32,SPLITS=2,num_warps=4]"
_NORM_GEMV_WIDE = "triton_norm_gemv[BLOCK_K=128,BLOCK_N=64,PDL=0,num_warps=8]"
_ROTARY_FLASH_TWO_SPLITS = [f"triton_rotary_flash_decode[BLOCK_N=32,HAS_NORM={n},SPLITS=2,num_warps=4]" for n in (0, 1)]

_PINNED: dict[str, dict] = {}  # test name -> the decode it checks (force, models)


def _decodes(force: dict, models=("tiny-llama", "tiny-qwen3"), norms: bool = False):
    """Registers the pinned decode a test reads through the ``decoded`` fixture; ``norms``: every
    RMSNorm weight of the model drawn at random first (the tiny models' are all ones, which cannot
    tell one norm's weight from another's)."""
    def register(test):
        _PINNED[test.__name__] = dict(force=force, models=list(models), norms=norms)
        return test
    return register


_DECODE = """
import json, sys, traceback, torch
torch.set_num_threads(1)
from hercules.compile import compile_model, build_model
out = {}
for test, run in json.loads(sys.argv[1]).items():
    res = out[test] = {}
    try:
        for name in run["models"]:
            m = build_model(name, seed=1)
            if run.get("norms"):
                g = torch.Generator().manual_seed(5)
                with torch.no_grad():
                    for mod in m.modules():
                        if type(mod).__name__.endswith("RMSNorm"):
                            mod.weight.copy_(1 + 0.5 * torch.randn(mod.weight.shape, generator=g))
            ids = torch.randint(0, 512, (2, 6), generator=torch.Generator().manual_seed(0))
            ref = m.generate(ids, max_new_tokens=10, do_sample=False)
            kw = dict(languages=("torch", "triton"), budget=0, force=run["force"], max_seq_len=32, step_check=False,
                      batch_size=2, cache_dir=run["cache_dir"])
            dec = compile_model(m, **kw)
            gen = dec.generate(ids, 10)
            res[name] = dict(match=bool(torch.equal(gen, ref)), plan=dec.plan.implementations(),
                             fuses={k: d.fuses for k, d in dec.plan.decisions.items() if d.fuses},
                             fused_into={k: d.fused_into for k, d in dec.plan.decisions.items() if d.fused_into},
                             impls=sorted(k for k in dec.runtime.impls if "+" in k),
                             fused=dec.runtime.fused_qk_rotary)
            # the reloaded plan: the same kernels, rebuilt (ticket counters made anew), over 3 steps
            again = compile_model(m, **kw)
            res[name]["cached"] = dict(hit=again.plan.cache_hit,
                                       match=bool(torch.equal(again.generate(ids, 4), ref[:, :ids.shape[1] + 4])),
                                       impls=sorted(k for k in again.runtime.impls if "+" in k))
    except Exception:
        out[test] = {"error": traceback.format_exc()}
print(json.dumps(out))
"""


def _decode_pinned(runs: dict[str, dict]) -> dict:
    """Each run (force, models, cache_dir) in one interpreted subprocess: every model built afresh,
    decoded with the pins (interpreted Triton) against HF's 10 greedy tokens, then compiled again
    to load the same choices from the run's decision cache and decoded for 4 tokens (the first
    decode already ran every kernel for 9 steps; the second shows the reloaded ones reproduce HF
    too, at a third of the interpreted time). Run -> model -> results, or {"error": ...}."""
    p = _run(_DECODE, json.dumps(runs), timeout=1500)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def _decode_with_fusions_pinned(force: dict, tmp_path, models=("tiny-llama", "tiny-qwen3")) -> dict:
    """One pinned decode (see _decode_pinned) in a subprocess of its own: model -> results."""
    res = _decode_pinned({"run": dict(force=force, models=list(models), cache_dir=str(tmp_path))})["run"]
    assert "error" not in res, res["error"]
    return res


def _pinned_tests(session: pytest.Session) -> list[str]:
    return [i.name for i in session.items if i.module.__name__ == __name__ and i.name in _PINNED]


def _run_pinned_decodes(request) -> dict:
    """The pinned decodes of this module's selected tests, all in one subprocess (one start-up and
    import of torch, transformers and triton, ~5 s, instead of one per test)."""
    cache = request.getfixturevalue("tmp_path_factory").mktemp("pinned-decodes")
    return _decode_pinned({name: dict(_PINNED[name], cache_dir=str(cache / name))
                           for name in _pinned_tests(request.session)})


side_by_side.register("interpreted pinned decodes", lambda session: bool(_pinned_tests(session)),
                      _run_pinned_decodes)


@pytest.fixture(scope="module")
def pinned_decodes(request) -> dict:
    return side_by_side.result("interpreted pinned decodes", request)


@pytest.fixture()
def decoded(request, pinned_decodes) -> dict:
    """This test's pinned decode: model -> results."""
    res = pinned_decodes[request.node.name]
    assert "error" not in res, res.get("error")
    assert set(res) == set(_PINNED[request.node.name]["models"])
    return res


@_decodes({"residual_rmsnorm": "triton_add_rmsnorm", "final_norm": "triton_add_rmsnorm", "rotary": "triton_qk_rotary",
           "decode_attention": _FLASH_TWO_SPLITS, "gate_up_silu_mul": "triton_swiglu", "kv_write": "triton_kv_write"})
def test_decode_with_triton_kernels_pinned_matches_hf_eager(decoded):
    """The runtime with Triton kernels (interpreted) in the decode step still reproduces HF's
    greedy tokens: fused add+RMSNorm, fused q/k-norm+rotary, flash-decoding attention, SwiGLU.
    Attention is pinned to a point with two splits (split kernel + combine, as the advisor's first
    point with four): the interpreter runs every program in Python, and attention's split programs
    were three quarters of this test's time."""
    res = decoded
    for name, r in res.items():
        assert r["match"], (name, r)
        assert r["plan"]["decode_attention"] == _FLASH_TWO_SPLITS, r["plan"]
        assert r["plan"]["residual_rmsnorm"].startswith("triton_add_rmsnorm"), r["plan"]
        assert r["plan"]["gate_up_silu_mul"].startswith("triton_swiglu"), r["plan"]
        assert r["plan"]["rotary"].startswith("triton_qk_rotary"), r["plan"]
        assert r["plan"]["kv_write"].startswith("triton_kv_write"), r["plan"]
    assert res["tiny-qwen3"]["fused"] is True
    assert res["tiny-qwen3"]["plan"]["qk_norm"] == res["tiny-qwen3"]["plan"]["rotary"]


@pytest.mark.ondemand  # interpreted norm-GEMVs on every projection: the costliest pinned decode
@_decodes({"qkv_proj": _NORM_GEMV_WIDE, "gate_up_silu_mul": _NORM_GEMV_WIDE})
def test_decode_with_the_norm_folded_into_the_projections_matches_hf_eager(decoded):
    """triton_norm_gemv pinned on QKV and gate/up: the residual add + RMSNorm runs inside the
    projection kernels, the plan says so, HF's greedy tokens are reproduced, the cache reloads it.
    (BLOCK_N 64: a quarter of the advisor's first point's programs; 47 s of the CI run at 16.)"""
    for name, r in decoded.items():
        assert r["match"], (name, r)
        assert r["fuses"]["qkv_proj"] == r["fuses"]["gate_up_silu_mul"] == ["residual_rmsnorm"], r
        assert r["plan"]["qkv_proj"] == r["plan"]["gate_up_silu_mul"] == _NORM_GEMV_WIDE, r["plan"]
        assert r["fused_into"]["residual_rmsnorm"] == "qkv_proj, gate_up_silu_mul"
        assert r["impls"] == ["residual_rmsnorm+gate_up_silu_mul", "residual_rmsnorm+qkv_proj"], r
        assert r["cached"] == {"hit": True, "match": True, "impls": r["impls"]}, r["cached"]


@pytest.mark.ondemand
@_decodes({"rotary": "triton_qk_rotary_kv"})
def test_decode_with_the_kv_write_folded_into_rotary_matches_hf_eager(decoded):
    """triton_qk_rotary_kv pinned: the rotated k and the v go straight into the caches from the
    rotary kernel (with the q/k norm folded in too on Qwen3), HF's tokens are reproduced, the
    cache reloads it. On demand; CI keeps the kernel's self-check (the non-GEMV case, with and
    without the norm) and the pinned decode through the runtime's other fusions."""
    for name, r in decoded.items():
        assert r["match"], (name, r)
        assert r["plan"]["rotary"].startswith("triton_qk_rotary_kv"), r["plan"]
        assert "kv_write" in r["fuses"]["rotary"] and r["fused_into"]["kv_write"] == "rotary", r
        assert r["plan"]["kv_write"] == r["plan"]["rotary"], r["plan"]
        assert r["impls"] == ["rotary+kv_write"], r
        assert r["cached"] == {"hit": True, "match": True, "impls": r["impls"]}, r["cached"]


@pytest.mark.ondemand
@_decodes({"rotary": _ROTARY_FLASH_TWO_SPLITS})
def test_decode_with_rotary_kv_write_and_attention_in_one_kernel_matches_hf_eager(decoded):
    """triton_rotary_flash_decode pinned: rotary, the cache write and attention run as one kernel
    (the q/k norm too on Qwen3 when the pinned point has it); HF's greedy tokens are reproduced and
    the cache reloads it. Two splits, as in test_decode_with_triton_kernels_pinned_matches_hf_eager.
    On demand; CI keeps the kernel's self-check (both norms, direct and split outputs)."""
    res = decoded
    for name, r in res.items():
        assert r["match"], (name, r)
        assert r["plan"]["rotary"] in _ROTARY_FLASH_TWO_SPLITS, r["plan"]
        assert {"kv_write", "decode_attention"} <= set(r["fuses"]["rotary"]), r
        assert r["fused_into"]["kv_write"] == r["fused_into"]["decode_attention"] == "rotary", r
        # every folded region names the one kernel that runs its work
        assert r["plan"]["kv_write"] == r["plan"]["decode_attention"] == r["plan"]["rotary"], r["plan"]
        assert r["impls"] == ["rotary+kv_write+attention"], r
        assert r["cached"] == {"hit": True, "match": True, "impls": r["impls"]}, r["cached"]
    assert res["tiny-llama"]["plan"]["rotary"] == _ROTARY_FLASH_TWO_SPLITS[0]  # Llama has no q/k norm
    assert res["tiny-qwen3"]["plan"]["rotary"] == _ROTARY_FLASH_TWO_SPLITS[1]  # Qwen3's is folded in


_GEMV_ADD_NORM = "triton_gemv_add_rmsnorm[BLOCK_K=128,BLOCK_N=64,PDL=0,num_warps=8]"


@_decodes({"o_proj": _GEMV_ADD_NORM, "down_proj": _GEMV_ADD_NORM}, norms=True)
def test_decode_with_the_residual_add_and_norm_in_the_projection_epilogues_matches_hf_eager(decoded):
    """triton_gemv_add_rmsnorm pinned on o_proj and down_proj: each writes residual + W x and, from
    its last program, the RMSNorm of it (o_proj the post-attention norm, down_proj the next layer's
    input norm, the final norm after the last layer), so gate/up and QKV read normalised rows and
    no norm kernel runs after layer 0's. With random norm weights (a wrong layer's weight changes
    the tokens) HF's greedy tokens are reproduced, the plan says so, the cache reloads it."""
    for name, r in decoded.items():
        assert r["match"], (name, r)
        assert r["plan"]["o_proj"] == r["plan"]["down_proj"] == _GEMV_ADD_NORM, r["plan"]
        assert r["fuses"]["o_proj"] == r["fuses"]["down_proj"] == ["residual_rmsnorm"], r
        assert r["fused_into"] == {"final_norm": "down_proj"}, r  # layer 0's input norm still runs
        assert r["plan"]["final_norm"] == _GEMV_ADD_NORM, r["plan"]
        assert r["impls"] == ["down_proj+residual_rmsnorm", "o_proj+residual_rmsnorm"], r
        assert r["cached"] == {"hit": True, "match": True, "impls": r["impls"]}, r["cached"]


def _gemv_id(split_reduce: str, split_k: int, block_k: int = 64, block_n: int = 64) -> str:
    """A triton_gemv candidate id (dot mode: the tests decode two rows). BLOCK_N 64 (32 where the
    SwiGLU epilogue's shared memory allows no more) rather than 16: a fraction of the programs,
    each interpreted in Python (45 s of the CI run at 16), and still two or more column tiles,
    each with its split-K ticket, on every region."""
    return (f"triton_gemv[BLOCK_K={block_k},BLOCK_N={block_n},MODE=dot,PDL=0,SPLIT_K={split_k},"
            f"SPLIT_REDUCE={split_reduce},num_warps=4]")


# the one-launch point by its id: a template name alone pins the advisor's first point
_ARGMAX_SPLIT_K = {"token_select": "triton_argmax[BLOCK=1024,CHUNK=1024,ONE_LAUNCH=1,PDL=0,num_warps=4]",
                   "o_proj": _gemv_id("last", 2), "down_proj": _gemv_id("last", 4),
                   "gate_up_silu_mul": _gemv_id("last", 2, block_n=32)}


# one model: the kernels are the same for both, and interpreted split-K on three regions of both
# models took 116 s of the CI run
@pytest.mark.ondemand
@_decodes(_ARGMAX_SPLIT_K, models=("tiny-qwen3",))
def test_decode_with_argmax_and_one_launch_split_k_pinned_matches_hf_eager(decoded):
    """triton_argmax on token selection and the one-launch split-K GEMV (the last split reduces)
    on o_proj, down_proj and gate/up: HF's greedy tokens are reproduced and the cached plan
    reloads the same candidates (their ticket counters made anew). On demand; CI keeps argmax's
    self-check (both launch modes) and the interpreted split-K GEMV (test_argmax_splitk_pdl.py)."""
    assert set(decoded) == {"tiny-qwen3"}
    for name, r in decoded.items():
        assert r["match"], (name, r)
        for kind in ("token_select", "o_proj", "down_proj", "gate_up_silu_mul"):
            assert r["plan"][kind] == _ARGMAX_SPLIT_K[kind], (kind, r["plan"])
        assert r["cached"]["hit"] and r["cached"]["match"], r["cached"]
