"""Speed of light: ceilings are upper bounds, floors are lower bounds, so honest code stays <= 1."""

from __future__ import annotations

import math

import pytest
import torch

from hercules.harness import roofline
from hercules.harness.records import Degeneracy
from hercules.harness.roofline import (
    CPU_MATMUL_CALL_MS,
    CPU_MATMUL_SIZES,
    DATASHEETS,
    ceiling_for,
    datasheet_for,
    floor_bytes,
    sol_figures,
)

TB = 1e12

# What measure_ceilings wrote on the H200 machine, in round figures: copy 4.24 TB/s, and the
# matmul rates with TF32 off below the datasheet's (fp32 SIMT, bf16/fp16 tensor cores).
H200_MEASURED = {
    "device_name": "NVIDIA H200",
    "bandwidth_bytes_per_s": 4.24 * TB,
    "matmul_flops_per_s": {"float32": 51.0 * TB, "bfloat16": 790.0 * TB, "float16": 780.0 * TB},
}


def _ms(flop_or_bytes: float, rate: float) -> float:
    return flop_or_bytes / rate * 1e3


def test_datasheet_lookup_by_device_name():
    h200 = datasheet_for("NVIDIA H200")
    h100 = datasheet_for("NVIDIA H100 80GB HBM3")  # what the SXM5 part reports
    assert h200 is not None and h200.name == "NVIDIA H200 SXM"
    assert h100 is not None and h100.name == "NVIDIA H100 SXM"
    assert h200.bandwidth_bytes_per_s == 4.8 * TB and h100.bandwidth_bytes_per_s == 3.35 * TB
    for sheet in (h200, h100):
        assert sheet.flops_per_s["bfloat16"] == sheet.flops_per_s["float16"] == 989.4 * TB
        assert sheet.flops_per_s["tfloat32"] == 494.7 * TB
        assert sheet.flops_per_s["float8_e4m3fn"] == 1979.0 * TB
        assert sheet.flops_per_s["float64"] == sheet.flops_per_s["float32"] == 66.9 * TB
    assert datasheet_for("nvidia h200") is h200  # case does not matter
    assert datasheet_for("NVIDIA H100 PCIe") is None  # another part with lower peaks
    assert datasheet_for("NVIDIA A10") is None and datasheet_for("cpu") is None
    assert len({s.name for s in DATASHEETS}) == len(DATASHEETS)


def test_fp32_ceiling_is_the_simt_rate_not_tf32():
    c = ceiling_for(H200_MEASURED, "float32")
    assert (c.flops_per_s, c.flops_source, c.flops_dtype) == (66.9 * TB, "datasheet", "float32")
    assert c.flops_per_s < 494.7 * TB  # workers run with TF32 off
    bf16 = ceiling_for(H200_MEASURED, "bfloat16")
    assert (bf16.flops_per_s, bf16.flops_source) == (989.4 * TB, "datasheet")
    assert (bf16.bandwidth_bytes_per_s, bf16.bandwidth_source) == (4.8 * TB, "datasheet")


def test_ceiling_is_the_larger_of_datasheet_and_measured():
    faster = {**H200_MEASURED, "bandwidth_bytes_per_s": 5.0 * TB,
              "matmul_flops_per_s": {"bfloat16": 1000.0 * TB}}
    c = ceiling_for(faster, "bfloat16")
    assert (c.flops_per_s, c.flops_source) == (1000.0 * TB, "measured")
    assert (c.bandwidth_bytes_per_s, c.bandwidth_source) == (5.0 * TB, "measured")


def test_unknown_device_falls_back_to_measured():
    measured = {"device_name": "NVIDIA A10", "bandwidth_bytes_per_s": 0.55 * TB,
                "matmul_flops_per_s": {"float32": 25.0 * TB, "bfloat16": 110.0 * TB}}
    sol = sol_figures(2 * 1024**3, 3 * 1024**2 * 2, "bfloat16", measured, time_ms=1.0)
    assert sol["peak_flops_per_s"] == 110.0 * TB and sol["peak_flops_source"] == "measured"
    assert sol["bandwidth_bytes_per_s"] == 0.55 * TB and sol["bandwidth_source"] == "measured"
    assert sol["ceiling_source"] == "measured" and sol["device_name"] == "NVIDIA A10"
    # A dtype never measured on an unknown device: the fastest rate known, still an upper bound.
    int8 = ceiling_for(measured, "int8")
    assert (int8.flops_per_s, int8.flops_dtype) == (110.0 * TB, "bfloat16")
    cpu = ceiling_for({"device_name": "cpu", "bandwidth_bytes_per_s": 2e10, "matmul_flops_per_s": {}}, "float32")
    assert cpu.flops_per_s is None and cpu.bandwidth_source == "measured"


