import math

import pytest
import torch

from apex_core import correctness
from apex_core.correctness import compare_outputs, compare_tensor, poison_, upcast_inputs
from apex_core.interfaces import DEFAULT_TOLERANCES
from apex_core.results import Tolerance

TOL = Tolerance(atol=1e-3, rtol=1e-2)


def test_within_atol_plus_rtol_passes_and_beyond_fails():
    ref = torch.tensor([1.0, 100.0, -2.0], dtype=torch.float64)
    ok = ref + torch.tensor([1e-3 + 1e-2 * 1.0 - 1e-6, 0.5, 0.0], dtype=torch.float64)
    assert compare_tensor("y", ok, ref, TOL).mismatches == 0
    bad = ref + torch.tensor([0.0, 1.01 + 1e-3, 0.0], dtype=torch.float64)
    result = compare_tensor("y", bad, ref, TOL)
    assert result.mismatches == 1
    assert result.max_abs_error == pytest.approx(1.011, rel=1e-6)


def test_nan_where_reference_is_finite_always_fails():
    ref = torch.ones(4)
    out = ref.clone()
    out[2] = math.nan
    accuracy = compare_outputs({"y": out}, {"y": ref}, Tolerance(1.0, 1.0, max_mismatch_ratio=0.5),
                               "before-timing")
    assert not accuracy.passed
    assert accuracy.outputs[0].nonfinite_mismatches == 1


def test_matching_specials_pass_and_mismatched_infinities_fail():
    ref = torch.tensor([math.nan, math.inf, -math.inf, 1.0])
    assert compare_tensor("y", ref.clone(), ref, TOL).mismatches == 0
    flipped = torch.tensor([math.nan, -math.inf, -math.inf, 1.0])
    assert compare_tensor("y", flipped, ref, TOL).nonfinite_mismatches == 1


def test_mismatch_ratio_limit():
    ref = torch.zeros(10) + 1
    out = ref.clone()
    out[0] = 5
    assert compare_outputs({"y": out}, {"y": ref}, Tolerance(1e-3, 0, 0.1), "s").passed
    assert not compare_outputs({"y": out}, {"y": ref}, Tolerance(1e-3, 0, 0.05), "s").passed


def test_missing_output_and_wrong_shape():
    accuracy = compare_outputs({}, {"y": torch.ones(2)}, TOL, "s")
    assert not accuracy.passed and "missing outputs: y" in accuracy.message
    with pytest.raises(ValueError, match="shape"):
        compare_tensor("y", torch.ones(3), torch.ones(2), TOL)


def test_a_comparison_in_chunks_reads_as_one_over_the_whole_output(monkeypatch):
    generator = torch.Generator().manual_seed(0)
    ref = torch.randn((7, 53), generator=generator)
    ref[0, 0], ref[6, 52] = math.nan, math.inf  # specials in the first and the ragged last chunk
    out = ref + 0.02 * torch.randn((7, 53), generator=generator)
    out[3, 1], out[6, 52] = 40.0, -math.inf  # the largest error mid-way, a flipped infinity at the end
    whole = compare_tensor("y", out, ref, TOL)
    monkeypatch.setattr(correctness, "COMPARE_CHUNK", 50)
    chunked = compare_tensor("y", out, ref, TOL)
    assert (chunked.mismatches, chunked.nonfinite_mismatches, chunked.elements) == (
        whole.mismatches, whole.nonfinite_mismatches, 7 * 53)
    assert chunked.nonfinite_mismatches == 1 and chunked.mismatches > 1
    assert chunked.max_abs_error == whole.max_abs_error == pytest.approx(abs(40.0 - float(ref[3, 1])))
    assert chunked.max_rel_error == whole.max_rel_error
    assert chunked.rmse == pytest.approx(whole.rmse, rel=1e-12)


def test_an_empty_output_compares_as_no_error():
    empty = compare_tensor("y", torch.ones(0), torch.ones(0), TOL)
    assert (empty.mismatches, empty.elements, empty.max_abs_error, empty.rmse) == (0, 0, 0.0, 0.0)


def test_half_precision_output_compares_against_float64_reference():
    ref = torch.rand(1000, dtype=torch.float64) + 0.5
    out = ref.half()
    atol, rtol = DEFAULT_TOLERANCES["fp16"]
    assert compare_tensor("y", out, ref, Tolerance(atol, rtol)).mismatches == 0


def test_poison_and_upcast():
    buffers = {"f": torch.zeros(3), "i": torch.zeros(3, dtype=torch.int32)}
    poison_(buffers)
    assert torch.isnan(buffers["f"]).all()
    assert (buffers["i"] < 0).all()
    up = upcast_inputs({"x": torch.ones(2, dtype=torch.float16), "i": torch.ones(2, dtype=torch.int32)},
                       torch.float64)
    assert up["x"].dtype == torch.float64 and up["i"].dtype == torch.int32


