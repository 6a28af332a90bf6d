"""tilessm-scan: every direction and merge against a per-token loop; inputs, params, work."""

from __future__ import annotations

import math

import pytest
import torch

from apex_core.correctness import upcast_inputs
from apex_core.errors import InputValidationError, ParamError
from apex_core.results import Work
from apex_core.workloads.tilessm_scan import TileSSMScan, ssm_scan
from tests.apex_core.workloads.loops import ssm_scan_loop

WORKLOAD = TileSSMScan()
PARAM_NAMES = ("decay", "input_gain", "output_gain", "state_bias")


def case_of(name: str, **overrides):
    cases = WORKLOAD.cases(WORKLOAD.make_params("smoke", overrides))
    return next(c for c in cases if c.name == name)


def run_loop(case, inputs):
    p = case.params
    args = [inputs["tokens"], *(inputs[n] for n in PARAM_NAMES), inputs["init_state"]]
    return ssm_scan_loop(*args, case.name, p.merge, inputs["gate"], p.clamp)


CASES = [
    ("forward", "sum"),
    ("backward", "sum"),
    ("bidirectional", "sum"),
    ("bidirectional", "avg"),
    ("bidirectional", "gated"),
]


@pytest.mark.parametrize(("direction", "merge"), CASES)
@pytest.mark.parametrize(
    "shape",
    [
        {"batch": 2, "channels": 3, "steps": 7, "nonfinite_fraction": 0.1},
        {"batch": 1, "channels": 5, "steps": 1},
        {"batch": 3, "channels": 1, "steps": 4, "clamp": 2.5, "nonfinite_fraction": 0.3},
        {"batch": 1, "channels": 4, "steps": 256},  # the fixed length: 8 doubling passes
        {"batch": 1, "channels": 2, "steps": 37},  # not a power of two
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_reference_matches_loop(direction, merge, shape, seed):
    case = case_of(direction, merge=merge, **shape)
    inputs = upcast_inputs(WORKLOAD.make_inputs(case, "cpu", torch.float64, seed), torch.float64)
    out = WORKLOAD.reference(case, inputs)
    y, states = run_loop(case, inputs)
    names = ["state_fwd", "state_bwd"] if direction == "bidirectional" else ["state"]
    assert sorted(out) == sorted(["y", *names])
    torch.testing.assert_close(out["y"], y, rtol=1e-12, atol=1e-9)
    for name, state in zip(names, states, strict=True):
        torch.testing.assert_close(out[name], state, rtol=1e-12, atol=1e-9)


def test_nonfinite_tokens_clamp_to_plus_minus_clamp():
    tokens = torch.tensor([[[math.nan], [math.inf], [-math.inf], [7.0]]], dtype=torch.float64)
    one, zero = torch.ones(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)
    # decay 0 (clamped to 1e-6) makes the state follow the input at once
    y, (state,) = ssm_scan(tokens, zero, one, one, zero, clamp=5.0)
    expected = torch.tensor([0.0, 5.0, -5.0, 5.0], dtype=torch.float64)
    torch.testing.assert_close(y[0, :, 0], expected, rtol=0, atol=1e-4)  # 1e-6 of the last state
    assert float(state[0, 0]) == pytest.approx(5.0, abs=1e-4)


def test_decay_is_clamped_into_the_open_unit_interval():
    tokens = torch.ones(1, 3, 2, dtype=torch.float64)
    one = torch.ones(2, dtype=torch.float64)
    decay = torch.tensor([1.5, -0.25], dtype=torch.float64)
    y, _ = ssm_scan(tokens, decay, one, one, one * 0, init_state=torch.zeros(1, 2, dtype=torch.float64))
    # d = 1 - 1e-6 barely moves from 0; d = 1e-6 jumps to the input
    assert 0 < float(y[0, -1, 0]) < 1e-5
    assert float(y[0, 0, 1]) == pytest.approx(1.0, abs=1e-5)


def test_backward_is_the_forward_scan_of_the_flipped_sequence():
    case = case_of("backward", batch=2, channels=3, steps=9)
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float32, 0)
    args = (*(inputs[n] for n in PARAM_NAMES),)
    back, (s_back,) = ssm_scan(inputs["tokens"], *args, inputs["init_state"], "backward")
    fwd, (s_fwd,) = ssm_scan(inputs["tokens"].flip(1), *args, inputs["init_state"], "forward")
    assert torch.equal(back, fwd.flip(1)) and torch.equal(s_back, s_fwd)


def test_default_initial_state_is_zero():
    case = case_of("forward", batch=2, channels=3, steps=5)
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float32, 0)
    args = (inputs["tokens"], *(inputs[n] for n in PARAM_NAMES))
    assert torch.equal(ssm_scan(*args)[0], ssm_scan(*args, init_state=torch.zeros(2, 3))[0])


