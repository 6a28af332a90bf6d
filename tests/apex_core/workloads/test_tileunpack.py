"""tileunpack: override, blend and overlap against pixel loops; priority, inputs, validation, work."""

from __future__ import annotations

import pytest
import torch

from apex_core.correctness import upcast_inputs
from apex_core.errors import InputValidationError, ParamError
from apex_core.results import Work
from apex_core.workloads.tileunpack import NUM_LEVELS, TileUnpack, tile_origins, tileunpack
from tests.apex_core.workloads.loops import unpack_blend_loop, unpack_override_loop

WORKLOAD = TileUnpack()
# batch 2 and 3 channels on a non-square 8 x 12 map of 6 tiles of 4 x 4
SMALL = {"batch": 2, "channels": 3, "height": 8, "width": 12, "tile_size": 4}


def case_of(name: str, **overrides):
    cases = WORKLOAD.cases(WORKLOAD.make_params("smoke", overrides))
    return next(c for c in cases if c.name == name)


def loop_of(case_name: str, inputs):
    args = (inputs["base"], inputs["packed"], inputs["origins"], inputs["levels"])
    if case_name == "blend":
        return unpack_blend_loop(*args, float(inputs["alpha"]))
    return unpack_override_loop(*args)


@pytest.mark.parametrize("case_name", ["override", "blend", "overlap"])
@pytest.mark.parametrize("kmax", [1, 2, 5, 9])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reference_matches_loop(case_name, kmax, seed):
    case = case_of(case_name, **SMALL, kmax=kmax)
    inputs = upcast_inputs(WORKLOAD.make_inputs(case, "cpu", torch.float64, seed), torch.float64)
    out = WORKLOAD.reference(case, inputs)
    assert list(out) == ["out"]
    torch.testing.assert_close(out["out"], loop_of(case_name, inputs), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case_name", ["override", "blend", "overlap"])
def test_inputs_force_an_overlap_with_a_tie(case_name):
    case = case_of(case_name, **SMALL, kmax=5)
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float16, 0)
    assert {k: (tuple(v.shape), v.dtype) for k, v in inputs.items()} == {
        "base": ((2, 3, 8, 12), torch.float16),
        "packed": ((2, 5, 3, 4, 4), torch.float16),
        "origins": ((2, 5, 2), torch.int32),
        "levels": ((2, 5), torch.int32),
        "alpha": ((), torch.float32),
    }
    origins, levels = inputs["origins"], inputs["levels"]
    assert torch.equal(levels[:, 0], levels[:, -1])
    assert bool(((origins[:, 0] - origins[:, -1]).abs() < 4).all()), "first and last tiles overlap"
    assert 0.2 <= float(inputs["alpha"]) <= 0.8
    if case_name != "overlap":
        assert bool((origins % 4 == 0).all())
    WORKLOAD.validate_inputs(case, inputs)


def test_overlap_origins_straddle_tiles():
    case = case_of("overlap", kmax=32)  # smoke map, 32 tiles
    origins = WORKLOAD.make_inputs(case, "cpu", torch.float32, 0)["origins"]
    assert bool((origins % 4 != 0).any())
    assert int(origins.max()) <= 12 and int(origins.min()) >= 0


def test_priority_higher_level_wins_then_later_k():
    base = torch.zeros(1, 1, 4, 4, dtype=torch.float64)
    packed = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64).reshape(1, 3, 1, 1, 1).expand(1, 3, 1, 2, 2)
    same = torch.tensor([[[0, 0], [0, 0], [2, 2]]], dtype=torch.int32)
    levels = torch.tensor([[2, 1, 0]], dtype=torch.int32)
    out = tileunpack(base, packed, same, levels, "override")[0, 0]
    assert out[:2, :2].tolist() == [[1.0, 1.0], [1.0, 1.0]]  # level 2 beats the later level 1
    assert out[2:, 2:].tolist() == [[3.0, 3.0], [3.0, 3.0]]
    tied = tileunpack(base, packed, same, torch.tensor([[1, 1, 0]], dtype=torch.int32), "override")
    assert tied[0, 0, :2, :2].tolist() == [[2.0, 2.0], [2.0, 2.0]]  # tie: the later k wins


