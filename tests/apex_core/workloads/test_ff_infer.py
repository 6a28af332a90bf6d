"""ff-infer: the reference against a slow loop-per-tile version, inputs, budgets, work, sync."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias

from apex_core.correctness import compare_outputs, upcast_inputs
from apex_core.errors import InputValidationError, ParamError
from apex_core.workloads.ff_infer import FFInfer, FFInferParams, level_weights
from tests.apex_core.workloads.host_sync import ForbidHostSync

WORKLOAD = FFInfer()
SMOKE = WORKLOAD.make_params("smoke")
# batch 2, three channels, a non-square map: k0 = min(4 / 0.8, 6, 2 * 3) = 5, j = 3
SMALL = FFInferParams(
    batch=2, channels=3, height=16, width=24, tile_size=4, kmax=6,
    budget_b1=4, budget_b2=3, budget_total=8, hidden=5,
)  # fmt: skip


def case_of(params: FFInferParams):
    return WORKLOAD.cases(params)[0]


# --- a slow, obviously correct version: Python loops over tiles, float64 ------------------


def slow_scan(tokens: list[torch.Tensor], w: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """Bidirectional scan, merged by averaging, one token at a time."""
    d = w["decay"].clamp(1e-6, 1 - 1e-6)

    def run(sequence):
        state, ys = torch.zeros_like(sequence[0]), []
        for x in sequence:
            state = d * state + (1 - d) * (w["input_gain"] * x + w["state_bias"])
            ys.append(w["output_gain"] * state)
        return ys

    forward, backward = run(tokens), run(tokens[::-1])[::-1]
    return [(f + b) / 2 for f, b in zip(forward, backward, strict=True)]


def slow_refine(tile: torch.Tensor, token: torch.Tensor, w: dict[str, torch.Tensor]):
    """Modulate and refine one tile [C, s, s] given its scanned token [C]."""
    c = tile.shape[0]
    hidden = torch.relu(w["mlp_w1"] @ token + w["mlp_b1"])
    gamma_beta = w["mlp_w2"] @ hidden + w["mlp_b2"]
    gamma, beta = gamma_beta[:c, None, None], gamma_beta[c:, None, None]
    x = (1 + torch.tanh(gamma)) * tile + beta
    depthwise = F.conv2d(x[None], w["dw_weight"], padding=1, groups=c)[0]
    mixed = torch.stack([
        sum(w["pw_weight"][o, i] * depthwise[i] for i in range(c)) + w["pw_bias"][o]
        for o in range(c)
    ])  # fmt: skip
    mean = mixed.mean()
    var = ((mixed - mean) ** 2).mean()
    normed = (mixed - mean) / torch.sqrt(var + 1e-5)
    normed = normed * w["norm_weight"][:, None, None] + w["norm_bias"][:, None, None]
    value = normed * w["value_scale"][:, None, None] + w["value_bias"][:, None, None]
    gate = normed * w["gate_scale"][:, None, None] + w["gate_bias"][:, None, None]
    return x + value * torch.clamp(gate, min=0)


def slow_level(image: torch.Tensor, ids: list[int], side: int, w: dict[str, torch.Tensor]):
    """One level on one frame [C, H, W]: slice the tiles out, refine, slice them back."""
    per_row = image.shape[-1] // side
    corners = [(i // per_row * side, i % per_row * side) for i in ids]
    tiles = [image[:, y : y + side, x : x + side] for y, x in corners]
    tokens = slow_scan([tile.mean(dim=(1, 2)) for tile in tiles], w)
    out = image.clone()
    for (y, x), tile, token in zip(corners, tiles, tokens, strict=True):
        out[:, y : y + side, x : x + side] = slow_refine(tile, token, w)
    return out


def slow_select(p: FFInferParams, util0: list[float], split_util: list[float]):
    """Level-0 ids by descending utility; children of the best-split parents, row-major."""
    k0 = min(int(p.budget_b1 * 5) // 4, p.kmax, len(util0))
    ids0 = sorted(range(len(util0)), key=lambda i: -util0[i])[:k0]
    j = min(p.budget_b2, k0, int(p.budget_total * 5 - 4 * k0) // 5)
    parents = sorted(ids0, key=lambda i: -split_util[i])[:j]
    cols0 = p.width // (2 * p.tile_size)
    ids1 = []
    for parent in parents:
        row, col = divmod(parent, cols0)
        for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1)):
            ids1.append((2 * row + dy) * 2 * cols0 + 2 * col + dx)
    return ids0, ids1


def slow_ff_infer(p: FFInferParams, inputs: dict[str, torch.Tensor]):
    """The whole step, frame by frame, with the fusion gate written out."""
    w0, w1 = level_weights(inputs, "l0_"), level_weights(inputs, "l1_")
    fused, alphas = [], []
    for b in range(p.batch):
        ids0, ids1 = slow_select(p, inputs["util0"][b].tolist(), inputs["split_util"][b].tolist())
        base = slow_level(inputs["features"][b], ids0, 2 * p.tile_size, w0)
        detail = slow_level(base, ids1, p.tile_size, w1)
        logit = (
            math.log1p(math.exp(inputs["wb"])) * inputs["boundary"][b]
            + math.log1p(math.exp(inputs["wu"])) * inputs["uncertainty"][b]
            + inputs["bias"]
        )
        alpha = 1 / (1 + torch.exp(-logit))
        fused.append(base + alpha * (detail - base))
        alphas.append(alpha)
    return {"fused": torch.stack(fused), "alpha": torch.stack(alphas)}


@pytest.mark.parametrize("params", [SMOKE, SMALL], ids=["smoke", "small"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reference_matches_slow_loops(params: FFInferParams, seed: int) -> None:
    case = case_of(params)
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float64, seed)
    got = WORKLOAD.reference(case, inputs)
    want = slow_ff_infer(params, inputs)
    for name in ("fused", "alpha"):
        torch.testing.assert_close(got[name], want[name], rtol=1e-10, atol=1e-10)
    # both levels really changed something, and the gate really blended
    assert not torch.equal(got["fused"], inputs["features"])
    assert ((got["alpha"] > 0) & (got["alpha"] < 1)).all()


# --- inputs --------------------------------------------------------------------------------


def test_make_inputs_is_deterministic_and_never_zero() -> None:
    case = case_of(SMALL)
    first = WORKLOAD.make_inputs(case, "cpu", torch.float16, 7)
    again = WORKLOAD.make_inputs(case, "cpu", torch.float16, 7)
    other = WORKLOAD.make_inputs(case, "cpu", torch.float16, 8)
    assert first.keys() == again.keys() == other.keys()
    for name, tensor in first.items():
        assert torch.equal(tensor, again[name]), name
        assert (tensor != 0).all(), f"{name} has zeros"
        assert not torch.equal(tensor, other[name]), name
    WORKLOAD.validate_inputs(case, first)


def test_input_dtypes_and_names() -> None:
    inputs = WORKLOAD.make_inputs(case_of(SMOKE), "cpu", torch.bfloat16, 0)
    assert inputs["util0"].dtype == inputs["split_util"].dtype == torch.float32
    rest = {name: t.dtype for name, t in inputs.items() if "util" not in name}
    assert set(rest.values()) == {torch.bfloat16}
    assert inputs["features"].shape == (1, 8, 16, 16)
    assert inputs["util0"].shape == (1, 4)  # level-0 grid of 8x8 tiles: 2 x 2
    assert inputs["l1_mlp_w2"].shape == (2 * 8, SMOKE.hidden)
    assert inputs["wb"].shape == ()


def test_validate_inputs_rejects_tied_utilities() -> None:
    case = case_of(SMALL)
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float32, 0)
    inputs["split_util"][1, 2] = inputs["split_util"][1, 0]
    with pytest.raises(InputValidationError, match="split_util"):
        WORKLOAD.validate_inputs(case, inputs)


# --- parameters and budgets ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "k0", "j"),
    [
        ({}, 20, 8),  # fixed profile: 16 / 0.8 = 20 tiles, 8 splits -> 32 level-1 tiles
        ({"budget_total": 20}, 20, 4),  # level 0 spends 16 of 20: 4 splits left
        ({"budget_total": 17}, 20, 1),
        ({"kmax": 10}, 10, 8),
        ({"budget_b1": 15}, 18, 8),  # 15 / 0.8 = 18.75
        ({"budget_b1": 4}, 5, 5),  # j is capped by the k0 parents
        ({"height": 32, "width": 32}, 4, 4),  # a 2 x 2 level-0 grid
    ],
)
def test_budget_arithmetic(overrides: dict, k0: int, j: int) -> None:
    p = WORKLOAD.make_params("fixed", overrides)
    assert (p.level0_tiles, p.split_parents, p.level1_tiles) == (k0, j, 4 * j)


def test_smoke_profile_is_valid() -> None:
    assert (SMOKE.level0_tiles, SMOKE.split_parents) == (4, 2)


def test_level0_count_is_floor_of_budget_over_cost() -> None:
    # floor(b1 / 0.8) = floor(5 * b1 / 4), capped by the 64-tile level-0 grid
    for b1 in range(1, 400):
        p = FFInferParams(budget_b1=b1, budget_total=b1 + 1, kmax=1000)
        assert p.level0_tiles == min(b1 * 5 // 4, 64)


@pytest.mark.parametrize(
    ("overrides", "pattern"),
    [
        ({"height": 20}, r"height 20 and width 16 .* 2 \* tile_size = 8"),
        ({"channels": 0}, r"channels must be a positive integer, got 0"),
        ({"budget_b2": 1.5}, r"budget_b2 must be a positive integer, got 1.5"),
        ({"budget_total": 4}, r"budget_total 4 .*\(4 tiles .* need budget_total >= 4\.2"),
    ],
)
def test_params_validation_names_the_values(overrides: dict, pattern: str) -> None:
    with pytest.raises(ParamError, match=pattern):
        WORKLOAD.make_params("smoke", overrides)


# --- work ----------------------------------------------------------------------------------


def test_work_smoke_by_hand() -> None:
    work = WORKLOAD.work(case_of(SMOKE), "fp16")
    # C=8, H=W=16, hidden 64; k0 = 4 tiles of 8x8, 4j = 8 tiles of 4x4
    weights_per_level = 11 * 8 + 64 * 8 + 64 + 16 * 64 + 16 + 8 * 9 + 8 * 8  # = 1840
    elements = 2 * 8 * 256 + 3 * 256 + 2 * weights_per_level + 3  # maps, proxies, weights
    assert work.bytes_moved == 2 * elements + 4 * 2 * 4  # fp16, plus 2 x 4 float32 utilities
    mlp = (2 * 8 * 64 + 64) + 64 + (2 * 64 * 16 + 16)  # = 3216
    per_tile_l0 = 8 * 64 * (2 * 8 + 37) + 8 * 16 + mlp  # = 30480
    per_tile_l1 = 8 * 16 * (2 * 8 + 37) + 8 * 16 + mlp  # = 10128
    fusion = 7 * 256 + 3 * 8 * 256
    assert work.flops == 4 * per_tile_l0 + 8 * per_tile_l1 + fusion == 210880
    assert (work.units, work.count) == ("frames", 1)


# --- precision -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype_name", ["fp16", "bf16"])
@pytest.mark.parametrize("params", [SMOKE, SMALL], ids=["smoke", "small"])
def test_half_precision_reference_passes_its_tolerance(dtype_name: str, params) -> None:
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
    case, tol = case_of(params), WORKLOAD.tolerance(dtype_name)
    assert tol.reason and tol.max_mismatch_ratio == 0
    for seed in range(4):
        inputs = WORKLOAD.make_inputs(case, "cpu", dtype, seed)
        outputs = WORKLOAD.reference(case, inputs)
        reference = WORKLOAD.reference(case, upcast_inputs(inputs, torch.float64))
        verdict = compare_outputs(outputs, reference, tol, "before-timing")
        assert verdict.passed, verdict.message


# --- no host synchronization ---------------------------------------------------------------

def test_reference_never_syncs_the_host() -> None:
    case = case_of(SMALL)
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float32, 0)
    with ForbidHostSync():
        WORKLOAD.reference(case, inputs)
    with pytest.raises(AssertionError, match="item"), ForbidHostSync():
        inputs["features"].sum().item()  # the guard itself works


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graph capture needs a CUDA device")
def test_reference_captures_in_a_cuda_graph() -> None:
    case = case_of(SMOKE)
    inputs = WORKLOAD.make_inputs(case, "cuda", torch.float16, 0)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        WORKLOAD.reference(case, inputs)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = WORKLOAD.reference(case, inputs)
    fresh = WORKLOAD.make_inputs(case, "cuda", torch.float16, 1)
    for name, tensor in inputs.items():
        tensor.copy_(fresh[name])
    graph.replay()
    eager = WORKLOAD.reference(case, fresh)
    for name in eager:
        torch.testing.assert_close(captured[name], eager[name], rtol=0, atol=0)
