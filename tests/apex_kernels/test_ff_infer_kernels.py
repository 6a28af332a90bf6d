"""The ff-infer Triton fast path against the workload's reference, in the interpreter."""

from typing import Any

import pytest
import torch
import triton

import apex_core
from adapters import triton_ops
from adapters.triton_autotune import autotune_entries, cached_keys
from apex_core.results import Case, Status
from apex_core.workloads.ff_infer import FFInfer, select_tiles
from apex_kernels import ff_infer as kernels
from apex_kernels._utils import pin_config
from tests.apex_kernels.repeated_calls import check_repeated_calls
from tests.conftest import KERNEL_DEVICE

WORKLOAD = FFInfer()
OP = triton_ops.FF_INFER
CALLS = 3  # each launcher runs this many times in a row, each on fresh, poisoned buffers
# B = 2, C not a power of two, a non-square map; tile_size 2 makes level-1 tiles 2 x 2
SMALL = {"batch": 2, "channels": 6, "height": 16, "width": 24, "tile_size": 2, "hidden": 16}
# tile side 6 and 3: pixel counts that are not powers of two, so the pixel masks matter
ODD_TILES = {"channels": 5, "height": 12, "width": 24, "tile_size": 3, "budget_b1": 8,
             "budget_b2": 3, "budget_total": 12, "hidden": 16}


# 81 level-0 tiles: more than one [64, 64] block ranks, so the selection kernel runs first
LARGE_FRAME = {"channels": 3, "height": 36, "width": 36, "tile_size": 2, "kmax": 30, "budget_b1": 30,
               "budget_b2": 10, "budget_total": 60, "hidden": 16}


def case_of(overrides: dict[str, Any]) -> Case:
    return WORKLOAD.cases(WORKLOAD.make_params("smoke", overrides))[0]


def check_launcher(overrides: dict[str, Any], dtype_name: str, calls: int = CALLS,
                   **factory_kwargs: Any) -> None:
    """Call the launcher ``calls`` times on fresh inputs and poisoned outputs; compare each."""
    case = case_of(overrides)
    assert OP.supports(case, dtype_name) is None
    check_repeated_calls(WORKLOAD, case, dtype_name, OP.bind, calls=calls,
                         build_seed=100, first_seed=101, outputs_in_data_dtype=True, **factory_kwargs)


@pytest.mark.parametrize("dtype_name", ["fp32", "fp16"])
def test_smoke_profile(dtype_name: str) -> None:
    check_launcher({}, dtype_name)


def test_smoke_profile_bf16() -> None:
    check_launcher({}, "bf16", calls=1)


@pytest.mark.parametrize(("overrides", "dtype_name", "mix"), [
    (SMALL, "fp32", "cublas"),
    (ODD_TILES, "fp16", "triton"),
    (LARGE_FRAME, "fp32", "triton"),
])
def test_other_shapes(overrides: dict[str, Any], dtype_name: str, mix: str) -> None:
    check_launcher(overrides, dtype_name, mix=mix)


@pytest.mark.parametrize("index", range(max(map(len, (kernels.MEAN_CONFIGS, kernels.DW_CONFIGS,
                                                      kernels.NORM_CONFIGS, kernels.MLP_CONFIGS,
                                                      kernels.MIX_CONFIGS)))))
def test_every_config_covers_the_output(index: int) -> None:
    # The interpreter autotunes over the first config only: pin config i of each kernel, the
    # Triton mix's too (the interpreter launches plainly, where the mix would be cuBLAS's)
    check_launcher({**SMALL, "channels": 37, "tile_size": 4, "batch": 1}, "fp32", calls=1,
                   config_index=index, mix="triton")


