"""Token selection (two-stage argmax), one-launch split-K GEMV and programmatic dependent launch.

Numerics run under the Triton CPU interpreter (TRITON_INTERPRET=1 must be set before triton is
imported, so each check runs in a subprocess). The PDL variants cannot run there (no grid
dependency control), so they are compiled ahead of time for SM 9.0 instead, without a GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton")


def _run(code: str, *, interpret: bool, timeout: float = 540) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                       timeout=timeout)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


ARGMAX_CASES = """
    import json, torch
    torch.set_num_threads(1)
    from hercules.compile import reference as ref
    from hercules.compile.regions import ModelSpec, derive_regions
    from hercules.compile.templates.triton_templates import TritonArgmax
    from hercules.compile.templates import triton_kernels as k

    def candidate(vocab, batch, **p):
        spec = ModelSpec("llama", 64, 128, 1, 2, 1, 32, vocab, 1e-5, False, "float32", False)
        region = derive_regions(spec, batch=batch)["token_select"]
        return TritonArgmax().materialise(dict(p, PDL=0), region)

    g = torch.Generator().manual_seed(0)
    cases = {}
    # ties everywhere (integers in a small range), V not a multiple of BLOCK or CHUNK, several tiles a
    # chunk, tiles past V fully masked (5000 with CHUNK 4096: the second chunk has one partial tile)
    ties = torch.randint(-3, 4, (4, 5000), generator=g).float()
    ties[1, :] = 2.0  # a whole row tied: index 0
    ties[2, 4999] = 9.0  # the winner in the last, partial tile
    ties[3, 4096] = 9.0  # the winner opening the second chunk
    cases["ties"] = ties
    nan = torch.randn(4, 5000, generator=g)
    nan[0, 3000], nan[0, 4500], nan[0, 10] = float("nan"), float("nan"), float("inf")  # first NaN beats +inf
    nan[1, :] = float("-inf")  # all -inf: index 0
    nan[2, 4999] = float("nan")  # NaN in the last, partial tile
    nan[3, 1:] = float("nan")  # NaN everywhere but index 0: the first NaN, index 1
    cases["nan_inf"] = nan
    cases["bf16_ties"] = torch.randint(-2, 3, (3, 5000), generator=g).to(torch.bfloat16)
    out = {}
    for name, x in cases.items():
        B, V = x.shape
        expect = torch.argmax(x, dim=-1)
        for p in (dict(CHUNK=4096, BLOCK=1024), dict(CHUNK=1024, BLOCK=512), dict(CHUNK=512, BLOCK=512)):
            for one in (1, 0):
                c = candidate(V, B, num_warps=4, ONE_LAUNCH=one, **p)
                got = [c.fn(x, ref.Sampling()), c.fn(x, ref.Sampling())]  # twice: the tickets reset themselves
                out[f"{name}/{p['CHUNK']}/{p['BLOCK']}/{one}"] = dict(
                    equal=all(torch.equal(t, expect) for t in got), dtype=str(got[0].dtype),
                    expect=expect.tolist(), got=got[0].tolist())
    print(json.dumps(out))
