"""compare_outputs on the cases the verdict depends on: tolerances, non-finite values (poisoned
memory), zero outputs, shapes, dtypes and types."""

from __future__ import annotations

import pytest
import torch

from hercules.harness.checks import DEFAULT_TOLERANCES, compare_outputs
from hercules.harness.records import Flag

TOL = DEFAULT_TOLERANCES["float32"]


def _compare(out, ref, kind="torch.Tensor"):
    spec = {"shape": list(ref.shape), "dtype": str(ref.dtype).replace("torch.", "")}
    return compare_outputs([out], [kind], [ref.double()], [spec], TOL)


def test_equal_and_within_tolerance_pass_with_errors_recorded():
    ref = torch.randn(64, 32)
    assert _compare(ref.clone(), ref).ok
    near = ref + 1e-5
    result = _compare(near, ref)
    assert result.ok and 0 < result.max_abs_err < 2e-5 and result.rel_err > 0


def test_values_outside_tolerance_fail():
    ref = torch.randn(64, 32)
    out = ref.clone()
    out[3, 4] += 0.5
    result = _compare(out, ref)
    assert not result.ok and "outside atol" in result.problems[0]


def test_nan_where_the_reference_is_finite_is_foreign_memory():
    ref = torch.randn(16, 16)
    out = ref.clone()
    out[0, 0] = float("nan")
    result = _compare(out, ref)
    assert not result.ok and Flag.FOREIGN_MEMORY.value in result.flags


def test_matching_non_finite_values_pass_and_differing_ones_fail():
    ref = torch.randn(16, 16)
    ref[1, 1] = float("inf")
    ref[2, 2] = float("nan")
    assert _compare(ref.clone(), ref).ok
    out = ref.clone()
    out[1, 1] = float("-inf")
    result = _compare(out, ref)
    assert not result.ok and "non-finite values differ" in result.problems[0]


def test_zero_output_is_flagged():
    ref = torch.randn(16, 16)
    result = _compare(torch.zeros_like(ref), ref)
    assert not result.ok and Flag.ZERO_OUTPUT.value in result.flags


def test_shape_dtype_and_type_mismatches():
    ref = torch.randn(8, 8)
    assert Flag.SHAPE_MISMATCH.value in _compare(torch.randn(8, 4), ref).flags
    assert Flag.SHAPE_MISMATCH.value in _compare(ref.half(), ref).flags
    assert Flag.TENSOR_SUBCLASS.value in _compare(ref, ref, kind="subclass:Lazy").flags


def test_integer_outputs_compare_exactly():
    ref = torch.arange(10)
    spec = {"shape": [10], "dtype": "int64"}
    assert compare_outputs([ref.clone()], ["torch.Tensor"], [ref], [spec], TOL).ok
    assert not compare_outputs([ref + 1], ["torch.Tensor"], [ref], [spec], TOL).ok


def test_norm_bound_follows_the_reference_error_on_an_output_that_is_zero_in_exact_arithmetic():
    """The mean of a GroupNorm output is 0 exactly: the float64 truth is ~1e-17 and the fp32
    reference itself misses it by a relative ~1e8. A candidate as close as that reference passes
    when the reference's own error is known; without it, or far from it, it still fails."""
    torch.manual_seed(0)
    truth = torch.randn(128, dtype=torch.float64) * 1e-17
    fp32_like = truth + torch.randn(128, dtype=torch.float64) * 1e-9  # fp32 rounding noise
    spec = {"shape": [128], "dtype": "float32"}
    ref_err = float((fp32_like - truth).norm() / truth.norm())
    assert ref_err > 1e6
    cand = (truth + torch.randn(128, dtype=torch.float64) * 1e-9).float()
    assert compare_outputs([cand], ["torch.Tensor"], [truth], [spec], TOL, [ref_err]).ok
    assert not compare_outputs([cand], ["torch.Tensor"], [truth], [spec], TOL).ok  # no reference error known
    wrong = cand + 0.5  # elementwise bound still decides
    assert not compare_outputs([wrong], ["torch.Tensor"], [truth], [spec], TOL, [ref_err]).ok


