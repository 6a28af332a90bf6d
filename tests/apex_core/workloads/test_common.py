"""The shared workload helpers, and the input/reference contract checked on all five workloads."""

from __future__ import annotations

import math

import attrs
import pytest
import torch

from apex_core.correctness import DTYPES, compare_outputs, upcast_inputs
from apex_core.errors import InputValidationError, ParamError
from apex_core.workloads import common
from apex_core.workloads.fusiongate import FusionGate
from apex_core.workloads.tile_stage1 import TileStage1
from apex_core.workloads.tilepack import TilePack
from apex_core.workloads.tilessm_scan import TileSSMScan
from apex_core.workloads.tileunpack import TileUnpack
from tests.apex_core.workloads.host_sync import ForbidHostSync

WORKLOADS = (TilePack(), TileUnpack(), FusionGate(), TileSSMScan(), TileStage1())
SMOKE_CASES = [pytest.param(w, case, id=case.id) for w in WORKLOADS for case in w.cases(w.make_params("smoke"))]
# a middle size: odd channel counts, non-square maps, K above the levels, long-ish scans
MEDIUM = {
    "batch": 2,
    "channels": 5,
    "height": 24,
    "width": 40,
    "tile_size": 4,
    "kmax": 12,
    "steps": 64,
}
MEDIUM_CASES = [
    pytest.param(w, case, id=case.id) for w in WORKLOADS for case in w.cases(w.make_params("smoke", MEDIUM))
]


def assert_same(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


# --- the contract, on every workload and case ----------------------------------------------


@pytest.mark.parametrize(("workload", "case"), SMOKE_CASES)
def test_make_inputs_is_deterministic_and_seed_dependent(workload, case):
    first = workload.make_inputs(case, "cpu", torch.float16, 3)
    again = workload.make_inputs(case, "cpu", torch.float16, 3)
    other = workload.make_inputs(case, "cpu", torch.float16, 4)
    assert list(first) == list(again) == list(other)
    for name in first:
        assert_same(first[name], again[name])
        assert first[name].shape == other[name].shape, name
        assert first[name].dtype == other[name].dtype, name
        assert not torch.equal(first[name], other[name]), f"{name} ignores the seed"


@pytest.mark.parametrize(("workload", "case"), SMOKE_CASES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_make_inputs_are_tensors_never_zero_in_the_right_dtypes(workload, case, dtype):
    inputs = workload.make_inputs(case, "cpu", dtype, 0)
    assert any(t.dtype == dtype for t in inputs.values())
    for name, tensor in inputs.items():
        assert isinstance(tensor, torch.Tensor), name
        assert tensor.dtype in (dtype, torch.float32, torch.int32), (name, tensor.dtype)
        assert tensor.is_contiguous(), name
        assert bool((tensor != 0).any()), f"{name} is all zeros"


@pytest.mark.parametrize(("workload", "case"), SMOKE_CASES)
def test_smoke_profile_gives_valid_inputs_and_finite_outputs(workload, case):
    inputs = workload.make_inputs(case, "cpu", torch.float32, 1)
    workload.validate_inputs(case, inputs)
    outputs = workload.reference(case, inputs)
    assert outputs
    for name, tensor in outputs.items():
        assert bool(torch.isfinite(tensor).all()), name


@pytest.mark.parametrize(("workload", "case"), SMOKE_CASES)
def test_reference_leaves_inputs_untouched(workload, case):
    inputs = workload.make_inputs(case, "cpu", torch.float32, 2)
    before = {k: v.clone() for k, v in inputs.items()}
    workload.reference(case, inputs)
    for name, tensor in inputs.items():
        assert_same(tensor, before[name])


@pytest.mark.parametrize(("workload", "case"), SMOKE_CASES)
def test_reference_never_syncs_the_host(workload, case):
    inputs = workload.make_inputs(case, "cpu", torch.float32, 0)
    with ForbidHostSync():
        workload.reference(case, inputs)


def test_host_sync_guard_catches_a_sync():
    with pytest.raises(AssertionError, match="item"), ForbidHostSync():
        torch.ones(2).sum().item()


@pytest.mark.parametrize(("workload", "case"), MEDIUM_CASES)
@pytest.mark.parametrize("dtype_name", ["fp16", "bf16", "fp32"])
def test_reference_in_each_dtype_passes_its_own_tolerance(workload, case, dtype_name):
    """The torch-reference backend runs the reference in the cell's dtype: it must pass the check."""
    tol = workload.tolerance(dtype_name)
    for seed in range(3):
        inputs = workload.make_inputs(case, "cpu", DTYPES[dtype_name], seed)
        outputs = workload.reference(case, inputs)
        expected = workload.reference(case, upcast_inputs(inputs, torch.float64))
        accuracy = compare_outputs(outputs, expected, tol, "before-timing")
        assert accuracy.passed, accuracy.message


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: w.name)
def test_params_are_frozen_attrs_with_shared_field_names(workload):
    params = workload.make_params("fixed")
    shared = {"batch", "channels", "height", "width", "tile_size", "kmax", "steps", "clamp"}
    shared |= {"merge", "nonfinite_fraction"}
    assert {f.name for f in attrs.fields(type(params))} <= shared
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        params.batch = 2
    assert workload.make_params("smoke").batch == 1


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: w.name)
def test_non_positive_sizes_are_param_errors(workload):
    with pytest.raises(ParamError, match="channels must be a positive integer, got 0"):
        workload.make_params("fixed", {"channels": 0})
    with pytest.raises(ParamError, match="batch must be a positive integer, got True"):
        workload.make_params("fixed", {"batch": True})


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: w.name)
def test_widened_tolerances_carry_a_reason(workload):
    for dtype_name in ("fp32", "fp16", "bf16", "fp8"):
        tol = workload.tolerance(dtype_name)
        default = common.DEFAULT_TOLERANCES[dtype_name]
        assert tol.rtol == default[1]
        assert (tol.atol != default[0]) == bool(tol.reason), (dtype_name, tol)
        assert tol.max_mismatch_ratio == 0.0