def test_triangular_matmul_skipping_zeros_stays_below_one():
    # triu(A) @ triu(B), n = 4096, fp32. The reference multiplies the whole matrices: flop_counter
    # says 2 n^3. A kernel that skips the zero half runs in half the time the reference would need
    # at the fp32 ceiling itself, so on the reference's FLOPs it reads 2.0 (and more against the
    # measured 51 TFLOP/s the old formula used: 2.6).
    n = 4096
    flops = 2 * n**3
    min_bytes = 3 * n * n * 4  # A, B read and C written, once
    cand_ms = 0.5 * _ms(flops, 66.9 * TB)
    sol = sol_figures(flops, min_bytes, "float32", H200_MEASURED, cand_ms)

    assert sol["work"] == "reference_flops" and sol["flops"] == flops and sol["min_flops"] is None
    assert sol["compute_fraction_of_reference_work"] == pytest.approx(2.0)
    assert sol["reference_bound"] == "compute"
    assert sol["note"] and "not a floor" in sol["note"]  # recorded, not clamped away
    # sol_fraction stands on the memory floor alone: a true lower bound for this candidate too.
    assert sol["bound"] == "memory" and sol["ceiling_source"] == "datasheet"
    assert sol["floor_ms"] == pytest.approx(_ms(min_bytes, 4.8 * TB))
    assert sol["sol_fraction"] == pytest.approx(sol["floor_ms"] / cand_ms)
    assert sol["sol_fraction"] == sol["memory_fraction"] <= 1
    assert sol["compute_fraction"] is None


def test_a_declared_minimum_flop_count_does_enter_the_fraction():
    # The triangular product needs n^3 / 3 FLOPs (sum over i <= k <= j): a lower bound, declared.
    n = 4096
    flops, min_flops, min_bytes = 2 * n**3, n**3 // 3, 3 * n * n * 4
    cand_ms = 0.5 * _ms(flops, 66.9 * TB)
    sol = sol_figures(flops, min_bytes, "float32", H200_MEASURED, cand_ms, min_flops=min_flops)
    assert sol["work"] == "min_flops" and sol["bound"] == "compute"
    assert sol["ceiling_source"] == "datasheet" and sol["peak_flops_per_s"] == 66.9 * TB
    assert sol["sol_fraction"] == pytest.approx(sol["compute_fraction"]) == pytest.approx(1 / 3)
    assert sol["sol_fraction"] <= 1
    assert sol["compute_fraction_of_reference_work"] == pytest.approx(2.0)  # still reported


def test_memory_bound_elementwise():
    # ReLU over 2^26 fp32 values: 512 MiB read and written, 0 counted FLOPs. At 4.8 TB/s that is
    # 0.1118 ms; a candidate at 0.13 ms is at 86% of the speed of light.
    n = 1 << 26
    min_bytes = 2 * 4 * n
    sol = sol_figures(0, min_bytes, "float32", H200_MEASURED, 0.13)
    assert sol["bound"] == sol["reference_bound"] == "memory"
    assert sol["floor_ms"] == pytest.approx(_ms(min_bytes, 4.8 * TB))
    assert sol["sol_fraction"] == pytest.approx(0.1118 / 0.13, rel=1e-3)
    assert sol["compute_fraction_of_reference_work"] is None and sol["note"] is None
    assert sol["units"]["bandwidth_bytes_per_s"].startswith("byte/s") and sol["units"]["floor_ms"] == "ms"


def test_a_time_below_the_floor_reports_no_fraction_and_says_the_floor_was_wrong():
    # Faster than the bytes allow: only possible when the floor's model counts bytes the candidate
    # need not move (or a ceiling is off). Neither a fraction above 1 nor a clamped 1.0 is reported.
    min_bytes = 1 << 30
    cand_ms = 0.5 * _ms(min_bytes, 4.8 * TB)
    sol = sol_figures(0, min_bytes, "bfloat16", H200_MEASURED, cand_ms)
    assert sol["sol_fraction"] is None and sol["memory_fraction"] is None and sol["floor_beaten"] is True
    assert "beats the memory floor" in sol["note"] and "by 2.00x" in sol["note"]
    assert "floor is wrong" in sol["note"]
    declared = sol_figures(10**12, 1, "float32", H200_MEASURED, 1e-3, min_flops=10**12)
    assert declared["sol_fraction"] is None and declared["compute_fraction"] is None
    assert declared["floor_beaten"] and "declared minimum FLOPs" in declared["note"]
    within = sol_figures(0, min_bytes, "bfloat16", H200_MEASURED, 2 * cand_ms)
    assert within["floor_beaten"] is False and within["sol_fraction"] == pytest.approx(1.0)