def test_norm_bound_is_unchanged_where_the_reference_is_accurate():
    """Values in [0.5, 1.5] off by 1.5e-3 relative: each inside atol + rtol * |ref| (<= 2e-3 there
    for |ref| <= 2), but the relative norm 1.5e-3 is past rel_tol=1e-3; an accurate reference
    (error 1e-7) does not loosen that."""
    ref = torch.rand(4096, dtype=torch.float64) + 0.5
    spec = {"shape": [4096], "dtype": "float32"}
    out = (ref * (1 + 1.5e-3)).float()
    result = compare_outputs([out], ["torch.Tensor"], [ref], [spec], TOL, [1e-7])
    assert not result.ok and result.problems[0].startswith("output 0: relative error")
    assert compare_outputs([(ref * (1 + 5e-4)).float()], ["torch.Tensor"], [ref], [spec], TOL, [1e-7]).ok
    # a reference that meets the bound itself (5e-4 < rel_tol) never loosens it
    assert not compare_outputs([out], ["torch.Tensor"], [ref], [spec], TOL, [5e-4]).ok


def _cases():
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(40, 37, generator=g, dtype=torch.float64)
    close = ref + 1e-6 * torch.randn(40, 37, generator=g, dtype=torch.float64)
    off = close.clone()
    off[3, 5] += 1.0
    poisoned = close.clone()
    poisoned[7, 1] = float("nan")
    ref_nan = ref.clone()
    ref_nan[0, :4] = float("nan")
    close_nan = close.clone()
    close_nan[0, :4] = float("nan")
    wrong_nan = close_nan.clone()
    wrong_nan[0, 0] = 0.0
    return [(close, ref), (off, ref), (poisoned, ref), (torch.zeros_like(ref), ref), (close_nan, ref_nan),
            (wrong_nan, ref_nan), (close.t(), ref.t())]


@pytest.mark.parametrize("index", range(7))
def test_the_comparison_slice_by_slice_says_what_the_whole_tensor_says(index):
    from hercules.harness.checks import Comparison, _compare_values

    out, ref = _cases()[index]
    whole, sliced = Comparison(), Comparison()
    _compare_values(whole, "output 0", out.float(), ref, TOL, 1e-7)
    _compare_values(sliced, "output 0", out.float(), ref, TOL, 1e-7, chunk=97)  # 16 slices, ragged end
    assert (sliced.ok, sliced.problems, sliced.flags) == (whole.ok, whole.problems, whole.flags)
    assert sliced.max_abs_err == whole.max_abs_err
    assert sliced.rel_err == pytest.approx(whole.rel_err, rel=1e-12, abs=1e-300)


def test_relative_error_slice_by_slice_is_the_norm_ratio():
    from hercules.harness.checks import relative_error

    g = torch.Generator().manual_seed(1)
    truth = torch.randn(53, 41, generator=g, dtype=torch.float64)
    value = (truth + 1e-3 * torch.randn(53, 41, generator=g, dtype=torch.float64)).float()
    expected = float((value.double() - truth).norm() / truth.norm())
    assert relative_error(value, truth, chunk=97) == pytest.approx(expected, rel=1e-12)
    assert relative_error(value.t(), truth.t(), chunk=97) == pytest.approx(expected, rel=1e-12)
    assert relative_error(value, torch.zeros_like(truth)) == pytest.approx(float(value.double().norm()))


@pytest.mark.parametrize("index", range(7))
def test_the_all_finite_shortcut_says_what_the_masked_comparison_says(index, monkeypatch):
    """Slices whose values are all finite take fewer passes (dot products, no masks); with that
    path refused, every case must come out the same, figures included."""
    from hercules.harness import checks

    out, ref = _cases()[index]
    fast, masked = checks.Comparison(), checks.Comparison()
    checks._compare_values(fast, "output 0", out.float(), ref, TOL, 1e-7, chunk=97)
    monkeypatch.setattr(checks, "_gather_finite", lambda *args: False)
    checks._compare_values(masked, "output 0", out.float(), ref, TOL, 1e-7, chunk=97)
    assert (fast.ok, fast.problems, fast.flags) == (masked.ok, masked.problems, masked.flags)
    assert fast.max_abs_err == masked.max_abs_err
    assert fast.rel_err == pytest.approx(masked.rel_err, rel=1e-12, abs=1e-300)


def test_squares_past_float64s_range_leave_the_shortcut_for_the_masked_comparison():
    from hercules.harness import checks

    big = torch.full((8,), 1e200, dtype=torch.float64)
    assert not checks._gather_finite(checks._Figures(), big, big, TOL)
    assert checks._gather_finite(checks._Figures(), big / 1e100, big / 1e100, TOL)