# --- the helpers ---------------------------------------------------------------------------


def test_tile_grid_helpers_agree():
    assert common.num_tiles(8, 12, 4) == 6
    ids = torch.arange(6, dtype=torch.int32).reshape(1, 6)
    origins = common.tile_origins(ids, 12, 4)
    assert origins.dtype == torch.int32
    assert origins[0].tolist() == [[0, 0], [0, 4], [0, 8], [4, 0], [4, 4], [4, 8]]


def test_tile_pixel_index_reads_whole_tiles():
    image = torch.arange(2 * 3 * 8 * 12, dtype=torch.float64).reshape(2, 3, 8, 12)
    origins = torch.tensor([[[4, 8]], [[1, 3]]])
    tiles = image[common.tile_pixel_index(origins, 3, 4)]
    assert tiles.shape == (2, 1, 3, 4, 4)
    assert torch.equal(tiles[0, 0], image[0, :, 4:8, 8:12])
    assert torch.equal(tiles[1, 0], image[1, :, 1:5, 3:7])


def test_the_tile_grid_check_names_the_side_and_both_values():
    with pytest.raises(ValueError, match="width 130 is not divisible by tile_size 8"):
        common.TileParams(height=128, width=130, tile_size=8)


def test_inject_nonfinite_places_every_kind_deterministically():
    values = torch.ones(1000)
    first = common.SeededRandom(5).inject_nonfinite(values, 0.01)
    again = common.SeededRandom(5).inject_nonfinite(values, 0.01)
    assert_same(first, again)
    assert int(torch.isnan(first).sum()) + int(torch.isinf(first).sum()) == 10
    assert bool(torch.isnan(first).any() and torch.isposinf(first).any() and torch.isneginf(first).any())
    assert torch.equal(values, torch.ones(1000)), "the input must not change"
    tiny = common.SeededRandom(5).inject_nonfinite(torch.ones(4), 0.01)
    assert int((~torch.isfinite(tiny)).sum()) == 3  # at least one of each kind
    assert torch.equal(common.SeededRandom(5).inject_nonfinite(values, 0.0), values)


