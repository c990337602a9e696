"""Candidates are rejected before building, with a reason naming the family."""

from __future__ import annotations

import dataclasses


from hercules.compile.constraints import DeviceInfo, check, check_requirements
from hercules.compile.regions import ModelSpec, TensorSpec, derive_regions
from hercules.compile.templates import ALL_TEMPLATES, find_template
from hercules.compile.templates.base import Requirements

H200 = DeviceInfo(type="cuda", name="NVIDIA H200", sm=(9, 0), smem_per_block=48 * 1024,
                  smem_per_block_optin=227 * 1024, sm_count=132)
T4 = DeviceInfo(type="cuda", name="Tesla T4", sm=(7, 5), smem_per_block=48 * 1024, smem_per_block_optin=64 * 1024,
                sm_count=40)
CPU = DeviceInfo(type="cpu", name="cpu")
CPU_INTERP = DeviceInfo(type="cpu", name="cpu", triton_interpreter=True)


def regions(dtype="bfloat16", batch=1, hidden=2048, head_dim=128, heads=16, kv=8):
    spec = ModelSpec("qwen3", hidden, 6144, 28, heads, kv, head_dim, 151936, 1e-6, True, dtype, True)
    return derive_regions(spec, batch=batch, capacity=256)


def reasons(template, params, region, dev):
    return check(find_template(template, region), params, region, dev)


def test_cuda_candidate_needs_a_cuda_device():
    r = regions()["residual_rmsnorm"]
    rs = reasons("cuda_add_rmsnorm", {"THREADS": 256, "VEC": 8}, r, CPU)
    assert any(x.startswith("hardware: CUDA C++ candidate needs a CUDA device") for x in rs)
    assert reasons("cuda_add_rmsnorm", {"THREADS": 256, "VEC": 8}, r, H200) == []


def test_triton_needs_gpu_or_interpreter():
    r = regions()["residual_rmsnorm"]
    p = {"BLOCK": 2048, "num_warps": 4}
    assert any("Triton candidate needs a CUDA device" in x for x in reasons("triton_add_rmsnorm", p, r, CPU))
    assert reasons("triton_add_rmsnorm", p, r, CPU_INTERP) == []


def test_sm_version_bf16_needs_sm80():
    r = regions("bfloat16")["decode_attention"]
    rs = reasons("cuda_flash_decode", {"WARPS": 4, "SPLITS": 8}, r, T4)
    assert rs == ["hardware: needs SM 8.0+ (device is SM 7.5)"]
    r16 = regions("float16")["decode_attention"]
    assert reasons("cuda_flash_decode", {"WARPS": 4, "SPLITS": 8}, r16, T4) == []


def test_shared_memory_limit():
    # 8 query heads per kv head at head_dim 256, 8 warps: 8*8*258*4 B of static shared memory > 48 KiB
    r = regions(head_dim=256, heads=64, kv=8)["decode_attention"]
    rs = reasons("cuda_flash_decode", {"WARPS": 8, "SPLITS": 4}, r, H200)
    assert any(x.startswith("hardware: shared memory") for x in rs) or any("static shared memory" in x for x in rs)
    # Triton's dynamic shared memory is checked against the opt-in limit of the device
    r2 = regions()["decode_attention"]
    p = {"BLOCK_N": 128, "SPLITS": 4, "num_warps": 8}
    assert any(x.startswith("hardware: shared memory") for x in reasons("triton_flash_decode", p, r2, T4))


def test_register_estimate_rejects_spilling_points():
    r = regions()["down_proj"]
    rs = reasons("triton_gemv", {"MODE": "reduce", "BLOCK_N": 128, "BLOCK_K": 256, "SPLIT_K": 1, "num_warps": 2}, r, H200)
    assert any(x.startswith("hardware: ~") and "registers per thread" in x for x in rs)


def test_interface_divisibility_and_layout():
    r = regions(hidden=2050)["residual_rmsnorm"]  # 2050 is not a multiple of 8
    rs = reasons("cuda_add_rmsnorm", {"THREADS": 256, "VEC": 8}, r, H200)
    assert any(x.startswith("interface: hidden % VEC") for x in rs)
    r = regions(head_dim=96)["rotary"]  # the CUDA rotary keeps rotate-half partners in one lane
    assert any("head_dim % 64" in x for x in reasons("cuda_qk_rotary", {"WARPS": 4, "HAS_NORM": 1}, r, H200))
    assert any("power of two" in x for x in reasons("triton_qk_rotary", {"HEADS": 2, "num_warps": 1, "HAS_NORM": 1}, r, H200))
    # batch limit of the single-row GEMV mode
    r = regions(batch=4)["o_proj"]
    rs = reasons("triton_gemv", {"MODE": "reduce", "BLOCK_N": 32, "BLOCK_K": 64, "SPLIT_K": 1, "num_warps": 4}, r, H200)
    assert any("batch 4 exceeds" in x for x in rs)


def test_interface_contiguity_from_region_strides():
    r = regions()["rotary"]
    strided = dataclasses.replace(r, inputs=tuple(
        TensorSpec(t.name, t.shape, t.dtype, t.stride[:-1] + (2,)) if t.name == "q" else t for t in r.inputs))
    rs = check_requirements(Requirements(backend="any", last_dim_contiguous=("q",)), strided, H200)
    assert rs and rs[0].startswith("interface: input 'q' needs unit stride")


