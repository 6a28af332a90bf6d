"""fusiongate: the reference against a pixel loop with NaN/Inf proxies; inputs, params, work."""

from __future__ import annotations

import math

import pytest
import torch

from apex_core.correctness import upcast_inputs
from apex_core.errors import ParamError
from apex_core.results import Work
from apex_core.workloads.fusiongate import FusionGate, fusion_gate
from tests.apex_core.workloads.loops import fusion_gate_loop

WORKLOAD = FusionGate()
NAMES = ("boundary", "uncertainty", "base", "detail", "wb", "wu", "bias")


def case_of(**overrides):
    return WORKLOAD.cases(WORKLOAD.make_params("smoke", overrides))[0]


@pytest.mark.parametrize(
    "shape",
    [
        {"batch": 2, "channels": 3, "height": 5, "width": 7, "nonfinite_fraction": 0.1},
        {"batch": 1, "channels": 1, "height": 1, "width": 3, "nonfinite_fraction": 0.5},
        {"batch": 1, "channels": 5, "height": 6, "width": 4, "nonfinite_fraction": 0.0},
    ],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reference_matches_loop(shape, seed):
    case = case_of(**shape)
    inputs = upcast_inputs(WORKLOAD.make_inputs(case, "cpu", torch.float64, seed), torch.float64)
    out = WORKLOAD.reference(case, inputs)
    assert sorted(out) == ["alpha", "fused"]
    scalars = [float(inputs[n]) for n in ("wb", "wu", "bias")]
    alpha, fused = fusion_gate_loop(*(inputs[n] for n in NAMES[:4]), *scalars)
    torch.testing.assert_close(out["alpha"], alpha, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out["fused"], fused, rtol=1e-12, atol=1e-12)
    assert bool(torch.isfinite(out["fused"]).all())


def test_proxies_are_sanitized_nan_to_0_inf_to_1():
    base, detail = torch.zeros(1, 2, 1, 3), torch.ones(1, 2, 1, 3)
    w, zero = torch.tensor(1.0), torch.tensor(0.0)
    weird = torch.tensor([[[[math.nan, math.inf, -math.inf]]]])
    plain = torch.tensor([[[[0.0, 1.0, 0.0]]]])
    alpha, fused = fusion_gate(weird, weird, base, detail, w, w, zero)
    expected_alpha, expected_fused = fusion_gate(plain, plain, base, detail, w, w, zero)
    assert torch.equal(alpha, expected_alpha) and torch.equal(fused, expected_fused)
    assert alpha.shape == (1, 1, 1, 3) and fused.shape == (1, 2, 1, 3)


def test_outputs_take_the_data_dtype():
    case = case_of()
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float16, 0)
    out = WORKLOAD.reference(case, inputs)
    assert out["alpha"].dtype == out["fused"].dtype == torch.float16


def test_inputs_carry_every_kind_of_nonfinite_proxy():
    case = case_of(batch=2, channels=3, height=8, width=12)
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float16, 0)
    assert {k: (tuple(v.shape), v.dtype) for k, v in inputs.items()} == {
        "boundary": ((2, 1, 8, 12), torch.float16),
        "uncertainty": ((2, 1, 8, 12), torch.float16),
        "base": ((2, 3, 8, 12), torch.float16),
        "detail": ((2, 3, 8, 12), torch.float16),
        "wb": ((), torch.float32),
        "wu": ((), torch.float32),
        "bias": ((), torch.float32),
    }
    for name in ("boundary", "uncertainty"):
        proxy = inputs[name]
        assert bool(torch.isnan(proxy).any() and torch.isposinf(proxy).any() and torch.isneginf(proxy).any())
    assert bool(torch.isfinite(inputs["base"]).all() and torch.isfinite(inputs["detail"]).all())


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"nonfinite_fraction": 1.0}, r"nonfinite_fraction 1.0 is not in \[0, 1\)"),
        ({"nonfinite_fraction": -0.1}, r"nonfinite_fraction -0.1 is not in \[0, 1\)"),
        ({"height": 0}, "height must be a positive integer, got 0"),
    ],
)
def test_params_validation_names_the_value(overrides, message):
    with pytest.raises(ParamError, match=message):
        WORKLOAD.make_params("fixed", overrides)


def test_work_counts_by_hand():
    # 2 x 5 x 7 = 70 pixels, x 3 channels = 210 elements; read boundary, uncertainty, base,
    # detail and write alpha, fused at 2 bytes: (3 x 70 + 3 x 210) x 2 = 1680, + 3 fp32 scalars
    case = case_of(batch=2, channels=3, height=5, width=7)
    assert WORKLOAD.work(case, "fp16") == Work(1692, 7 * 70 + 3 * 210, "elements", 210)
