"""tilepack: the reference against a pixel loop, inputs, validation and the work count."""

from __future__ import annotations

import pytest
import torch

from apex_core.correctness import upcast_inputs
from apex_core.errors import InputValidationError, ParamError
from apex_core.results import Work
from apex_core.workloads.tilepack import TilePack, tilepack
from tests.apex_core.workloads.loops import tilepack_loop

WORKLOAD = TilePack()


def case_of(**overrides):
    return WORKLOAD.cases(WORKLOAD.make_params("smoke", overrides))[0]


# batch 2 and 3 channels on a non-square 8 x 12 map of 6 tiles; K = 1, a few, more than the grid
SMALL = {"batch": 2, "channels": 3, "height": 8, "width": 12, "tile_size": 4}


@pytest.mark.parametrize("kmax", [1, 5, 9])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reference_matches_loop(kmax, seed):
    case = case_of(**SMALL, kmax=kmax)
    inputs = upcast_inputs(WORKLOAD.make_inputs(case, "cpu", torch.float64, seed), torch.float64)
    out = WORKLOAD.reference(case, inputs)
    assert list(out) == ["packed"]
    expected = tilepack_loop(inputs["features"], inputs["idx"], 4)
    torch.testing.assert_close(out["packed"], expected, rtol=0, atol=0)


def test_duplicates_and_order_are_kept():
    features = torch.randn(1, 5, 6, 9, dtype=torch.float64)
    idx = torch.tensor([[4, 0, 4, 5, 4]], dtype=torch.int32)  # 2 x 3 grid of 3 x 3 tiles
    packed = tilepack(features, idx, 3)
    assert packed.shape == (1, 5, 5, 3, 3)
    assert torch.equal(packed[0, 0], features[0, :, 3:6, 3:6])
    assert torch.equal(packed[0, 1], features[0, :, 0:3, 0:3])
    assert torch.equal(packed[0, 3], features[0, :, 3:6, 6:9])
    assert torch.equal(packed[0, 0], packed[0, 2]) and torch.equal(packed[0, 0], packed[0, 4])
    torch.testing.assert_close(packed, tilepack_loop(features, idx, 3), rtol=0, atol=0)


def test_inputs_shapes_and_dtypes():
    case = case_of(**SMALL, kmax=9)
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float16, 0)
    assert {k: (tuple(v.shape), v.dtype) for k, v in inputs.items()} == {
        "features": ((2, 3, 8, 12), torch.float16),
        "idx": ((2, 9), torch.int32),
    }
    assert int(inputs["idx"].min()) >= 0 and int(inputs["idx"].max()) < 6
    WORKLOAD.validate_inputs(case, inputs)


@pytest.mark.parametrize("bad", [-1, 6])
def test_validate_inputs_rejects_an_out_of_range_tile_id(bad):
    case = case_of(**SMALL, kmax=3)
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float32, 0)
    inputs["idx"][1, 2] = bad
    with pytest.raises(InputValidationError, match=rf"idx value {bad} at \[1, 2\] is out of range \[0, 6\)"):
        WORKLOAD.validate_inputs(case, inputs)


def test_params_reject_a_map_the_tiles_do_not_divide():
    with pytest.raises(ParamError, match="height 130 is not divisible by tile_size 8"):
        WORKLOAD.make_params("fixed", {"height": 130})


def test_work_counts_by_hand():
    # 2 x 5 tiles of 3 x 4 x 4 = 480 elements, read and written at 2 bytes, plus 10 int32 ids
    assert WORKLOAD.work(case_of(**SMALL, kmax=5), "fp16") == Work(1960, 0, "tiles", 10)
    fixed = WORKLOAD.cases(WORKLOAD.make_params("fixed"))[0]
    assert WORKLOAD.work(fixed, "fp16") == Work(2 * 32 * 128 * 64 * 2 + 32 * 4, 0, "tiles", 32)
    # the cell's dtype sets the data bytes: fp32 moves twice the tile bytes of fp16, bf16 the same
    assert WORKLOAD.work(fixed, "fp32") == Work(2 * 32 * 128 * 64 * 4 + 32 * 4, 0, "tiles", 32)
    assert WORKLOAD.work(fixed, "bf16") == WORKLOAD.work(fixed, "fp16")