def test_a_value_the_problems_dtype_cannot_compute_is_judged_by_the_references_own_miss():
    # Value 1 is ill-conditioned: the problem-dtype reference itself misses the float64 truth by 0.5
    # there. A candidate off by 1.0 at that value is within downcast_ratio x that miss; the same
    # candidate with a miss at the well-conditioned value 0 is not.
    truth = torch.tensor([1.0, 100.0], dtype=torch.float64)
    own = torch.tensor([1.0, 100.5])
    spec = {"shape": [2], "dtype": "float32"}
    ref_err = float((own.double() - truth).norm() / truth.norm())
    close = torch.tensor([1.0, 101.0])
    assert not compare_outputs([close], ["torch.Tensor"], [truth], [spec], TOL, [ref_err]).ok  # without its miss
    assert compare_outputs([close], ["torch.Tensor"], [truth], [spec], TOL, [ref_err], [own]).ok
    wrong = torch.tensor([1.01, 100.0])
    result = compare_outputs([wrong], ["torch.Tensor"], [truth], [spec], TOL, [ref_err], [own])
    assert not result.ok and "1 of 2 values outside" in result.problems[0], result.problems


def _light_cases():
    """Candidate and problem-dtype reference pairs (float32 against float32: a light comparison),
    including values whose float32 squares overflow or underflow."""
    g = torch.Generator().manual_seed(2)
    ref = torch.randn(40, 37, generator=g)
    close = ref + 1e-6 * torch.randn(40, 37, generator=g)
    off = close.clone()
    off[3, 5] += 1.0
    huge, tiny = ref * 1e25, ref * 1e-25  # squares past float32's range; squares below its normals
    return [(close, ref), (off, ref), (torch.zeros_like(ref), ref), (huge * (1 + 1e-6), huge),
            (huge * 1.5, huge), (tiny * (1 + 1e-6), tiny), (tiny * 1.5, tiny), (close.t(), ref.t())]


@pytest.mark.parametrize("index", range(8))
def test_a_light_comparison_in_float32_says_what_float64_says(index):
    """Against a problem-dtype (float32) reference the comparison works in float32; the verdict,
    problems and flags are float64's, and the figures float64's to float32's rounding, including
    where float32 squares overflow (1e25) or underflow (1e-25) and float64 takes over."""
    from hercules.harness.checks import Comparison, _compare_values

    out, ref = _light_cases()[index]
    in32, in64 = Comparison(), Comparison()
    _compare_values(in32, "output 0", out, ref, TOL, None, chunk=97)
    _compare_values(in64, "output 0", out.double(), ref.double(), TOL, None, chunk=97)
    assert (in32.ok, in32.problems == in64.problems, in32.flags) == (in64.ok, True, in64.flags)
    assert in32.max_abs_err == pytest.approx(in64.max_abs_err, rel=1e-6)
    assert in32.rel_err == pytest.approx(in64.rel_err, rel=1e-4, abs=1e-12)
    assert in64.ok == (index in (0, 3, 5, 7))


def test_upstreams_allclose_in_fewer_passes_is_torch_allclose_on_every_value():
    """``within_allclose``'s finite shortcut against torch.allclose on float32 and float64 pairs with
    infinities, NaN, values near the largest finite ones and identical pairs."""
    from hercules.harness.checks import KERNELBENCH_TOLERANCE as K
    from hercules.harness.checks import _allclose

    g = torch.Generator().manual_seed(3)
    answers = set()
    for trial in range(600):
        dtype = (torch.float32, torch.float64)[trial % 2]
        n = int(torch.randint(1, 40, (), generator=g))
        a = torch.randn(n, generator=g, dtype=dtype)
        b = a + torch.randn(n, generator=g, dtype=dtype) * 10 ** torch.empty(n, dtype=dtype).uniform_(-4, 0, generator=g)
        for t in (a, b):
            for value, p in ((float("inf"), 0.03), (float("-inf"), 0.03), (float("nan"), 0.02),
                             (torch.finfo(dtype).max, 0.02)):
                t[torch.rand(n, generator=g) < p] = value
        if trial % 3 == 0:
            b = a.clone()
        expected = torch.allclose(a, b, atol=K.atol, rtol=K.rtol)
        assert _allclose(a, b, K) == expected, (a, b)
        answers.add(expected)
    assert answers == {True, False}
