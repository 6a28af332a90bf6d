import math

import pytest
import torch

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