def test_state_is_float32_and_y_takes_the_token_dtype():
    case = case_of("bidirectional", merge="gated")
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float16, 0)
    out = WORKLOAD.reference(case, inputs)
    assert out["y"].dtype == torch.float16
    assert out["state_fwd"].dtype == out["state_bwd"].dtype == torch.float32


def test_inputs_shapes_nonfinite_tokens_and_decays_outside_the_unit_interval():
    case = case_of("forward", batch=2, channels=5, steps=7)
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.bfloat16, 0)
    shapes = {k: (tuple(v.shape), v.dtype) for k, v in inputs.items()}
    vector = ((5,), torch.float32)
    assert shapes == {
        "tokens": ((2, 7, 5), torch.bfloat16),
        "decay": vector,
        "input_gain": vector,
        "output_gain": vector,
        "state_bias": vector,
        "gate": vector,
        "init_state": ((2, 5), torch.float32),
    }
    tokens, decay = inputs["tokens"], inputs["decay"]
    assert bool(torch.isnan(tokens).any() and torch.isposinf(tokens).any() and torch.isneginf(tokens).any())
    assert int(((decay <= 0) | (decay >= 1)).sum()) == 2
    assert bool(((inputs["gate"] >= 0) & (inputs["gate"] <= 1)).all())


def test_bad_direction_and_merge_name_the_choices():
    tokens, one = torch.ones(1, 2, 1), torch.ones(1)
    with pytest.raises(ValueError, match="'up'; choose from forward, backward, bidirectional"):
        ssm_scan(tokens, one, one, one, one, direction="up")
    with pytest.raises(ValueError, match="merge 'gated' needs a gate"):
        ssm_scan(tokens, one, one, one, one, direction="bidirectional", merge="gated")


def test_validate_inputs_rejects_a_gate_outside_the_unit_interval():
    case = case_of("bidirectional", merge="gated", channels=3)
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float32, 0)
    WORKLOAD.validate_inputs(case, inputs)
    inputs["gate"][2] = 1.25
    with pytest.raises(InputValidationError, match=r"gate value 1.25 at \[2\] is out of range \[0.0, 1.0\]"):
        WORKLOAD.validate_inputs(case, inputs)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"merge": "max"}, "merge 'max' is not one of 'sum', 'avg', 'gated'"),
        ({"clamp": 0.0}, "clamp 0.0 must be a finite number > 0"),
        ({"clamp": math.inf}, "clamp inf must be a finite number > 0"),
        ({"steps": -3}, "steps must be a positive integer, got -3"),
    ],
)
def test_params_validation_names_the_value(overrides, message):
    with pytest.raises(ParamError, match=message):
        WORKLOAD.make_params("fixed", overrides)


def test_work_counts_by_hand():
    # 2 x 7 x 3 = 42 tokens; tokens read and y written at 2 bytes = 168; 4 fp32 [3] vectors = 48;
    # init state and final state(s) [2, 3] fp32 = 24 each
    forward = case_of("forward", batch=2, channels=3, steps=7)
    assert WORKLOAD.work(forward, "fp16") == Work(264, 6 * 42, "tokens", 42)
    # fp32 cells read and write their tokens at 4 bytes: 168 more, the fp32 vectors unchanged
    assert WORKLOAD.work(forward, "fp32") == Work(264 + 168, 6 * 42, "tokens", 42)
    both = case_of("bidirectional", batch=2, channels=3, steps=7, merge="avg")
    assert WORKLOAD.work(both, "fp16") == Work(288, 14 * 42, "tokens", 42)
    gated = case_of("bidirectional", batch=2, channels=3, steps=7, merge="gated")
    assert WORKLOAD.work(gated, "fp16") == Work(300, 15 * 42, "tokens", 42)  # + the gate vector