def test_small_draws_are_the_single_stream_values_they_always_were():
    generator = torch.Generator().manual_seed(3)
    uniform, normal = torch.rand((5, 7), generator=generator), torch.randn((1000,), generator=generator)
    rng = common.SeededRandom(3)
    assert torch.equal(rng.uniform((5, 7)), uniform)
    assert torch.equal(rng.normal((1000,)), normal)


def test_large_draws_fill_in_chunks_and_depend_on_the_seed_alone(monkeypatch):
    # lower the threshold so a small tensor takes the chunked path: several chunks, a ragged last one
    monkeypatch.setattr(common, "PARALLEL_DRAW_VALUES", 1000)
    monkeypatch.setattr(common, "_DRAW_CHUNK", 300)
    first = common.SeededRandom(11).normal((10, 101))
    monkeypatch.setattr(common.os, "cpu_count", lambda: 1)  # one thread: the same values
    assert torch.equal(common.SeededRandom(11).normal((10, 101)), first)
    assert not torch.equal(common.SeededRandom(12).normal((10, 101)), first)
    chunks = first.view(-1).split(300)
    assert not any(torch.equal(chunks[0], c) for c in chunks[1:3]), "every chunk draws its own values"
    assert abs(float(first.mean())) < 0.15 and 0.85 < float(first.std()) < 1.15
    spread = common.SeededRandom(11).uniform((10, 101), -2.0, 3.0)
    assert float(spread.min()) >= -2.0 and float(spread.max()) < 3.0 and float(spread.std()) > 1.0


def test_unique_integers_are_unique_per_row_and_in_range():
    ids = common.SeededRandom(0).unique_integers(4, 10, 12)
    assert ids.dtype == torch.int32 and ids.shape == (4, 10)
    assert all(len(set(row)) == 10 for row in ids.tolist())
    assert int(ids.min()) >= 0 and int(ids.max()) < 12
    with pytest.raises(ValueError, match="cannot draw 13 distinct values"):
        common.SeededRandom(0).unique_integers(1, 13, 12)


def test_place_moves_data_to_the_dtype_and_keeps_the_rest():
    placed = common.place(
        {"x": torch.ones(2), "w": torch.ones(2), "i": torch.ones(2, dtype=torch.int32)},
        "cpu",
        torch.float16,
        data=("x",),
    )
    assert [t.dtype for t in placed.values()] == [torch.float16, torch.float32, torch.int32]


def test_index_checks_name_the_value_and_the_range():
    idx = torch.tensor([[0, 3], [7, 1]], dtype=torch.int32)
    common.check_int_range("idx", idx, 0, 8)
    with pytest.raises(InputValidationError, match=r"idx value 7 at \[1, 0\] is out of range \[0, 7\)"):
        common.check_int_range("idx", idx, 0, 7)
    with pytest.raises(InputValidationError, match="must be an integer tensor"):
        common.check_int_range("idx", idx.float(), 0, 8)
    with pytest.raises(InputValidationError, match="repeats value 3 in row 0"):
        common.check_unique_rows("idx", torch.tensor([[3, 1, 3]]))
    with pytest.raises(InputValidationError, match=r"alpha value nan is out of range \[0.0, 1.0\]"):
        common.check_real_range("alpha", torch.tensor(math.nan), 0.0, 1.0)
    with pytest.raises(InputValidationError, match=r"gate value 1.5 at \[1\]"):
        common.check_real_range("gate", torch.tensor([0.5, 1.5]), 0.0, 1.0)
    with pytest.raises(InputValidationError, match=r"idx has shape \[2, 2\], expected \[2, 3\]"):
        common.check_shape("idx", idx, (2, 3))