def test_blend_composes_in_priority_order():
    base = torch.full((1, 1, 2, 3), 10.0, dtype=torch.float64)
    packed = torch.tensor([2.0, 4.0], dtype=torch.float64).reshape(1, 2, 1, 1, 1).expand(1, 2, 1, 2, 2)
    origins = torch.tensor([[[0, 0], [0, 1]]], dtype=torch.int32)
    # tile 0 has the higher level, so tile 1 goes first: column 1 sees 10 -> 7 -> 4.5
    out = tileunpack(base, packed, origins, torch.tensor([[1, 0]], dtype=torch.int32), "blend", 0.5)
    assert out[0, 0].tolist() == [[6.0, 4.5, 7.0], [6.0, 4.5, 7.0]]
    out = tileunpack(base, packed, origins, torch.tensor([[0, 0]], dtype=torch.int32), "blend", 0.5)
    assert out[0, 0].tolist() == [[6.0, 5.0, 7.0], [6.0, 5.0, 7.0]]


def test_unknown_mode_names_the_choices():
    x = torch.zeros(1, 1, 2, 2)
    with pytest.raises(ValueError, match="'add'; choose from override, blend"):
        tileunpack(x, torch.zeros(1, 1, 1, 2, 2), torch.zeros(1, 1, 2, dtype=torch.int32),
                   torch.zeros(1, 1, dtype=torch.int32), "add")  # fmt: skip


def test_tile_origins_follow_the_row_major_grid():
    idx = torch.tensor([[0, 2, 3, 5]], dtype=torch.int32)
    assert tile_origins(idx, 12, 4)[0].tolist() == [[0, 0], [0, 8], [4, 0], [4, 8]]


@pytest.mark.parametrize(
    ("case_name", "edit", "message"),
    [
        ("override", ("origins", (0, 1, 1), 9), r"origins x value 9 at \[0, 1\] is out of range \[0, 9\)"),
        ("overlap", ("origins", (1, 0, 0), 5), r"origins y value 5 at \[1, 0\] is out of range \[0, 5\)"),
        ("override", ("origins", (0, 2, 0), 3), r"origins y % tile_size value 3"),
        ("blend", ("levels", (1, 3), NUM_LEVELS), r"levels value 4 at \[1, 3\] is out of range \[0, 4\)"),
        ("blend", ("levels", (0, 0), -1), r"levels value -1"),
        ("blend", ("alpha", (), 1.5), r"alpha value 1.5 is out of range \[0.0, 1.0\]"),
    ],
)
def test_validate_inputs_rejects_bad_origins_levels_alpha(case_name, edit, message):
    case = case_of(case_name, **SMALL, kmax=5)
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float32, 0)
    name, position, value = edit
    inputs[name][position] = value
    with pytest.raises(InputValidationError, match=message):
        WORKLOAD.validate_inputs(case, inputs)


def test_params_reject_a_map_the_tiles_do_not_divide():
    with pytest.raises(ParamError, match="width 20 is not divisible by tile_size 8"):
        WORKLOAD.make_params("fixed", {"width": 20})


def test_work_counts_by_hand():
    # base read + out written: 2 x (2 x 3 x 8 x 12 = 576) elements; tiles: 2 x 5 x 3 x 16 = 480
    # elements; at 2 bytes. Metadata: 10 tiles x (2 origins + 1 level) x 4 bytes + alpha 4 = 124
    data = (2 * 576 + 480) * 2
    assert WORKLOAD.work(case_of("override", **SMALL, kmax=5), "fp16") == Work(data + 124, 0, "tiles", 10)
    assert WORKLOAD.work(case_of("overlap", **SMALL, kmax=5), "fp16") == Work(data + 124, 0, "tiles", 10)
    # blend: 2 mul + 1 add per tile element
    assert WORKLOAD.work(case_of("blend", **SMALL, kmax=5), "fp16") == Work(data + 124, 3 * 480, "tiles", 10)


@pytest.mark.parametrize("kmax", [2, 9, 40])
@pytest.mark.parametrize("seed", [0, 3])
def test_blend_of_overlapping_tiles_matches_the_loop(kmax, seed):
    # the closed form counts, per pixel of each tile, the tiles after it: straddling origins
    # cover parts of each other, and 40 tiles on 6 slots pile several deep
    case = case_of("overlap", **SMALL, kmax=kmax)
    inputs = upcast_inputs(WORKLOAD.make_inputs(case, "cpu", torch.float64, seed), torch.float64)
    args = (inputs["base"], inputs["packed"], inputs["origins"], inputs["levels"])
    out = tileunpack(*args, "blend", inputs["alpha"])
    torch.testing.assert_close(out, unpack_blend_loop(*args, float(inputs["alpha"])), rtol=1e-12, atol=1e-12)
