"""The fusiongate and tilessm-scan Triton kernels against their references, in the interpreter."""

from typing import Any

import pytest
import torch

import apex_core
from adapters import triton_ops
from adapters.triton_autotune import autotune_entries, cached_keys
from apex_core.interfaces import Workload
from apex_core.plugin_api import implementation
from apex_core.results import Status
from apex_core.workloads.fusiongate import FusionGate
from apex_core.workloads.tilessm_scan import TileSSMScan
from apex_kernels import fusiongate as gate_kernels
from apex_kernels.tilessm_scan import chunked, segmented
from tests.apex_kernels.repeated_calls import check_repeated_calls

CALLS = 3  # each launcher runs this many times in a row, each on fresh, poisoned buffers


def config_id(config: Any) -> str:
    return "-".join(f"{k}{v}" for k, v in config.kwargs.items()) + f"-w{config.num_warps}"


def check_launcher(workload: Workload, overrides: dict[str, Any], dtype_name: str,
                   case_names: tuple[str, ...] | None = None, **options: Any) -> None:
    """Bind every (selected) case, call it CALLS times on fresh inputs, compare each."""
    params = workload.make_params("smoke", overrides)
    cases = [c for c in workload.cases(params) if case_names is None or c.name in case_names]
    assert cases
    op = implementation(workload, "triton")
    for case in cases:
        assert op.supports(case, dtype_name) is None
        check_repeated_calls(workload, case, dtype_name, op.bind, calls=CALLS,
                             build_seed=100, first_seed=101, **options)


def bind_scan(case: Any, inputs: dict, **options: Any) -> Any:
    return triton_ops.TILESSM_SCAN.bind(TileSSMScan(), case, inputs, **options)


# --- fusiongate -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype_name", ["fp32", "fp16", "bf16"])
def test_fusiongate_smoke(dtype_name: str) -> None:
    check_launcher(FusionGate(), {}, dtype_name)


@pytest.mark.parametrize(("overrides", "dtype_name"), [
    ({"batch": 2, "channels": 3, "height": 5, "width": 7}, "fp32"),  # HW = 35: masked tail
    ({"batch": 2, "channels": 5, "height": 9, "width": 33}, "fp16"),  # C not a block multiple
    ({"channels": 40, "height": 4, "width": 4}, "fp32"),  # several channel groups
])
def test_fusiongate_odd_shapes(overrides: dict[str, Any], dtype_name: str) -> None:
    check_launcher(FusionGate(), overrides, dtype_name)


@pytest.mark.parametrize("dtype_name", ["fp32", "fp16"])
def test_fusiongate_mostly_nonfinite_proxies(dtype_name: str) -> None:
    check_launcher(FusionGate(), {"nonfinite_fraction": 0.6}, dtype_name)


@pytest.mark.parametrize("config", gate_kernels.CONFIGS, ids=config_id)
def test_fusiongate_every_autotune_config_covers_the_output(config: Any) -> None:
    # The interpreter autotunes over the first config only: pin each one in turn.
    check_launcher(FusionGate(),
                   {"batch": 2, "channels": 37, "height": 3, "width": 11}, "fp32", config=config)


# --- tilessm-scan ---------------------------------------------------------------------


@pytest.mark.parametrize("merge", ["sum", "avg", "gated"])
@pytest.mark.parametrize("dtype_name", ["fp32", "fp16"])
def test_scan_every_case_and_merge(merge: str, dtype_name: str) -> None:
    check_launcher(TileSSMScan(), {"merge": merge}, dtype_name)


def test_scan_bf16() -> None:
    check_launcher(TileSSMScan(), {"merge": "gated", "channels": 5}, "bf16")


@pytest.mark.parametrize(("overrides", "dtype_name"), [
    ({"steps": 1, "channels": 3}, "fp32"),
    ({"steps": 1, "channels": 5, "batch": 2, "merge": "avg"}, "fp16"),
    ({"steps": 7, "channels": 5, "batch": 2}, "fp32"),  # K not a power of two
    ({"steps": 23, "channels": 3, "merge": "gated"}, "fp16"),  # K above MIN_BLOCK_K
    ({"steps": 5, "channels": 19, "clamp": 0.5}, "fp32"),  # clamp binds on ordinary tokens
])
def test_scan_odd_shapes(overrides: dict[str, Any], dtype_name: str) -> None:
    check_launcher(TileSSMScan(), overrides, dtype_name)