# A tolerance so loose that zeros, a constant and noise all pass the element-wise bound:
# the degenerate-output checks must hold anyway (a workload may widen its tolerance this far).
LOOSE = Tolerance(atol=100.0, rtol=1.0)


def _varied(n=4096, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n, generator=gen) * 2 + 1  # in [1, 3)


@pytest.mark.parametrize(("spoil", "words"), [
    (torch.zeros_like, "all zeros where the reference is not"),
    (lambda r: torch.full_like(r, float(r.mean())), "one constant value"),
    (lambda r: torch.full_like(r, math.nan), "NaN/Inf value(s) where the reference is finite"),
    (lambda r: -r, "no closer to the reference than all zeros are"),
    (lambda r: _varied(r.numel(), seed=7) * 3, "no closer to the reference than all zeros are"),
])
def test_a_degenerate_output_fails_however_loose_the_tolerance(spoil, words):
    ref = _varied()
    accuracy = compare_outputs({"y": spoil(ref)}, {"y": ref}, LOOSE, "before-timing")
    assert not accuracy.passed
    assert accuracy.message.startswith("y: ") and words in accuracy.message


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_honest_outputs_never_trip_the_degenerate_checks(dtype):
    ref = _varied().double() - 2  # values of both signs, some near zero
    honest = ref.to(dtype)  # rounded to the cell's dtype, as any honest kernel's output is
    tol = Tolerance(*DEFAULT_TOLERANCES["bf16" if dtype == torch.bfloat16 else "fp16"])
    assert compare_outputs({"y": honest}, {"y": ref}, tol, "s").passed
    assert compare_outputs({"y": honest}, {"y": ref}, LOOSE, "s").passed
    # a reference that varies by less than the output's rounding: an honest constant answer
    flat = torch.full((64,), 1.0, dtype=torch.float64) + torch.linspace(0, 1e-9, 64, dtype=torch.float64)
    assert compare_outputs({"y": flat.to(dtype)}, {"y": flat}, LOOSE, "s").passed
    # a reference below the dtype's smallest normal number: rounding it to zero is honest
    tiny = torch.full((64,), torch.finfo(dtype).tiny / 4, dtype=torch.float64) * torch.linspace(1, 2, 64)
    assert compare_outputs({"y": torch.zeros(64, dtype=dtype)}, {"y": tiny}, LOOSE, "s").passed
    # an all-zero reference answered with zeros, and a single element
    assert compare_outputs({"y": torch.zeros(8, dtype=dtype)}, {"y": torch.zeros(8)}, LOOSE, "s").passed
    assert compare_outputs({"y": torch.ones(1, dtype=dtype)}, {"y": torch.ones(1)}, LOOSE, "s").passed


def test_an_allowed_outlier_is_not_a_degenerate_output():
    ref = torch.ones(10)
    out = ref.clone()
    out[0] = 50  # one mismatch the ratio allows: judged by the ratio, not the norm check
    assert compare_outputs({"y": out}, {"y": ref}, Tolerance(1e-3, 0, 0.1), "s").passed


@pytest.mark.parametrize(("half", "name"), [(torch.float16, "float16"), (torch.bfloat16, "bfloat16")])
def test_a_float32_cell_computed_in_half_precision_fails_with_its_name(half, name):
    ref = (_varied().double() - 2) * 3
    downgraded = ref.to(half).to(torch.float32)  # computed in half, cast back
    accuracy = compare_outputs({"y": downgraded}, {"y": ref}, Tolerance(*DEFAULT_TOLERANCES["fp32"]), "s")
    assert not accuracy.passed
    assert f"every value is exactly a {name} number" in accuracy.message
    assert "precision downgrade" in accuracy.message
    honest_miss = ref.to(torch.float32) + 1e-3  # wrong, but not by rounding to half
    miss = compare_outputs({"y": honest_miss}, {"y": ref}, Tolerance(*DEFAULT_TOLERANCES["fp32"]), "s")
    assert not miss.passed and "precision downgrade" not in miss.message


def test_zeros_for_a_constant_reference_fail_and_the_constant_itself_passes():
    ref = torch.full((32,), 2.5)
    assert "all zeros" in compare_outputs({"y": torch.zeros(32)}, {"y": ref}, LOOSE, "s").message
    assert compare_outputs({"y": ref.clone()}, {"y": ref}, LOOSE, "s").passed
    off = compare_outputs({"y": torch.full((32,), -2.5)}, {"y": ref}, LOOSE, "s")
    assert not off.passed and "no closer to the reference than all zeros" in off.message


def test_no_precision_words_where_the_reference_itself_is_half_precise():
    ref = torch.arange(16, dtype=torch.float32)  # small integers: exact in every dtype
    accuracy = compare_outputs({"y": ref + 1}, {"y": ref}, Tolerance(*DEFAULT_TOLERANCES["fp32"]), "s")
    assert not accuracy.passed and "precision downgrade" not in accuracy.message