def run_depthwise(vec: bool, side: int, index: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """D of one depthwise kernel, config ``index`` pinned, on a 3 x 4 grid of tiles per frame."""
    channels, batch = 37, 2  # no BLOCK_C divides 37, and every config takes two or more blocks
    height, width = 3 * side, 4 * side
    gen = torch.Generator().manual_seed(seed)
    src = torch.randn((batch, channels, height, width), generator=gen).to(dtype)
    # the four corners, tiles on each edge and the interior ones (5 and 6), in a scrambled order
    ids = torch.tensor([[0, 11, 5, 3, 8], [6, 1, 4, 7, 10]], dtype=torch.int32)
    n = ids.numel()
    gamma_beta = torch.randn((n, 2 * channels), generator=gen).to(dtype)
    weight = torch.randn((channels, 1, 3, 3), generator=gen).to(dtype)
    guard = 8  # rows past D, left NaN unless a kernel writes outside its tiles' pixels
    out = torch.full((n * side * side + guard, channels), float("nan"), dtype=dtype)
    src, ids, gamma_beta, weight, out = (t.to(KERNEL_DEVICE) for t in (src, ids, gamma_beta, weight, out))
    kernel = kernels._modulate_dw_vec_kernel if vec else kernels._modulate_dw_kernel
    kernel, meta = pin_config(kernel, kernels.DW_CONFIGS[index])
    pixels = {"SGP": triton.next_power_of_2(side * side // 4)} if vec else \
        {"SSP": triton.next_power_of_2(side * side)}
    grid = (n, triton.cdiv(channels, meta["BLOCK_C"]))
    kernel[grid](src, ids, gamma_beta, weight, out, channels, height, width, ids.shape[1], S=side,
                 **pixels, **meta)
    out = out.cpu()
    assert out[n * side * side:].isnan().all(), "a write past D"
    return out[:n * side * side]


@pytest.mark.parametrize("index", range(len(kernels.DW_CONFIGS)))
# 4: one group a row, so no neighbour group; 12: 36 groups padded to 64, the padding masked
@pytest.mark.parametrize("side", [4, 8, 12, 16])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_the_vector_depthwise_kernel_writes_the_taps_kernel_s_bits(index: int, side: int,
                                                                   dtype: torch.dtype) -> None:
    # the same nine products added in the same order for every output: the same bits, not close ones
    vec = run_depthwise(True, side, index, dtype, seed=side + index)
    taps = run_depthwise(False, side, index, dtype, seed=side + index)
    assert not taps.isnan().any()
    assert torch.equal(vec, taps)


def depthwise_outputs(case: Case, inputs: dict[str, torch.Tensor], **options: Any) -> list[torch.Tensor]:
    launcher = OP.bind(WORKLOAD, case, inputs, **options)
    assert launcher.metadata["depthwise"] == [options["depthwise"]] * 2  # the option took both levels
    outputs = launcher()
    names = ("_modulate_dw_kernel", "_modulate_dw_vec_kernel")
    d = [launch.args[4] for launch in launcher.launches if launch.kernel_name in names]
    return [t.clone().cpu() for t in (*d, outputs["fused"], outputs["alpha"])]


@pytest.mark.parametrize(("index", "dtype"), [(0, torch.float16), (2, torch.float32), (3, torch.float16)])
def test_the_vector_depthwise_path_writes_the_taps_path_s_bits(index: int, dtype: torch.dtype) -> None:
    # tile_size 8: 16 x 16 tiles at level 0, 8 x 8 at level 1, a 2 x 4 grid where every level-0 tile
    # touches the image border; 37 channels
    case = case_of({"channels": 37, "height": 32, "width": 64, "tile_size": 8, "hidden": 16})
    inputs = WORKLOAD.make_inputs(case, KERNEL_DEVICE, dtype, seed=3)
    vec = depthwise_outputs(case, inputs, depthwise="vec", config_index=index)
    taps = depthwise_outputs(case, inputs, depthwise="taps", config_index=index)
    assert len(vec) == len(taps) == 4  # both levels' D, fused, alpha
    for got, want in zip(vec, taps, strict=True):
        assert torch.equal(got, want)


@pytest.mark.parametrize(("overrides", "expected"), [
    ({}, ["vec", "vec"]),  # the smoke profile's tile_size 4: sides 8 and 4, width 16
    ({**SMALL, "width": 32}, ["vec", "taps"]),  # sides 4 and 2
    ({"height": 32, "width": 64, "tile_size": 8}, ["taps", "vec"]),  # sides 16 and 8
    (SMALL, ["taps", "taps"]),  # width 24: the vector loads' alignment is not known
    (ODD_TILES, ["taps", "taps"]),  # sides 6 and 3
])
def test_the_depthwise_kernel_is_the_vector_one_where_the_tile_side_is_4_or_8(
        overrides: dict[str, Any], expected: list[str]) -> None:
    case = case_of(overrides)
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float32, 0)
    launcher = OP.bind(WORKLOAD, case, inputs)
    assert launcher.metadata["depthwise"] == expected
    assert [level["depthwise"] for level in launcher.metadata["levels"]] == expected
    names = {"vec": "_modulate_dw_vec_kernel", "taps": "_modulate_dw_kernel"}
    bound = [launch.kernel_name for launch in launcher.launches if launch.kernel_name in names.values()]
    assert bound == [names[kind] for kind in expected]
    assert OP.bind(WORKLOAD, case, inputs, depthwise="taps").metadata["depthwise"] == ["taps", "taps"]


@pytest.mark.parametrize("index", range(len(kernels.MIX_CONFIGS)))
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_pointwise_mix_matches_linear(index: int, dtype: torch.dtype) -> None:
    # rows and channels that no config's blocks divide, so the row, output and K masks all cut
    rows, c = 70, 37
    gen = torch.Generator().manual_seed(index)
    d, w, b = (torch.randn(shape, generator=gen).to(dtype) for shape in ((rows, c), (c, c), (c,)))
    want = torch.nn.functional.linear(d.double(), w.double(), b.double())
    d, w, b = (t.to(KERNEL_DEVICE) for t in (d, w, b))
    out = torch.full((rows, c), float("nan"), dtype=dtype, device=KERNEL_DEVICE)
    kernel, meta = pin_config(kernels._pointwise_mix_kernel, kernels.MIX_CONFIGS[index])
    grid = (triton.cdiv(rows, meta["BLOCK_M"]), triton.cdiv(c, meta["BLOCK_O"]))
    kernel[grid](d, w, b, out, rows, c, IEEE=dtype == torch.float32, **meta)
    out = out.double().cpu()
    if dtype == torch.float32:  # IEEE float32 products, fp32 accumulation
        torch.testing.assert_close(out, want, atol=1e-4, rtol=1e-5)
        return
    # fp32 accumulation and one rounding at the store: the float64 result rounded to fp16 but where
    # the accumulation's error crosses a rounding boundary (0.04-0.12 % of the elements in the
    # interpreter), an ulp off there; rounding twice (the GEMM, then the bias) matched 70 % at most
    rounded = want.to(dtype).double()
    assert (out == rounded).double().mean() >= 0.99
    torch.testing.assert_close(out, rounded, atol=1e-6, rtol=2**-10)


def test_the_mix_is_triton_s_where_the_call_launches_dependently() -> None:
    case = case_of({})
    launcher = OP.bind(WORKLOAD, case, WORKLOAD.make_inputs(case, KERNEL_DEVICE, torch.float16, 0))
    expected = "triton" if launcher.metadata["dependent_launch"] else "cublas"
    assert launcher.metadata["mix"] == expected
    mixes = [launch for launch in launcher.launches if launch.kernel_name == "_pointwise_mix_kernel"]
    assert len(mixes) == (2 if expected == "triton" else 0)


@pytest.mark.interpreter
def test_selection_inside_the_tile_means_matches_select_tiles() -> None:
    # 64 level-0 tiles, the most one frame ranks in registers; two frames, 20 parents, 6 split
    case = case_of({"batch": 2, "channels": 3, "height": 32, "width": 32, "tile_size": 2, "kmax": 20,
                    "budget_b1": 20, "budget_b2": 6, "budget_total": 40, "hidden": 16})
    p = case.params
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float32, seed=7)
    launcher = OP.bind(WORKLOAD, case, inputs)
    assert launcher.metadata["selection"] == "in level 0's tile means"
    (fold,) = [launch for launch in launcher.launches if launch.kernel_name == "_select_tile_mean_kernel"]
    ids0, ids1, slots = fold.args[3], fold.args[4], fold.args[5]
    ids0.fill_(-1)
    ids1.fill_(-1)
    slots.fill_(-2)
    launcher()
    want0, want1 = select_tiles(p, inputs["util0"], inputs["split_util"])
    assert (p.level0_grid, p.level0_tiles, p.split_parents) == ((8, 8), 20, 6)
    assert torch.equal(ids0, want0) and torch.equal(ids1, want1)
    assert torch.equal(slots, split_slots(want0, want1, p.level0_grid[1]))


def split_slots(ids0: torch.Tensor, ids1: torch.Tensor, cols0: int) -> torch.Tensor:
    """Each level-0 tile's place among the split parents (the parent of children 4r..4r+3), else -1."""
    first_children = ids1[:, ::4].long()
    parents = (first_children // (2 * cols0)) // 2 * cols0 + (first_children % (2 * cols0)) // 2
    slots = torch.full(ids0.shape, -1, dtype=torch.int32)
    for frame in range(ids0.shape[0]):
        for place, parent in enumerate(parents[frame].tolist()):
            slots[frame, ids0[frame].tolist().index(parent)] = place
    return slots


@pytest.mark.interpreter
def test_selection_kernel_matches_select_tiles() -> None:
    # 144 level-0 tiles and 70 parents: both ranking loops take several 64-wide blocks
    case = case_of({"batch": 2, "channels": 1, "height": 48, "width": 48, "tile_size": 2,
                    "kmax": 70, "budget_b1": 60, "budget_b2": 66, "budget_total": 200})
    p = case.params
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float32, seed=5)
    ids0 = torch.full((p.batch, p.level0_tiles), -1, dtype=torch.int32)
    ids1 = torch.full((p.batch, p.level1_tiles), -1, dtype=torch.int32)
    slots = torch.full((p.batch, p.level0_tiles), -2, dtype=torch.int32)
    kernels._select_kernel[(p.batch,)](inputs["util0"], inputs["split_util"], ids0, ids1, slots,
                                       inputs["util0"].shape[1], p.level0_tiles, p.split_parents,
                                       p.level0_grid[1], BLOCK=kernels.SELECT_BLOCK)
    want0, want1 = select_tiles(p, inputs["util0"], inputs["split_util"])
    assert (p.level0_tiles, p.split_parents) == (70, 66)
    assert torch.equal(ids0, want0) and torch.equal(ids1, want1)
    assert torch.equal(slots, split_slots(want0, want1, p.level0_grid[1]))


def test_supports_names_what_it_cannot_run() -> None:
    assert all(OP.supports(case_of({}), d) is None for d in ("fp32", "fp16", "bf16"))
    reason = OP.supports(case_of({}), "fp8")
    assert reason and "fp8" in reason
    big_tiles = case_of({"tile_size": 32, "height": 64, "width": 64})
    reason = OP.supports(big_tiles, "fp16")
    assert reason and "tile_size" in reason


def test_rejects_inputs_it_would_misread() -> None:
    case = case_of({})
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float32, seed=0)
    with pytest.raises(ValueError, match="must be contiguous"):
        OP.bind(WORKLOAD, case, {**inputs, "l0_pw_weight": inputs["l0_pw_weight"].t()})
    with pytest.raises(ValueError, match="every data input"):
        OP.bind(WORKLOAD, case, {**inputs, "l1_decay": inputs["l1_decay"].half()})
    with pytest.raises(ValueError, match="mix 'cutlass' is not one of"):
        OP.bind(WORKLOAD, case, inputs, mix="cutlass")
    with pytest.raises(ValueError, match="depthwise 'simd' is not one of"):
        OP.bind(WORKLOAD, case, inputs, depthwise="simd")
    odd = case_of(ODD_TILES)
    with pytest.raises(ValueError, match="'vec' needs tile sides that are multiples of 4"):
        OP.bind(WORKLOAD, odd, WORKLOAD.make_inputs(odd, "cpu", torch.float32, 0), depthwise="vec")