def test_the_floor_leaves_out_inputs_the_outputs_ignore():
    assert floor_bytes(1000, 100, 10) == 1110
    # One of two inputs ignored (400 bytes of the 1000): not read by a correct candidate.
    partial = Degeneracy(("input 1 (y)",), constant_output=False, ignored_bytes=400)
    assert floor_bytes(1000, 100, 10, partial) == 710
    # KernelBench level 2 #83: the output is zero whatever the input; writing it is all there is.
    constant = Degeneracy(("input 0 (x)",), constant_output=True, ignored_bytes=1000)
    assert floor_bytes(1000, 100, 10, constant) == 100


def test_a_constant_output_problem_judged_on_its_write_alone():
    # Level 2 #83 on the H200: input (128, 3, 16, 64, 64) fp32, output (128, 16, 14, 62, 62) fp32.
    # A kernel that only writes zeros, at 4.5 TB/s, beats a floor that counts reading the input
    # (1.15x); on the output write alone it is below the floor, as any correct kernel must be.
    input_bytes, output_bytes = 128 * 3 * 16 * 64 * 64 * 4, 128 * 16 * 14 * 62 * 62 * 4
    cand_ms = _ms(output_bytes, 4.5 * TB)
    old = sol_figures(0, input_bytes + output_bytes, "float32", H200_MEASURED, cand_ms)
    assert old["floor_beaten"] and old["sol_fraction"] is None
    constant = Degeneracy(("input 0 (x)",), constant_output=True, ignored_bytes=input_bytes)
    new = sol_figures(0, floor_bytes(input_bytes, output_bytes, 5000, constant), "float32", H200_MEASURED, cand_ms)
    assert not new["floor_beaten"] and new["sol_fraction"] == pytest.approx(4.5 / 4.8)


def test_no_time_or_no_work_gives_none():
    assert sol_figures(10, 100, "float32", H200_MEASURED, None)["sol_fraction"] is None
    empty = sol_figures(0, 0, "float32", H200_MEASURED, 1.0)
    assert empty["sol_fraction"] is None and empty["floor_ms"] == 0.0
    assert math.isfinite(sol_figures(0, 100, "float32", {}, 1.0)["floor_ms"])  # no ceilings at all


def _scripted_rates(monkeypatch, ms_at: dict[int, float]) -> list[tuple[int, str]]:
    """``_matmul_rate`` answering from scripted per-size times (no timing on this host); the
    sizes and devices it was asked for."""
    asked: list[tuple[int, str]] = []

    def rate(n, dtype, device):
        asked.append((n, device.type))
        return 2 * n**3 / (ms_at[n] / 1e3), ms_at[n]

    monkeypatch.setattr(roofline, "_matmul_rate", rate)
    return asked


def test_a_cpu_matmul_rate_stops_growing_the_size_once_a_product_is_slow(monkeypatch):
    """A dtype with no fast CPU kernel is measured at a small size, not for seconds a product at
    the top one; its ceiling is the best rate of the sizes measured (here the smallest)."""
    slow = {128: 1.35, 256: 24.7, 512: 206.0, 1024: 2170.0}  # bfloat16 on the 2-core dev machine
    asked = _scripted_rates(monkeypatch, slow)
    rate = roofline.matmul_rate(torch.bfloat16, torch.device("cpu"))
    assert [n for n, _ in asked] == [128, 256] and slow[256] >= CPU_MATMUL_CALL_MS > slow[128]
    assert rate == pytest.approx(2 * 128**3 / 1.35e-3)


def test_a_fast_cpu_matmul_is_measured_up_to_the_top_size_and_a_gpu_at_one_size(monkeypatch):
    fast = {128: 0.028, 256: 0.195, 512: 1.44, 1024: 11.5}  # float32 on the same machine
    asked = _scripted_rates(monkeypatch, fast)
    rate = roofline.matmul_rate(torch.float32, torch.device("cpu"))
    assert [n for n, _ in asked] == [128, 256, 512, 1024] == [CPU_MATMUL_SIZES[0] * 2**k for k in range(4)]
    assert rate == pytest.approx(max(2 * n**3 / (ms / 1e3) for n, ms in fast.items()))
    asked = _scripted_rates(monkeypatch, {8192: 1.4, 4096: 2.7})
    roofline.matmul_rate(torch.bfloat16, torch.device("cuda"))
    roofline.matmul_rate(torch.float32, torch.device("cuda"))
    assert asked == [(8192, "cuda"), (4096, "cuda")]
