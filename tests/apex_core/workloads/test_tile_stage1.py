"""tile-stage1: the reference against a pixel loop; unique ids, validation, params and work."""

from __future__ import annotations

import pytest
import torch

from apex_core.correctness import upcast_inputs
from apex_core.errors import InputValidationError, ParamError
from apex_core.results import Work
from apex_core.workloads.tile_stage1 import TileStage1, tile_stage1
from tests.apex_core.workloads.loops import tile_stage1_loop

WORKLOAD = TileStage1()
NAMES = ("x", "idx", "vs", "vb", "gs", "gb")
# batch 2 and 3 channels on a non-square 8 x 12 map of 6 tiles of 4 x 4
SMALL = {"batch": 2, "channels": 3, "height": 8, "width": 12, "tile_size": 4}


def case_of(**overrides):
    return WORKLOAD.cases(WORKLOAD.make_params("smoke", overrides))[0]


@pytest.mark.parametrize("kmax", [1, 4, 9])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reference_matches_loop(kmax, seed):
    case = case_of(**SMALL, kmax=kmax)
    inputs = upcast_inputs(WORKLOAD.make_inputs(case, "cpu", torch.float64, seed), torch.float64)
    out = WORKLOAD.reference(case, inputs)
    assert list(out) == ["out"]
    expected = tile_stage1_loop(*(inputs[n] for n in NAMES), 4)
    torch.testing.assert_close(out["out"], expected, rtol=1e-12, atol=1e-12)


def test_pixels_outside_the_tiles_are_copied():
    x = torch.randn(1, 2, 4, 8, dtype=torch.float64)
    ones, zeros = torch.ones(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64)
    out = tile_stage1(x, torch.tensor([[1]], dtype=torch.int32), ones, zeros, ones, zeros, 4)
    assert torch.equal(out[..., :4], x[..., :4])
    torch.testing.assert_close(out[..., 4:], x[..., 4:] * x[..., 4:].clamp_min(0))


def test_k_is_capped_by_the_grid_and_ids_are_unique():
    case = case_of(**SMALL, kmax=9)
    assert case.params.k == 6
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float16, 0)
    assert {k: (tuple(v.shape), v.dtype) for k, v in inputs.items()} == {
        "x": ((2, 3, 8, 12), torch.float16),
        "idx": ((2, 6), torch.int32),
        "vs": ((3,), torch.float16),
        "vb": ((3,), torch.float16),
        "gs": ((3,), torch.float16),
        "gb": ((3,), torch.float16),
    }
    assert [sorted(row) for row in inputs["idx"].tolist()] == [list(range(6))] * 2
    WORKLOAD.validate_inputs(case, inputs)


def test_validate_inputs_rejects_a_repeated_tile_id():
    case = case_of(**SMALL, kmax=3)
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float32, 0)
    inputs["idx"][1, 2] = inputs["idx"][1, 0]
    with pytest.raises(InputValidationError, match="in row 1; indices must be unique"):
        WORKLOAD.validate_inputs(case, inputs)


def test_validate_inputs_rejects_an_out_of_range_tile_id():
    case = case_of(**SMALL, kmax=3)
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float32, 0)
    inputs["idx"][0, 1] = 6
    with pytest.raises(InputValidationError, match=r"idx value 6 at \[0, 1\] is out of range \[0, 6\)"):
        WORKLOAD.validate_inputs(case, inputs)


def test_params_reject_a_map_the_tiles_do_not_divide():
    with pytest.raises(ParamError, match="height 10 is not divisible by tile_size 4"):
        WORKLOAD.make_params("smoke", {"height": 10})


def test_work_counts_by_hand():
    # x read and out written: 2 x 576 elements at 2 bytes = 2304; 2 x 4 int32 ids = 32;
    # 4 vectors of 3 at 2 bytes = 24. FLOPs: 5 per element of 8 tiles of 3 x 16
    assert WORKLOAD.work(case_of(**SMALL, kmax=4), "fp16") == Work(2360, 5 * 8 * 48, "tiles", 8)