def test_numerics_family():
    r32 = regions("float32")["gate_up_silu_mul"]
    rs = reasons("cuda_swiglu", {"THREADS": 256, "VEC": 4, "FAST_EXP": 1}, r32, H200)
    assert any(x.startswith("numerics: approximate intrinsics") for x in rs)
    assert reasons("cuda_swiglu", {"THREADS": 256, "VEC": 4, "FAST_EXP": 0}, r32, H200) == []
    rbf = regions("bfloat16")["gate_up_silu_mul"]
    assert reasons("cuda_swiglu", {"THREADS": 256, "VEC": 8, "FAST_EXP": 1}, rbf, H200) == []
    rs = check_requirements(Requirements(acc_dtype="float16"), rbf, H200)
    assert rs == ["numerics: accumulation in float16 is not allowed (fp32 accumulation required)"]
    rs = check_requirements(Requirements(uses_tf32=True), r32, H200)
    assert rs and rs[0].startswith("numerics: TF32")


def test_every_template_declares_requirements_for_its_whole_space():
    regs = regions()
    for t in ALL_TEMPLATES:
        for r in regs.values():
            if t.applies(r):
                for p in t.space(r):
                    assert isinstance(check(t, p, r, H200), list)


def test_rejections_are_recorded_in_the_plan(tiny_models, cache_dir):
    from hercules.compile import compile_model

    dec = compile_model(tiny_models["tiny-llama"], cache_dir=cache_dir)
    d = dec.plan.decisions["decode_attention"]
    assert d.rejected > 0  # CUDA and (without the interpreter) Triton points on a CPU
    assert all(len(x) == 2 and x[1].split(":")[0] in ("interface", "hardware", "numerics") for x in d.rejected_examples)


def test_gemv_dot_tiles_that_overflow_shared_memory_are_rejected():
    # fp32, BLOCK_N 128, BLOCK_K 256 asked the H200 for 294,912 B of shared memory and failed to launch.
    params = {"MODE": "dot", "BLOCK_N": 128, "BLOCK_K": 256, "SPLIT_K": 1, "num_warps": 8}
    down = regions(dtype="float32")["down_proj"]
    assert any("shared memory" in x for x in reasons("triton_gemv", params, down, H200))
    small = dict(params, BLOCK_N=16, BLOCK_K=64)
    assert not any("shared memory" in x for x in reasons("triton_gemv", small, down, H200))
    # the gate/up tiles count twice: BLOCK_N 128 / BLOCK_K 128 in fp32 asked for 278,528 B
    gate_up = regions(dtype="float32")["gate_up_silu_mul"]
    assert any("shared memory" in x for x in reasons("triton_gemv", dict(params, BLOCK_K=128), gate_up, H200))


A100 = DeviceInfo(type="cuda", name="NVIDIA A100", sm=(8, 0), smem_per_block=48 * 1024,
                  smem_per_block_optin=163 * 1024, sm_count=108)


def test_programmatic_dependent_launch_needs_sm90_and_is_off_on_the_interpreter():
    """PDL=1 points are rejected on the CPU interpreter and below SM 9.0, with a hardware reason;
    their PDL=0 twins pass, and the PDL=1 points pass on the H200."""
    regs = regions()
    points = [
        ("triton_gemv", "o_proj", {"MODE": "reduce", "BLOCK_N": 32, "BLOCK_K": 128, "SPLIT_K": 4, "num_warps": 4,
                                   "SPLIT_REDUCE": "last"}),
        ("triton_norm_gemv", "qkv_proj", {"BLOCK_N": 16, "BLOCK_K": 128, "num_warps": 4}),
        ("triton_argmax", "token_select", {"CHUNK": 1024, "BLOCK": 1024, "num_warps": 4, "ONE_LAUNCH": 1}),
    ]
    for template, kind, p in points:
        r = regs[kind]
        on, off = dict(p, PDL=1), dict(p, PDL=0)
        assert on in find_template(template, r).space(r) and off in find_template(template, r).space(r)
        assert reasons(template, on, r, H200) == [] and reasons(template, off, r, H200) == []
        assert reasons(template, off, r, A100) == [] and reasons(template, off, r, CPU_INTERP) == []
        rs = reasons(template, on, r, A100)
        assert rs == ["hardware: programmatic dependent launch (PDL=1) needs SM 9.0+ (device is SM 8.0)"], rs
        rs = reasons(template, on, r, CPU_INTERP)
        assert len(rs) == 1 and rs[0].startswith("hardware: programmatic dependent launch") and "interpreter" in rs[0]


def test_split_k_reduction_modes_cover_the_space_without_duplicates():
    """triton_gemv: one reduction mode without split-K, both (one launch / a reduce kernel) with it."""
    r = regions()["o_proj"]
    space = find_template("triton_gemv", r).space(r)
    assert len({tuple(sorted(p.items())) for p in space}) == len(space)
    assert {p["SPLIT_REDUCE"] for p in space if p["SPLIT_K"] == 1} == {"none"}
    assert {p["SPLIT_REDUCE"] for p in space if p["SPLIT_K"] > 1} == {"last", "kernel"}
