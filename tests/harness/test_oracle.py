"""The oracle beyond one input distribution, without any process: which transforms a problem
admits, what a candidate failing one is, the transforms and perturbations themselves on real
tensors, and the dependence test that finds degenerate problems."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from hercules.harness import oracle
from hercules.harness.checks import DEFAULT_TOLERANCES, relative_error
from hercules.harness.dependence import find_dependence, same_outputs
from hercules.harness.oracle import FAILED, PARAMETERS, PASSED, SKIPPED, ReferenceOnTransform, TransformResult
from hercules.harness.perturb import perturbed, perturbed_construction
from hercules.harness.records import Degeneracy, Flag, Status, Verdict, Speedups, verdict_from_json
from hercules.harness.transforms import EDGE_STRIDE, TRANSFORMS, transform_inputs

FP32 = DEFAULT_TOLERANCES["float32"]


# ---- which transforms are meaningful ---------------------------------------------------------


def test_a_transform_the_reference_computes_well_is_used():
    found = ReferenceOnTransform("scale_x100", ref_err=3e-7)
    assert oracle.skip_reason(found, usual_err=1e-7, tol=FP32) is None
    # Above its usual error but within the tolerance it is judged at: still meaningful (a shift of
    # 100 rms costs an fp32 LayerNorm ~1e-5 where randn costs ~1e-7).
    assert oracle.skip_reason(ReferenceOnTransform("shift", ref_err=5e-4), 1e-7, FP32) is None


@pytest.mark.parametrize("found, words", [
    (ReferenceOnTransform("zeros", error="ValueError: log of zero"), "raised"),
    (ReferenceOnTransform("shift", has_truth=False, ref_err=None), "no float64 truth"),
    (ReferenceOnTransform("scale_x100", nonfinite=12, ref_err=float("nan")), "not finite there (12 values)"),
    (ReferenceOnTransform("extremes", ref_err=float("inf")), "not finite"),
    (ReferenceOnTransform("shift", ref_err=2e-2), "misses the float64 truth by 2.00e-02"),
])
def test_a_transform_the_reference_itself_gets_wrong_is_skipped_with_why(found, words):
    reason = oracle.skip_reason(found, usual_err=1e-7, tol=FP32)
    assert reason is not None and words in reason


def test_index_outputs_are_not_judged_on_transforms_that_make_ties():
    # argmax over rows with every 16th value zero or of one extreme magnitude, or shifted so far that
    # close values round together: maxima tie, and which index an honest kernel returns is its own
    # choice. The scales keep every value's relative precision.
    specs = [{"shape": [128], "dtype": "int64"}]
    assert oracle.has_integer_outputs(specs) and not oracle.has_integer_outputs([{"shape": [2], "dtype": "bfloat16"}])
    exact = dict(ref_err=0.0)
    for name in ("zeros", "extremes", "shift"):
        reason = oracle.skip_reason(ReferenceOnTransform(name, **exact), 0.0, FP32, integer_outputs=True)
        assert reason is not None and "ties" in reason
        assert oracle.skip_reason(ReferenceOnTransform(name, **exact), 0.0, FP32) is None
    for name in ("scale_x100", "scale_x0.01"):
        assert oracle.skip_reason(ReferenceOnTransform(name, **exact), 0.0, FP32, integer_outputs=True) is None


def test_a_reference_that_misses_the_tolerance_in_the_trials_keeps_its_usual_error_as_the_bar():
    # An output zero in exact arithmetic: the fp32 reference's own error is 0.3 on every draw.
    assert oracle.skip_reason(ReferenceOnTransform("scale_x0.01", ref_err=0.9), 0.3, FP32) is None
    assert oracle.skip_reason(ReferenceOnTransform("scale_x0.01", ref_err=3.5), 0.3, FP32) is not None


# ---- what results -----------------------------------------------------------------------------


def test_fragile_inputs_names_every_transform_that_broke_the_candidate():
    results = [TransformResult("scale_x100", FAILED, "output 0: 512 NaN/Inf values where the reference is finite"),
               TransformResult("scale_x0.01", PASSED), TransformResult("shift", FAILED, "values differ"),
               TransformResult("zeros", SKIPPED, "the reference raised")]
    finding = oracle.fragile_finding(results)
    assert finding is not None and finding.flag == Flag.FRAGILE_INPUTS.value == "fragile_inputs"
    assert "scale_x100, shift" in finding.note and "NaN/Inf" in finding.note and "times 100" in finding.note
    assert oracle.summary(results) == ("scale_x100: failed", "scale_x0.01: passed", "shift: failed",
                                       "zeros: skipped")
    assert oracle.skipped_note(results) == "transforms not meaningful for this problem, left out: zeros: the reference raised"


def test_no_flag_when_every_transform_passed_or_was_skipped():
    results = [TransformResult(n, PASSED) for n in oracle.TRANSFORM_NAMES] + [TransformResult("x", SKIPPED, "why")]
    assert oracle.fragile_finding(results) is None
    assert oracle.skipped_note([TransformResult(n, PASSED) for n in oracle.TRANSFORM_NAMES]) is None


def test_perturbed_parameters_are_judged_by_the_trials_not_flagged():
    used = oracle.parameters_result({"perturbed": True, "why": None})
    assert used == TransformResult(PARAMETERS, PASSED, oracle.IN_TRIALS)
    assert oracle.after_trials(used, trials_correct=True) is used and oracle.trials_note(used) is None
    wrong = oracle.after_trials(used, trials_correct=False)
    assert wrong.outcome == FAILED and "default initialisation" in oracle.trials_note(wrong)
    # A candidate wrong with perturbed parameters is incorrect (the trials say so), never fragile.
    assert oracle.fragile_finding([wrong]) is None
    skipped = oracle.parameters_result({"perturbed": False, "why": "the reference raised"})
    assert skipped.outcome == SKIPPED and oracle.after_trials(skipped, False) is skipped
    assert oracle.parameters_result({"perturbed": False, "why": None}) is None  # nothing to perturb


def test_degeneracy_from_the_reference_workers_reply():
    assert oracle.degeneracy({"ignored": [], "constant": False}) is None
    found = oracle.degeneracy({"ignored": [0], "constant": True, "ignored_bytes": 4096, "names": ["x"],
                               "signature": ["(32, 32):float32"]})
    assert found == Degeneracy(("input 0 (x, (32, 32):float32)",), True, 4096)
    assert "do not depend on its inputs" in oracle.degeneracy_note(found)
    assert "output write alone" in oracle.degeneracy_note(found)
    partial = oracle.degeneracy({"ignored": [1], "constant": False, "ignored_bytes": 8, "names": ["x"],
                                 "signature": ["(2,):float32", "(2,):float32"]})
    assert partial.ignored_inputs == ("input 1 ((2,):float32)",) and not partial.constant_output
    assert "do not depend on input 1" in oracle.degeneracy_note(partial)


def test_the_degenerate_field_survives_the_verdict_json():
    found = Degeneracy(("input 0 (x)",), True, 100)
    verdict = Verdict(status=Status.OK, correct=True, flags=(), error=None, max_abs_err=0.0, rel_err=0.0, ref_ms=1.0,
                      cand_ms=1.0, speedup=Speedups(), sol_fraction=None, degenerate_problem=found)
    assert verdict_from_json(verdict.to_json()).degenerate_problem == found


# ---- the transforms on real tensors -----------------------------------------------------------


def _softmax_without_max(x: torch.Tensor) -> torch.Tensor:
    e = torch.exp(x)
    return e / e.sum(-1, keepdim=True)


def test_softmax_without_max_subtraction_is_exact_on_randn_and_broken_by_scaling_and_shifting():
    torch.manual_seed(0)
    x = torch.randn(64, 256)
    truth = torch.softmax(x.double(), -1)
    assert relative_error(_softmax_without_max(x), truth) < 1e-6
    broken = []
    for name in TRANSFORMS:
        (t,) = transform_inputs([x], name)
        reference, candidate = torch.softmax(t, -1), _softmax_without_max(t)
        assert torch.isfinite(reference).all(), name  # the reference stays right on every transform
        if not torch.isfinite(candidate).all():
            broken.append(name)
    assert set(broken) >= {"scale_x100", "shift", "extremes"}


def test_transforms_keep_shapes_and_dtypes_and_leave_integer_inputs_alone():
    torch.manual_seed(0)
    values = [torch.randn(8, 40), torch.randint(0, 10, (8,)), 3, torch.rand(8, 40, dtype=torch.float64).bfloat16()]
    for name in TRANSFORMS:
        out = transform_inputs(values, name)
        assert [type(v) for v in out] == [type(v) for v in values]
        assert out[1] is values[1] and out[2] == 3
        for a, b in ((out[0], values[0]), (out[3], values[3])):
            assert a.shape == b.shape and a.dtype == b.dtype and not torch.equal(a, b)
    scaled = transform_inputs(values, "scale_x100")[0]
    assert torch.allclose(scaled, values[0] * 100)
    flat = transform_inputs(values, "zeros")[0].reshape(-1)
    assert (flat[3::EDGE_STRIDE] == 0).all()
    extremes = transform_inputs(values, "extremes")[0].reshape(-1)
    original = values[0].reshape(-1)
    assert (extremes[11::EDGE_STRIDE].abs() >= 100 * original.abs().max() * 0.999).all()
    assert (torch.sign(extremes[11::EDGE_STRIDE]) == torch.where(original[11::EDGE_STRIDE] < 0, -1.0, 1.0)).all()
    positive = transform_inputs([torch.rand(4, 64)], "extremes")[0]
    assert (positive >= 0).all()  # an input that is positive stays positive


def test_transforms_keep_the_exact_zeros_and_the_symmetry_the_inputs_hold():
    torch.manual_seed(0)
    lower = torch.tril(torch.randn(48, 48))  # a triangular product's inputs (KernelBench level 1 #15)
    symmetric = torch.randn(2, 40, 40)
    symmetric = symmetric + symmetric.transpose(-1, -2)  # level 1 #13's
    dense = torch.randn(8, 40)
    for name in TRANSFORMS:
        kept_lower, kept_symmetric, kept_dense = transform_inputs([lower, symmetric, dense], name)
        assert torch.equal(torch.triu(kept_lower, diagonal=1), torch.zeros(48, 48)), name
        assert not torch.equal(kept_lower, lower) and torch.equal(kept_lower == 0, (lower == 0) | (kept_lower == 0))
        assert torch.equal(kept_symmetric, kept_symmetric.transpose(-1, -2)), name
        assert torch.equal(kept_dense, TRANSFORMS[name](dense)), name  # nothing to keep: the plain transform
    # The shift moves every non-zero value of the triangle, as it moves a dense input
    shifted = transform_inputs([lower], "shift")[0]
    inside = torch.tril(torch.ones(48, 48, dtype=torch.bool)) & (lower != 0)
    assert (shifted[inside] - lower[inside]).abs().min() > 50


# ---- parameters drawn away from their defaults ------------------------------------------------


def test_layernorm_weight_and_bias_leave_one_and_zero_and_vary_along_the_row():
    with perturbed_construction(1234) as moves:
        norm = nn.LayerNorm(256)
    assert moves.moved >= 2
    w, b = norm.weight.detach(), norm.bias.detach()
    assert (w != 1).all() and (b != 0).all()
    assert 0.5 <= float(w.min()) and float(w.max()) <= 1.5 and float(b.abs().max()) <= 0.5
    assert float(w.std()) > 0.1 and float(b.std()) > 0.1
    x = torch.randn(16, 256)
    x = (x - x.mean(-1, keepdim=True)) / x.std(-1, unbiased=False, keepdim=True)
    with torch.no_grad():
        assert relative_error(x, norm(x)) > 0.1  # a copy kernel is far off now


def test_the_same_seed_moves_the_same_values_the_same_way_wherever_they_are_kept():
    torch.manual_seed(7)
    with perturbed_construction(99):
        reference = nn.Sequential(nn.Linear(32, 16), nn.BatchNorm1d(16))
    torch.manual_seed(7)
    with perturbed_construction(99):
        candidate = nn.Sequential(nn.Linear(32, 16), nn.BatchNorm1d(16))
        # A candidate that also keeps a transposed copy of the weight, and a view of the bias, made
        # in its constructor: copies of the moved values, not moved again.
        candidate.register_buffer("weight_t", candidate[0].weight.detach().t().contiguous())
        candidate.register_buffer("bias_view", candidate[0].bias.detach().view(4, 4))
        scratch = torch.empty(64).zero_()  # neither a parameter nor a buffer: left as made
    assert (scratch == 0).all()
    theirs = candidate.state_dict()
    for name, value in reference.state_dict().items():
        assert torch.equal(value, theirs[name]), name
    assert torch.equal(candidate.weight_t, reference[0].weight.detach().t())
    assert torch.equal(candidate.bias_view.reshape(-1), reference[0].bias.detach())  # moved once, not twice
    running_var = reference[1].running_var
    assert (running_var > 0).all() and not (running_var == 1).all()  # stays a variance
    assert int(reference[1].num_batches_tracked) == 0  # integer buffers untouched
    other = perturbed(torch.ones(8), seed=100)
    assert not torch.equal(other, perturbed(torch.ones(8), seed=99))


def _moved_whole(t: torch.Tensor, seed: int) -> torch.Tensor:
    """The move written out for a whole tensor at once (no chunks), as the module describes it."""
    from hercules.harness.perturb import SPREAD, _MASK32, _bits, _hash32, _uniform

    flat = t.reshape(-1)
    constant = bool((flat == flat[0]).all())
    if constant:
        index = torch.arange(flat.numel(), dtype=torch.int64)
        keys = _hash32((index & _MASK32) ^ _bits(flat[:1]))
    else:
        keys = _bits(flat)
    u = _uniform(keys, seed)
    moved = SPREAD * u if constant and float(flat[0]) == 0.0 else flat.double() * (1.0 + SPREAD * u)
    return moved.to(t.dtype).reshape(t.shape)


@pytest.mark.parametrize("make", [lambda: torch.randn(7, 13), lambda: torch.ones(91), lambda: torch.zeros(5, 19),
                                  lambda: torch.randn(40, dtype=torch.float64), lambda: torch.randn(33).half()])
def test_a_move_computed_in_chunks_or_elsewhere_is_the_same_move(monkeypatch, make):
    """Large tensors are moved a chunk at a time, on the worker's GPU (level 3 #1's three 16384 x
    16384 layers took 113 s on two CPU threads): the values must be those of one whole move, or
    the reference's and the candidate's parameters would part where a chunk ends."""
    from hercules.harness import perturb

    t = make()
    whole = _moved_whole(t, 4321)
    monkeypatch.setattr(perturb, "CHUNK", 8)  # many chunks, boundaries inside rows
    assert torch.equal(perturb.perturbed(t, 4321), whole)
    assert torch.equal(perturb.perturbed(t, 4321, torch.device("cpu")), whole)
    if torch.cuda.is_available():
        assert torch.equal(perturb.perturbed(t, 4321, torch.device("cuda")), whole)


# ---- degenerate problems ------------------------------------------------------------------------


def _draws(seed: int, *shapes: tuple[int, ...]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(*s, generator=g) for s in shapes]


def test_a_constant_output_is_found_and_needs_no_input_read():
    # KernelBench level 2 #83 in small: min(x, 0) clamped to [0, 1] is zero whatever x.
    def run(values):
        x = values[0] * 3 - 1
        return [torch.clamp(torch.minimum(x, torch.tensor(0.0)), 0.0, 1.0)]

    base, others = _draws(0, (8, 8)), [_draws(1, (8, 8)), _draws(2, (8, 8))]
    found = find_dependence(run, base, others, run(base))
    assert found.ignored == (0,) and found.constant and found.ignored_bytes == 8 * 8 * 4


def test_one_ignored_input_among_several_is_named_and_the_others_are_not():
    def run(values):
        x, y, z = values
        return [x @ z]  # y is never read

    shapes = ((4, 5), (4, 5), (5, 3))
    base = _draws(0, *shapes)
    found = find_dependence(run, base, [_draws(1, *shapes), _draws(2, *shapes)], run(base))
    assert found.testable == (0, 1, 2) and found.ignored == (1,) and not found.constant
    assert found.ignored_bytes == 4 * 5 * 4


def test_an_input_that_matters_or_cannot_be_told_is_never_called_ignored():
    def run(values):
        return [values[0] * values[1]]

    fixed = torch.arange(6.0)  # the same on every draw: untestable, so not claimed
    base = [_draws(0, (6,))[0], fixed]
    others = [[_draws(s, (6,))[0], fixed.clone()] for s in (1, 2)]
    found = find_dependence(run, base, others, run(base))
    assert found.testable == (0,) and found.ignored == () and not found.constant
    assert same_outputs([torch.tensor([float("nan")])], [torch.tensor([float("nan")])])
    assert not same_outputs([torch.zeros(2)], [torch.zeros(2, dtype=torch.float64)])