"""


def test_argmax_matches_torch_on_ties_nan_and_inf_under_interpreter():
    """Lowest index on ties, NaN before +inf (its first occurrence), all -inf -> 0, winners in the
    last partial tile and at a chunk boundary; one-launch and two-launch; fp32 and bf16."""
    out = _run(ARGMAX_CASES, interpret=True)
    assert len(out) == 3 * 3 * 2
    bad = {k: v for k, v in out.items() if not v["equal"] or v["dtype"] != "torch.int64"}
    assert not bad, bad
    assert out["ties/4096/1024/1"]["expect"][1:] == [0, 4999, 4096]
    assert out["nan_inf/4096/1024/1"]["expect"] == [3000, 0, 4999, 1]


@pytest.mark.ondemand  # ~10 s interpreted on the CI machine; CI keeps the argmax's edge cases above and
# the template's self-check (test_triton_templates.py, triton_argmax, both launch modes)
def test_argmax_at_llama_and_qwen_vocab_sizes_under_interpreter():
    """Batch 1 at the real vocabularies (128256, 151936: neither a multiple of 1024), bf16, the
    winner placed in the last partial chunk and tied with an earlier element; the ticket counters
    are back to zero after every call; sampling runs the reference itself (same draw)."""
    out = _run("""
        import json, torch
        torch.set_num_threads(1)
        from hercules.compile import reference as ref
        from hercules.compile.templates import triton_kernels as k
        g = torch.Generator().manual_seed(1)
        res = {}
        for V in (128256, 151936):
            x = torch.randn(1, V, generator=g).to(torch.bfloat16)
            x[0, V - 3] = 8.0
            x[0, 77] = 8.0  # tie: the earlier index wins
            y = torch.randn(1, V, generator=g).to(torch.bfloat16)
            y[0, V - 1] = 9.0  # the very last element
            for one in (1, 0):
                t = k.Tickets(1)
                kw = dict(CHUNK=1024, BLOCK=1024, ONE_LAUNCH=one, PDL=0, num_warps=4, tickets=t)
                got = [k.argmax(v, **kw) for v in (x, y)]
                res[f"{V}/{one}"] = dict(got=[int(v) for v in got], expect=[int(torch.argmax(v)) for v in (x, y)],
                                       tickets=int(t.get(x.device).abs().sum()))
        from hercules.compile.regions import ModelSpec, derive_regions
        from hercules.compile.templates.triton_templates import TritonArgmax
        spec = ModelSpec("llama", 64, 128, 1, 2, 1, 32, 3000, 1e-5, False, "float32", False)
        c = TritonArgmax().materialise(dict(CHUNK=1024, BLOCK=1024, num_warps=4, ONE_LAUNCH=1, PDL=0),
                                       derive_regions(spec, batch=2)["token_select"])
        logits = torch.randn(2, 3000, generator=g) * 3
        noise = torch.empty(2, 3000).exponential_(generator=torch.Generator().manual_seed(5))
        s = ref.Sampling(do_sample=True, temperature=0.7, top_k=50, top_p=0.9)
        res["sample"] = dict(same=bool(torch.equal(c.fn(logits, s, noise), ref.token_select(logits, s, noise))))
        print(json.dumps(res))
    """, interpret=True)
    for V in (128256, 151936):
        for one in (1, 0):
            r = out[f"{V}/{one}"]
            assert r["got"] == r["expect"] == [77, V - 1], (V, one, r)
            assert r["tickets"] == 0
    assert out["sample"]["same"]


def test_split_k_gemv_reduced_by_the_last_split_matches_the_reference_under_interpreter():
    """One-launch split-K (the last split of a column tile sums the partials) against F.linear and
    the SwiGLU reference in fp32 and bf16, both GEMV modes, batch 1 and 3; bit-identical to the
    two-launch reduction (same sums, same order), and the tickets are zero again afterwards."""
    out = _run("""
        import json, torch
        import torch.nn.functional as F
        torch.set_num_threads(1)
        from hercules.compile import reference as ref
        from hercules.compile.templates import triton_kernels as k
        g = torch.Generator().manual_seed(2)
        rows = []
        for dt in (torch.float32, torch.bfloat16):
            for M, N, K, sw in ((1, 96, 320, 0), (3, 70, 200, 0), (1, 80, 256, 40)):
                x = torch.randn(M, K, generator=g).to(dt)
                w = (torch.randn(N, K, generator=g) * K ** -0.5).to(dt)
                expect = ref.silu_mul(F.linear(x, w)) if sw else F.linear(x, w)
                for mode in (["reduce", "dot"] if M == 1 else ["dot"]):
                    for split in (2, 4):
                        t = k.Tickets(16)
                        kw = dict(BLOCK_N=16, BLOCK_K=32, SPLIT_K=split, num_warps=4, MODE=mode, swiglu_i=sw)
                        last = k.gemv(x, w, SPLIT_REDUCE="last", tickets=t, **kw)
                        again = k.gemv(x, w, SPLIT_REDUCE="last", tickets=t, **kw)
                        two = k.gemv(x, w, SPLIT_REDUCE="kernel", **kw)
                        ok, err, msg = ref.compare(last, expect, dt)
                        rows.append(dict(case=f"{dt} M{M} N{N} K{K} sw{sw} {mode} S{split}", ok=ok, msg=msg,
                                         same=bool(torch.equal(last, two) and torch.equal(last, again)),
                                         tickets=int(t.get(x.device).abs().sum())))
        print(json.dumps(rows))
    """, interpret=True)
    assert len(out) == 2 * (4 + 2 + 4)  # dtypes x (cases x modes x splits)
    bad = [r for r in out if not (r["ok"] and r["same"] and r["tickets"] == 0)]
    assert not bad, bad


AOT = r"""
    import json, re
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from hercules.compile.templates import triton_kernels as k

    ALIGNED = {"K", "N", "I", "NOUT", "V", "sx", "sxm", "swn", "som", "srm", "shm"}  # multiples of 16 here

    def ptx(fn, types, constexprs, num_warps=4, pdl=False):
        sig = dict(types, **{c: "constexpr" for c in constexprs})
        # the 16-divisibility the JIT would infer from real arguments (pointers, strides, sizes):
        # without it the loads compile unvectorised and the code is not what runs
        attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a, t in types.items()
                 if t.startswith("*") or a in ALIGNED}
        c = triton.compile(ASTSource(fn, signature=sig, constexprs=constexprs, attrs=attrs),
                           target=GPUTarget("cuda", 90, 32), options=dict(num_warps=num_warps, launch_pdl=pdl))
        assert c.asm.get("cubin"), "no cubin: ptxas did not run"
        return c.asm["ptx"], bool(c.metadata.launch_pdl)

    def facts(text, launch_pdl):
        # instructions without their predicate guard ("@%p1 ld.global.b16 ...")
        lines = [re.sub(r"^@!?%p[0-9]+\s+", "", l.strip()) for l in text.splitlines()]
        wait = [i for i, l in enumerate(lines) if l.startswith("griddepcontrol.wait")]
        trig = [i for i, l in enumerate(lines) if l.startswith("griddepcontrol.launch_dependents")]
        first = wait[0] if wait else len(lines)
        before = lines[:first]
        return dict(launch_pdl=launch_pdl, waits=len(wait), triggers=len(trig),
                    loads_before_wait=sum(l.startswith("ld.global") for l in before),
                    stores_before_wait=sum(l.startswith(("st.global", "atom.", "red.")) for l in before),
                    trigger_after_wait=bool(wait and trig and trig[0] > wait[0]),
                    acq_rel_atomics=sum(l.startswith("atom.") and ".acq_rel." in l for l in lines))

    bf, f32, i32, i64 = "*bf16", "*fp32", "*i32", "*i64"
    gemv_t = dict(X=bf, W=bf, OUT=bf, WS=f32, TICKET=i32, M="i32", N="i32", K="i32", sxm="i32", swn="i32",
                  som="i32", I="i32")
    norm_t = dict(X=bf, R=bf, NW=bf, W=bf, OUT=bf, HOUT=bf, M="i32", K="i32", sxm="i32", srm="i32", som="i32",
                  shm="i32", swn="i32", eps="fp32", I="i32")
    out = {}
    for pdl in (True, False):
        # Llama-3.2-1B shapes: o_proj (K 2048, one-launch split-K 4), gate/up with SwiGLU, QKV with the norm
        for name, swiglu, mode in (("gemv_reduce_last", False, True), ("gemv_dot_swiglu", True, False)):
            c = dict(BM=1 if mode else 16, BLOCK_N=64, BLOCK_K=256, SPLIT_K=4, K_TILES=2, REDUCE=mode,
                     SWIGLU=swiglu, IEEE=False, LAST_REDUCES=mode, PDL=pdl)
            out[f"{name}/{int(pdl)}"] = facts(*ptx(k._gemv_kernel, gemv_t, c, pdl=pdl))
        out[f"gemv_splitk_reduce/{int(pdl)}"] = facts(*ptx(
            k._gemv_reduce_kernel, dict(WS=f32, OUT=bf, M="i32", NOUT="i32", som="i32"),
            dict(SPLIT_K=4, BLOCK=1024, SWIGLU=False, PDL=pdl), pdl=pdl))
        for swiglu in (False, True):
            c = dict(BM=1, BLOCK_N=16, BLOCK_K=128, K_TILES=16, NOUT=8192 if swiglu else 3072, SWIGLU=swiglu, PDL=pdl)
            out[f"norm_gemv_{int(swiglu)}/{int(pdl)}"] = facts(*ptx(k._norm_gemv_kernel, norm_t, c, pdl=pdl))
        for one in (True, False):
            c = dict(BLOCK=1024, TILES=1, PB=128, ONE_LAUNCH=one, PDL=pdl)
            out[f"argmax_chunk_{int(one)}/{int(pdl)}"] = facts(*ptx(k._argmax_chunk_kernel, dict(
                X=bf, PV=f32, PI=i32, TOK=i64, TICKET=i32, V="i32", sx="i32", P="i32"), c, pdl=pdl))
        # o_proj with the residual add + RMSNorm in its epilogue (Llama-3.2-1B: K 2048, N 2048)
        out[f"gemv_add_norm/{int(pdl)}"] = facts(*ptx(k._gemv_add_norm_kernel, dict(
            X=bf, W=bf, R=bf, NW=bf, OUT=bf, HOUT=bf, TICKET=i32, M="i32", N="i32", K="i32", sxm="i32", swn="i32",
            srm="i32", som="i32", shm="i32", eps="fp32"), dict(BM=1, BLOCK_N=16, BLOCK_K=256, K_TILES=8, BLOCK_H=1024,
                                                             H_TILES=2, N_TILES=128, PDL=pdl), pdl=pdl))
        out[f"argmax_final/{int(pdl)}"] = facts(*ptx(k._argmax_final_kernel, dict(PV=f32, PI=i32, TOK=i64, P="i32"),
                                                     dict(PB=128, PDL=pdl), num_warps=1, pdl=pdl))
    print(json.dumps(out))