@pytest.mark.interpreter
@pytest.mark.parametrize(("mix", "own_launches"), [("cublas", 7), ("triton", 9)])
def test_autotune_entries_list_one_call_s_launches(mix: str, own_launches: int) -> None:
    case = case_of({})
    inputs = WORKLOAD.make_inputs(case, "cpu", torch.float32, 0)
    launcher = OP.bind(WORKLOAD, case, inputs, mix=mix)
    # the interpreter launches plainly, so the mix is cuBLAS's unless named
    assert OP.bind(WORKLOAD, case, inputs).metadata["mix"] == "cublas"
    before = cached_keys(launcher.launches)
    launcher()
    launcher()
    launches: dict[str, int] = {}
    for entry in autotune_entries(launcher.launches, before):
        launches[entry["op_name"]] = launches.get(entry["op_name"], 0) + entry["launches"]
    # per call: the MLP, depthwise and norm kernels per level, level 0's tile means and the Triton mix
    # where it runs, a scan per level, the gate; the smoke frame's selection runs inside level 0's
    # tile means, level 1's tile means inside level 0's norm kernel
    assert launches == {"ff-infer": own_launches, "tilessm-scan": 2, "fusiongate": 1}
    assert launcher.metadata["mix"] == mix
    assert launcher.metadata["selection"] == "in level 0's tile means"
    assert sum(launches.values()) == launcher.metadata["triton_launches"]


@pytest.mark.interpreter
def test_end_to_end_through_the_triton_backend() -> None:
    timing = apex_core.TimingOptions(warmup=1, min_iters=2, min_time_s=0, max_time_s=0.05)
    report = apex_core.run(workloads=["ff-infer"], backends=["triton"], device="cpu",
                           dtypes=["fp16"], profile="smoke", isolation="inline", timing=timing)
    (cell,) = report.cells
    assert (cell.workload, cell.case) == ("ff-infer", "default")
    assert cell.status == Status.OK, f"{cell.key}: {cell.status} {cell.reason}"
    assert cell.accuracy and all(a.passed for a in cell.accuracy)
