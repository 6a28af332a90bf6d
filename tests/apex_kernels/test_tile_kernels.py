"""The tile kernels (tilepack, tileunpack, tile-stage1) in the Triton interpreter, against the references."""

import pytest
import torch

pytest.importorskip("triton")

import apex_core
from adapters import triton_ops
from apex_core.interfaces import Workload
from apex_core.plugin_api import implementation
from apex_core.results import Status
from apex_core.timing import TimingOptions
from apex_core.workloads.tile_stage1 import TileStage1
from apex_core.workloads.tilepack import TilePack
from apex_core.workloads.tileunpack import TileUnpack
from apex_kernels import tile_stage1, tilepack
from apex_kernels.tileunpack import aligned, walk, winner_map
from tests.apex_kernels.repeated_calls import Mutate, check_repeated_calls

TILE_WORKLOADS = ("tilepack", "tileunpack", "tile-stage1")

# Overrides on the smoke profile (B1 C8 H16 W16 t4 K6): K = 1, batch 2, C not a power
# of two, non-square maps, tile sizes 2, 3, 4 and 8.
SHAPES = {
    "smoke": {},
    "k1-b2-c3-t2": {"batch": 2, "channels": 3, "height": 8, "width": 12, "tile_size": 2, "kmax": 1},
    "c6-t8-wide": {"channels": 6, "height": 16, "width": 24, "tile_size": 8, "kmax": 5},
    "c5-t3-tall": {"channels": 5, "height": 9, "width": 6, "tile_size": 3, "kmax": 4},
}
SHAPE_DTYPES = [(shape, dtype) for shape in SHAPES for dtype in ("fp32", "fp16")] + [("smoke", "bf16")]

def check_repeated(workload: Workload, case_name: str, dtype_name: str,
                   overrides: dict | None = None, mutate: Mutate | None = None, calls: int = 3) -> dict:
    """Bind the case as the triton backend does, call it ``calls`` times on fresh inputs with
    poisoned outputs; check every call."""
    params = workload.make_params("smoke", overrides or {})
    case = next(c for c in workload.cases(params) if c.name == case_name)
    bind = implementation(workload, "triton").bind
    return check_repeated_calls(workload, case, dtype_name, bind, calls=calls,
                                build_seed=0, first_seed=100, mutate=mutate)


# --- tilepack ---------------------------------------------------------------------------


@pytest.mark.parametrize(("shape", "dtype_name"), SHAPE_DTYPES)
def test_tilepack_matches_reference(shape: str, dtype_name: str) -> None:
    check_repeated(TilePack(), "default", dtype_name, SHAPES[shape])


def test_tilepack_duplicate_indices() -> None:
    def duplicates(inputs: dict[str, torch.Tensor]) -> None:
        idx = inputs["idx"]
        idx[:, : idx.shape[1] // 2] = idx[:, -1:]  # half the row repeats the last id

    check_repeated(TilePack(), "default", "fp32", {"kmax": 7}, duplicates)


def test_tilepack_tall_tiles_split_into_row_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tilepack, "PIXEL_BUDGET", 8)  # t = 8 -> 1 row per program
    metadata = check_repeated(TilePack(), "default", "fp16", SHAPES["c6-t8-wide"])
    assert metadata["RB"] == 1


# --- tileunpack -------------------------------------------------------------------------


@pytest.mark.parametrize("case_name", ["override", "blend", "overlap"])
@pytest.mark.parametrize(("shape", "dtype_name"), SHAPE_DTYPES)
def test_tileunpack_matches_reference(case_name: str, shape: str, dtype_name: str) -> None:
    check_repeated(TileUnpack(), case_name, dtype_name, SHAPES[shape])


def stacked_tied_tiles(inputs: dict[str, torch.Tensor]) -> None:
    """Every tile one pixel apart on the diagonal, all at one level: deep overlaps, all ties."""
    origins, levels = inputs["origins"], inputs["levels"]
    t = inputs["packed"].shape[-1]
    height, width = inputs["base"].shape[-2:]
    k = torch.arange(origins.shape[1], dtype=origins.dtype)
    origins[..., 0] = (k % (height - t + 1))[None]
    origins[..., 1] = (k % (width - t + 1))[None]
    levels.fill_(2)