"""


def _nvidia_backend() -> bool:
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        return os.path.exists(get_ptxas(90).path)
    except Exception:
        return False


@pytest.mark.skipif(not _nvidia_backend(), reason="triton's NVIDIA backend or its ptxas is not installed")
def test_pdl_kernels_compile_for_sm90_and_wait_before_touching_activations():
    """Compiled ahead of time for SM 9.0 (GPUTarget cuda 90; no GPU needed): every PDL=1 kernel is
    marked for a programmatic dependent launch, waits on the grid dependency exactly once before any
    store or atomic, and triggers its dependents after the wait; the GEMVs read their first weight
    tile before the wait (the overlap PDL buys). PDL=0 kernels contain no grid dependency control."""
    out = _run(AOT, interpret=False)
    assert len(out) == 2 * 9
    for name, f in out.items():
        kernel, pdl = name.split("/")
        if pdl == "1":
            assert f["launch_pdl"] and f["waits"] == 1 and f["triggers"] >= 1, (name, f)
            assert f["stores_before_wait"] == 0 and f["trigger_after_wait"], (name, f)
            if kernel.startswith(("gemv_reduce_last", "gemv_dot", "norm_gemv", "gemv_add_norm")):
                assert f["loads_before_wait"] > 0, (name, f)  # the prefetched weight tile
        else:
            assert not f["launch_pdl"] and f["waits"] == f["triggers"] == 0, (name, f)
        if kernel == "gemv_add_norm":  # the ticket that finds the program which normalises
            assert f["acq_rel_atomics"] == 1, (name, f)