@pytest.mark.parametrize("merge", ["sum", "avg", "gated"])
def test_scan_several_chunks(merge: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Chunks of 4 steps make K = 11 three chunks (the last one partial) without the
    # interpreter cost of K > MAX_BLOCK_K; carries cross chunks in both directions.
    # segment_steps=0 keeps the one-program walk, which K > MAX_BLOCK_K would not choose.
    monkeypatch.setattr(chunked, "MAX_BLOCK_K", 4)
    overrides = {"steps": 11, "channels": 3, "batch": 2, "merge": merge}
    check_launcher(TileSSMScan(), overrides, "fp32", segment_steps=0)
    check_launcher(TileSSMScan(), {**overrides, "steps": 8}, "fp16",
                   case_names=("bidirectional",), segment_steps=0)


def test_scan_longer_than_the_real_chunk() -> None:
    overrides = {"steps": chunked.MAX_BLOCK_K + 1, "channels": 3, "merge": "gated"}
    case = TileSSMScan().cases(TileSSMScan().make_params("smoke", overrides))[2]
    inputs = TileSSMScan().make_inputs(case, "cpu", torch.float32, seed=0)
    walk = bind_scan(case, inputs, segment_steps=0).metadata
    assert (walk["kernel"], walk["chunks"]) == ("tilessm_chunked_associative_scan", 2)
    split = bind_scan(case, inputs).metadata  # chosen by K
    assert split["kernel"] == "tilessm_segmented_associative_scan"
    assert split["segments"] == -(-(chunked.MAX_BLOCK_K + 1) // segmented.SEGMENT_STEPS)
    # bidirectional runs both sweeps, so it covers the forward and backward chunk walks too
    check_launcher(TileSSMScan(), overrides, "fp32", case_names=("bidirectional",),
                   segment_steps=0)
    check_launcher(TileSSMScan(), overrides, "fp32", case_names=("bidirectional",))


# The split path at small sizes: segments of 4-16 steps (1-4 rows of SCAN_GROUP steps),
# the last segment partial, carries across segments in both directions.
@pytest.mark.parametrize("merge", ["sum", "avg", "gated"])
@pytest.mark.parametrize(("steps", "segment_steps", "dtype_name"), [
    (11, 4, "fp32"),  # three one-row segments, the last one 3 steps long
    (40, 16, "fp32"),  # four-row segments, the last one half full
    (37, 8, "fp16"),  # a last segment of one step
])
def test_scan_split_path(merge: str, steps: int, segment_steps: int, dtype_name: str) -> None:
    overrides = {"steps": steps, "channels": 5, "batch": 2, "merge": merge}
    check_launcher(TileSSMScan(), overrides, dtype_name,
                   segment_steps=segment_steps)


def test_scan_split_path_bf16() -> None:
    check_launcher(TileSSMScan(),
                   {"steps": 21, "channels": 5, "batch": 2, "merge": "gated"}, "bf16",
                   segment_steps=8)


def test_scan_split_path_folds_several_tiles_of_segments(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # FOLD_BLOCK 2: ten segments take five steps of the carries kernel's walk each way
    monkeypatch.setattr(segmented, "FOLD_BLOCK", 2)
    check_launcher(TileSSMScan(), {"steps": 39, "channels": 3, "merge": "gated"},
                   "fp32", segment_steps=4)


def test_scan_split_path_nonfinite_tokens_and_clamp() -> None:
    check_launcher(TileSSMScan(),
                   {"nonfinite_fraction": 0.6, "steps": 20, "merge": "avg", "clamp": 0.5},
                   "fp16", segment_steps=8)


def test_scan_rejects_a_segment_length_it_cannot_split_by() -> None:
    case = TileSSMScan().cases(TileSSMScan().make_params("smoke", {}))[0]
    inputs = TileSSMScan().make_inputs(case, "cpu", torch.float32, seed=0)
    for bad in (2, 12, -8):
        with pytest.raises(ValueError, match="segment_steps"):
            bind_scan(case, inputs, segment_steps=bad)


@pytest.mark.parametrize("dtype_name", ["fp32", "fp16"])
def test_scan_mostly_nonfinite_tokens(dtype_name: str) -> None:
    check_launcher(TileSSMScan(),
                   {"nonfinite_fraction": 0.6, "steps": 9, "merge": "avg"}, dtype_name)


@pytest.mark.parametrize("config", chunked.CONFIGS, ids=config_id)
def test_scan_every_autotune_config_covers_the_output(config: Any) -> None:
    check_launcher(TileSSMScan(), {"channels": 37, "steps": 5, "batch": 2},
                   "fp32", case_names=("backward", "bidirectional"), config=config)


@pytest.mark.parametrize("config", segmented.SPLIT_CONFIGS, ids=config_id)
def test_scan_every_split_config_covers_the_output(config: Any) -> None:
    check_launcher(TileSSMScan(), {"channels": 37, "steps": 13, "batch": 2},
                   "fp32", case_names=("forward", "bidirectional"), config=config,
                   segment_steps=8)


# --- both -----------------------------------------------------------------------------


@pytest.mark.parametrize("workload", [FusionGate(), TileSSMScan()], ids=lambda w: w.name)
def test_supports_names_the_dtypes(workload: Workload) -> None:
    case = workload.cases(workload.make_params("smoke"))[0]
    for dtype_name in ("fp32", "fp16", "bf16"):
        assert implementation(workload, "triton").supports(case, dtype_name) is None
    reason = implementation(workload, "triton").supports(case, "fp8")
    assert reason and "fp8" in reason


def test_scan_rejects_a_clamp_beyond_float32() -> None:
    workload = TileSSMScan()
    case = workload.cases(workload.make_params("smoke", {"clamp": 1e39}))[0]
    reason = triton_ops.TILESSM_SCAN.supports(case, "fp16")
    assert reason and "clamp" in reason
    with pytest.raises(ValueError, match="clamp"):
        bind_scan(case, workload.make_inputs(case, "cpu", torch.float16, 0))


@pytest.mark.interpreter
def test_autotune_choices_are_read_after_the_calls() -> None:
    workload = TileSSMScan()
    case = workload.cases(workload.make_params("smoke"))[0]
    launcher = bind_scan(case, workload.make_inputs(case, "cpu", torch.float32, 0))
    before = cached_keys(launcher.launches)
    launcher()
    launcher()
    (entry,) = autotune_entries(launcher.launches, before)
    assert entry["op_name"] == "tilessm-scan"
    assert entry["kernel_name"] == "_ssm_scan_kernel"
    assert entry["launches"] == 1  # per call
    assert entry["selection_source"] == "triton_best_config"
    assert entry["selected_config"]["BLOCK_C"] == chunked.CONFIGS[0].kwargs["BLOCK_C"]
    assert (entry["cache_hits"], entry["cache_misses"]) == (1, 0)  # one config: nothing tuned


@pytest.mark.interpreter
def test_a_pinned_config_is_reported_as_chosen_here() -> None:
    workload = TileSSMScan()
    case = workload.cases(workload.make_params("smoke", {"steps": 9}))[2]
    config = segmented.SPLIT_CONFIGS[1]
    launcher = bind_scan(case, workload.make_inputs(case, "cpu", torch.float32, 0),
                         config=config, segment_steps=4)
    launcher()
    entries = autotune_entries(launcher.launches, cached_keys(launcher.launches))
    assert [e["kernel_name"] for e in entries] == [
        "_segment_totals_kernel", "_segment_carries_kernel", "_segment_apply_kernel"]
    assert all(e["selection_source"] == "heuristic" for e in entries)
    assert entries[0]["selected_config"]["BLOCK_C"] == config.kwargs["BLOCK_C"]
    assert entries[1]["selected_config"]["FOLD_K"] == segmented.MIN_FOLD_K


@pytest.mark.interpreter
def test_end_to_end_through_the_triton_backend() -> None:
    timing = apex_core.TimingOptions(warmup=1, min_iters=2, min_time_s=0, max_time_s=0.05)
    report = apex_core.run(workloads=["fusiongate", "tilessm-scan"], backends=["triton"],
                           device="cpu", profile="smoke", isolation="inline", timing=timing)
    cells = {(c.workload, c.case): c for c in report.cells}
    assert set(cells) == {("fusiongate", "default"), ("tilessm-scan", "forward"),
                          ("tilessm-scan", "backward"), ("tilessm-scan", "bidirectional")}
    for cell in cells.values():
        assert cell.status == Status.OK, f"{cell.key}: {cell.status} {cell.reason}"
        assert all(a.passed for a in cell.accuracy)