def aligned_tied_duplicates(inputs: dict[str, torch.Tensor]) -> None:
    """Every tile on the same aligned origin, levels tied in pairs: the last of the top level wins."""
    origins, levels = inputs["origins"], inputs["levels"]
    origins[:] = origins[:, :1]
    levels[:] = (torch.arange(levels.shape[1], dtype=levels.dtype) // 2 % 3)[None]


@pytest.mark.parametrize("case_name", ["overlap", "blend"])
def test_tileunpack_overlapping_origins_with_tied_levels(case_name: str) -> None:
    mutate = stacked_tied_tiles if case_name == "overlap" else aligned_tied_duplicates
    check_repeated(TileUnpack(), case_name, "fp32", {"kmax": 9}, mutate)


# Winner map for overlapping origins (from OVERLAP_RUNS_MIN_K; 0 here). On the smoke map
# (16 x 16, t = 4) unaligned tiles are listed in two bands, and a winner-map block of
# 4 rows x 16 columns covers a whole band.
@pytest.mark.parametrize(("shape", "dtype_name"), SHAPE_DTYPES)
def test_tileunpack_overlap_winner_map(shape: str, dtype_name: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(winner_map, "OVERLAP_RUNS_MIN_K", 0)
    metadata = check_repeated(TileUnpack(), "overlap", dtype_name, SHAPES[shape])
    assert (metadata["kernel"], metadata["prepass"]) == (
        "_unpack_winner_map_kernel", "_row_band_runs_kernel, _winner_map_kernel")


@pytest.mark.interpreter
def test_row_band_runs_list_each_tile_in_the_bands_it_meets() -> None:
    t, height, k = 4, 18, 7
    origins = torch.tensor([[[0, 0], [3, 1], [4, 2], [14, 0], [7, 7], [4, 9], [13, 3]],
                            [[1, 1], [1, 1], [8, 0], [0, 5], [10, 2], [12, 12], [5, 5]]],
                           dtype=torch.int32)
    levels = torch.tensor([[2, 0, 1, 1, 3, 0, 2], [1, 1, 0, 3, 0, 2, 1]], dtype=torch.int32)
    bands = -(-height // t)
    run_k = torch.full((2, 2 * k), -1, dtype=torch.int32)
    bounds = torch.full((2, 2, bands), -1, dtype=torch.int32)  # poisoned: the prepass zeroes
    winner_map._row_band_runs_kernel[(2,)](origins, levels, run_k, bounds[0], bounds[1], k,
                                           bands, T=t, KC=8, ZB=4)
    for b in range(2):
        for band in range(bands):
            meets = [i for i in range(k)
                     if origins[b, i, 0] // t <= band <= (origins[b, i, 0] + t - 1) // t]
            want = sorted(meets, key=lambda i: (int(levels[b, i]), i))  # ascending priority
            start, end = int(bounds[0, b, band]), int(bounds[1, b, band])
            assert run_k[b, start:end].tolist() == want, (b, band)


@pytest.mark.interpreter
def test_winner_map_by_list_index_names_the_same_tile_elements(monkeypatch: pytest.MonkeyPatch) -> None:
    # LIST_INDEX keeps each pixel's index in its band's list (scripts/dev/overlap_staged.py):
    # through run_k it must name the element the default map names by k
    monkeypatch.setattr(winner_map, "OVERLAP_RUNS_MIN_K", 0)
    workload = TileUnpack()
    case = next(c for c in workload.cases(workload.make_params("smoke", {"kmax": 9})) if c.name == "overlap")
    launcher = triton_ops.TILEUNPACK.bind(workload, case, workload.make_inputs(case, "cpu", torch.float32, 0))
    launcher.run()
    _, mapping, _ = launcher.launches
    _, run_k, run_start, _, winners, _, width, _, _, _ = mapping.args
    by_k = winners.clone()
    winners.fill_(-7)
    mapping.kernel[mapping.grid](*mapping.args, **mapping.meta, LIST_INDEX=True)
    tt = case.params.tile_size ** 2
    band = torch.arange(winners.shape[1]) // width // case.params.tile_size
    start = run_start.long().gather(1, band.expand_as(winners))
    covered = winners >= 0
    assert torch.equal(covered, by_k >= 0) and covered.any()
    k = run_k.long().gather(1, torch.where(covered, start + winners.long() // tt, 0))
    assert torch.equal(torch.where(covered, k * tt + winners.long() % tt, -1), by_k.long())


@pytest.mark.parametrize(("chunk", "rows", "columns"), [(1, 4, 16), (2, 2, 8), (64, 1, 4)])
def test_tileunpack_overlap_winner_map_blocks(chunk: int, rows: int, columns: int,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # list chunks shorter and longer than a band's list (K = 9 tiles in 4 bands, deep
    # ties), and winner-map blocks of fewer rows than a band (t = 4) and narrower than W
    monkeypatch.setattr(winner_map, "OVERLAP_RUNS_MIN_K", 0)
    monkeypatch.setattr(winner_map, "OVERLAP_RUN_CHUNK", chunk)
    monkeypatch.setattr(winner_map, "OVERLAP_MAP_ROWS", rows)
    monkeypatch.setattr(winner_map, "OVERLAP_MAP_COLUMNS", columns)
    metadata = check_repeated(TileUnpack(), "overlap", "fp32", {"kmax": 9},
                              stacked_tied_tiles)
    assert (metadata["RUN_CHUNK"], metadata["RB"], metadata["BW"]) == (chunk, rows, columns)


def test_tileunpack_overlap_winner_map_deep_ties(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(winner_map, "OVERLAP_RUNS_MIN_K", 0)
    check_repeated(TileUnpack(), "overlap", "fp32", {"kmax": 9}, stacked_tied_tiles)


def test_tileunpack_overlap_winner_map_leaves_large_k_to_the_walk(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(winner_map, "OVERLAP_RUNS_MIN_K", 0)
    monkeypatch.setattr(walk, "MAX_KC", 4)  # K = 6 > MAX_KC: the sort would not fit
    metadata = check_repeated(TileUnpack(), "overlap", "fp32", calls=1)
    assert metadata["kernel"] == "_unpack_override_kernel"


def test_tileunpack_override_duplicates_with_ties() -> None:
    check_repeated(TileUnpack(), "override", "fp16", {"kmax": 7}, aligned_tied_duplicates)


@pytest.mark.parametrize("case_name", ["override", "blend", "overlap"])
def test_tileunpack_walks_many_tiles_in_chunks(case_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # K = 9 -> 5 chunks, the last one partial: the keys no longer fit in registers, and
    # each step of the priority walk rescans them from memory
    monkeypatch.setattr(walk, "MAX_KC", 2)
    monkeypatch.setattr(aligned, "ALIGNED_MAX_K", 8)  # K = 9: aligned cases take the walk too
    metadata = check_repeated(TileUnpack(), case_name, "fp32", {"kmax": 9})
    assert (metadata["KC"], metadata["ONE_CHUNK"]) == (2, False)


@pytest.mark.parametrize("case_name", ["override", "blend"])
def test_tileunpack_aligned_cases_take_the_band_kernel(case_name: str) -> None:
    metadata = check_repeated(TileUnpack(), case_name, "fp16", SHAPES["c6-t8-wide"])
    assert metadata["kernel"] == f"_unpack_{case_name}_band_kernel"
    assert (metadata["PRESORTED"], "prepass" in metadata) == (False, False)  # K = 5 < RUNS_MIN_K
    overlap = check_repeated(TileUnpack(), "overlap", "fp16", SHAPES["c6-t8-wide"], calls=1)
    assert overlap["kernel"] == "_unpack_override_kernel"  # K = 5 < OVERLAP_RUNS_MIN_K


@pytest.mark.parametrize("case_name", ["override", "blend"])
@pytest.mark.parametrize("shape", ["smoke", "k1-b2-c3-t2", "c6-t8-wide", "c5-t3-tall"])
def test_tileunpack_presorted_runs(case_name: str, shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the prepass sorts each image's tiles into per-slot runs (zeroing the slot table
    # first, so runs of the previous call's inputs never leak into the next)
    monkeypatch.setattr(aligned, "RUNS_MIN_K", 1)
    metadata = check_repeated(TileUnpack(), case_name, "fp32", SHAPES[shape])
    assert (metadata["PRESORTED"], metadata["prepass"]) == (True, "_slot_runs_kernel")


@pytest.mark.parametrize("case_name", ["override", "blend"])
@pytest.mark.parametrize("mutate", [None, aligned_tied_duplicates], ids=["random", "stacked"])
@pytest.mark.parametrize("presorted", [False, True], ids=["own-sort", "presorted"])
def test_tileunpack_band_kernel_small_bands(case_name: str, mutate: Mutate | None, presorted: bool,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # one tile slot per program and one pixel row per row chunk: many bands, each with
    # its own slice of the sorted tiles; stacked: every tile on one slot, K levels deep
    monkeypatch.setattr(aligned, "BAND_COLUMN_BUDGET", 4)
    monkeypatch.setattr(aligned, "BAND_PIXEL_BUDGET", 4)
    monkeypatch.setattr(aligned, "RUNS_MIN_K", 1 if presorted else 2**30)
    metadata = check_repeated(TileUnpack(), case_name, "fp32", {"kmax": 9}, mutate)
    assert (metadata["NTB"], metadata["RB"], metadata["PRESORTED"]) == (1, 1, presorted)


def test_tileunpack_blend_with_alpha_at_the_bounds() -> None:
    for alpha in (0.0, 1.0):
        check_repeated(TileUnpack(), "blend", "fp32", {},
                       lambda inputs, a=alpha: inputs["alpha"].fill_(a), calls=1)


# --- tile-stage1 ------------------------------------------------------------------------


@pytest.mark.parametrize(("shape", "dtype_name"), SHAPE_DTYPES)
def test_tile_stage1_matches_reference(shape: str, dtype_name: str) -> None:
    check_repeated(TileStage1(), "default", dtype_name, SHAPES[shape])


def test_tile_stage1_every_tile_selected() -> None:
    check_repeated(TileStage1(), "default", "fp16", {"height": 8, "width": 8, "kmax": 64})


def test_tile_stage1_small_bands(monkeypatch: pytest.MonkeyPatch) -> None:
    # one tile per band, two rows per band, ids binned two at a time
    monkeypatch.setattr(tile_stage1, "COLUMN_BUDGET", 4)
    monkeypatch.setattr(tile_stage1, "PIXEL_BUDGET", 8)
    monkeypatch.setattr(tile_stage1, "MAX_KC", 2)
    metadata = check_repeated(TileStage1(), "default", "fp32", {"kmax": 5})
    assert (metadata["NTB"], metadata["RB"], metadata["KC"]) == (1, 2, 2)


@pytest.mark.parametrize("dtype_name", ["fp32", "fp16"])
def test_tile_stage1_selection_mask_prepass(dtype_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the prepass path at small K: four tiles per prepass program (several per image), ids binned
    # two at a time, one tile per band, so each program reads its own byte of the mask
    monkeypatch.setattr(tile_stage1, "MASK_MIN_K", 1)
    monkeypatch.setattr(tile_stage1, "MASK_BINS", 4)
    monkeypatch.setattr(tile_stage1, "MAX_KC", 2)
    monkeypatch.setattr(tile_stage1, "COLUMN_BUDGET", 4)
    metadata = check_repeated(TileStage1(), "default", dtype_name, {"kmax": 5})
    assert metadata["MASKED"] and metadata["prepass"] == "_selection_mask_kernel"
    every = check_repeated(TileStage1(), "default", dtype_name, {"height": 8, "width": 8, "kmax": 64})
    assert every["MASKED"]
    # three images (the mask's per-image offsets), four tiles per band over six tiles a row (a
    # partial last column block), and a partial last prepass program per image
    monkeypatch.setattr(tile_stage1, "COLUMN_BUDGET", 16)
    for kmax in (3, 7, 18):
        several = check_repeated(TileStage1(), "default", dtype_name,
                                 {"batch": 3, "height": 12, "width": 24, "kmax": kmax})
        assert several["MASKED"] and several["NTB"] == 4


# --- support and the backend ------------------------------------------------------------


@pytest.mark.parametrize("workload", [TilePack(), TileUnpack(), TileStage1()], ids=lambda w: w.name)
def test_supports_names_the_dtype(workload: Workload) -> None:
    case = workload.cases(workload.make_params("smoke"))[0]
    op = implementation(workload, "triton")
    assert all(op.supports(case, name) is None for name in ("fp32", "fp16", "bf16"))
    reason = op.supports(case, "fp8")
    assert reason and "fp8" in reason and "fp16" in reason


def test_launcher_rejects_an_unsupported_tensor_dtype() -> None:
    workload = TilePack()
    case = workload.cases(workload.make_params("smoke"))[0]
    inputs = workload.make_inputs(case, "cpu", torch.float64, seed=0)
    with pytest.raises(ValueError, match="float64"):
        triton_ops.TILEPACK.bind(workload, case, inputs)


def test_triton_backend_reports_fp8_unsupported() -> None:
    from adapters.triton_backend import TritonBackend

    workload = TileUnpack()
    case = workload.cases(workload.make_params("smoke"))[1]
    support = TritonBackend().supports(workload, case, "fp8")
    assert not support.ok and "fp8" in support.reason


@pytest.mark.interpreter
def test_end_to_end_through_the_triton_backend() -> None:
    report = apex_core.run(
        workloads=list(TILE_WORKLOADS), backends=["triton"], device="cpu", profile="smoke",
        dtypes=["fp32", "fp16"], isolation="inline",
        timing=TimingOptions(warmup=1, min_iters=2, min_time_s=0, max_time_s=0.05),
    )
    cells = {(c.workload, c.case, c.dtype): c for c in report.cells}
    expected = {(w, case, d) for w, cases in (("tilepack", ["default"]),
                                              ("tileunpack", ["override", "blend", "overlap"]),
                                              ("tile-stage1", ["default"]))
                for case in cases for d in ("fp32", "fp16")}
    assert set(cells) == expected
    for key, cell in cells.items():
        assert cell.status == Status.OK, f"{key}: {cell.status} {cell.reason}"
        assert len(cell.accuracy) >= 2 and all(a.passed for a in cell.accuracy), key
