"""tensorrt-engine: options, skip reasons, the shape and profile logic, and the CLI bar.

TensorRT cannot be installed here: the skip paths, option handling, the shape checks
on engine I/O descriptions and the optimization profile derived from a real ONNX
export run for real; what needs TensorRT skips with the backend's own probe reason.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from adapters.tensorrt_common import (
    EngineBuildError,
    TensorRTUnavailableError,
    cell_dtype_name,
    dtype_name_of_trt,
    feed_problem,
    load_engine_model,
    network_profile,
    profile_around,
    tensorrt_reason,
)
from adapters.tensorrt_engine import NO_ENGINE, EngineOptions, TensorRTEngineBackend, engine_support_reason
from apex_core.engine.tensor_spec import DYNAMIC, ProfileRange, TensorSpec
from apex_core.errors import UsageError
from apex_core.registry import Registry
from apex_core.report.schema import validate_report
from tests.conftest import run_cli

TRT_MISSING = "tensorrt not installed (pip install tensorrt; needs NVIDIA's package index)"
needs_no_tensorrt = pytest.mark.skipif(importlib.util.find_spec("tensorrt") is not None,
                                       reason="tensorrt is installed here")


@pytest.fixture(scope="module")
def workloads():
    return Registry.discover().workloads


def first_case(workload, **overrides):
    return workload.cases(workload.make_params("smoke", overrides))[0]


# --- skip reasons on this machine -------------------------------------------------------


@needs_no_tensorrt
@pytest.mark.parametrize("options", [{}, {"engine_path": "/no/such.engine"}, {"build": True}])
def test_probe_without_tensorrt_gives_the_import_reason_first(options):
    backend = TensorRTEngineBackend()
    backend.configure(options)
    assert backend.probe("cuda").reason == TRT_MISSING
    assert backend.probe("cpu").reason == TRT_MISSING


@needs_no_tensorrt
def test_load_engine_model_without_tensorrt_says_so_before_looking_at_the_file():
    with pytest.raises(TensorRTUnavailableError) as raised:
        load_engine_model("/no/such.engine")
    assert str(raised.value) == TRT_MISSING


def test_probe_reasons_in_order_where_tensorrt_runs(tmp_path):
    reason = tensorrt_reason("cuda")
    if reason:
        pytest.skip(reason)
    backend = TensorRTEngineBackend()
    backend.configure({})
    # no engine given: available (engine-file cells bring their own), each workload cell unsupported
    assert backend.probe("cuda").ok
    from apex_core.workloads.fusiongate import FusionGate

    workload = FusionGate()
    case = workload.cases(workload.make_params("smoke"))[0]
    assert backend.supports(workload, case, "fp16").reason == NO_ENGINE
    missing = tmp_path / "ff.engine"
    backend.configure({"engine_path": str(missing)})
    assert backend.probe("cuda").reason == f"engine file not found: {missing}"
    missing.write_bytes(b"not an engine")
    backend.configure({"engine_path": str(missing)})
    assert backend.probe("cuda").reason.startswith("deserialization failed: ")


# --- options ------------------------------------------------------------------------------


def test_options_default_to_ff_infer_and_reject_conflicts_and_unknown_names():
    assert EngineOptions.from_mapping({}) == EngineOptions(None, False, "ff-infer")
    assert EngineOptions.from_mapping({"engine_path": "a.plan", "engine_workload": "tilepack"}) == \
        EngineOptions("a.plan", False, "tilepack")
    with pytest.raises(UsageError, match="exclude each other"):
        EngineOptions.from_mapping({"engine_path": "a.plan", "build": True})
    with pytest.raises(UsageError, match="unknown option 'engine'; valid options"):
        EngineOptions.from_mapping({"engine": "a.plan"})
    with pytest.raises(UsageError, match="build is a boolean"):
        EngineOptions.from_mapping({"build": "yes"})


def test_an_engine_path_serves_only_its_workload(workloads):
    backend = TensorRTEngineBackend()
    backend.configure({"engine_path": "ff.engine"})
    support = backend.supports(workloads["tilepack"], first_case(workloads["tilepack"]), "fp16")
    assert support.reason == ("the engine from --trt-engine-path serves ff-infer only "
                              "(name its workload with --workloads)")


def test_build_mode_supports_exportable_cases_and_says_why_not(workloads):
    backend = TensorRTEngineBackend()
    backend.configure({"build": True})
    ff = workloads["ff-infer"]
    assert backend.supports(ff, first_case(ff), "fp16").ok
    gate = workloads["fusiongate"]
    bf16 = backend.supports(gate, first_case(gate), "bf16")
    assert not bf16.ok and bf16.reason.startswith("no ONNX export to build from: ")


# --- shape and dtype logic on engine I/O descriptions --------------------------------------


def spec(name, dtype, shape, profile=None):
    return TensorSpec(name, True, dtype, shape, (None,) * len(shape), profile)


ENGINE = (
    spec("features", "fp16", (DYNAMIC, 8, DYNAMIC, DYNAMIC),
         ProfileRange((1, 8, 8, 8), (1, 8, 16, 16), (2, 8, 32, 32))),
    spec("idx", "int32", (1, 6)),
)


def test_engine_support_reason_checks_dtype_then_shapes():
    fits = {"features": ("fp16", (1, 8, 16, 16)), "idx": ("int32", (1, 6)), "extra": ("fp32", (3,))}
    assert engine_support_reason("tilepack", ENGINE, fits) == ""
    wrong_dtype = {**fits, "features": ("fp32", (1, 8, 16, 16))}
    assert engine_support_reason("tilepack", ENGINE, wrong_dtype).startswith(
        "unsupported dtype: engine input 'features' is fp16, this tilepack cell feeds fp32")
    fp8 = (spec("x", "fp8", (4,)),)
    assert engine_support_reason("w", fp8, {"x": ("fp16", (4,))}) == \
        "unsupported dtype: engine input 'x' is fp8, which cannot be fed"
    no_features = {"idx": ("int32", (1, 6))}
    assert engine_support_reason("tilepack", ENGINE, no_features).startswith(
        "dynamic dimension with no shape given: engine input 'features'")
    no_idx = {"features": ("fp16", (1, 8, 16, 16))}
    assert engine_support_reason("tilepack", ENGINE, no_idx).startswith("engine input 'idx' is not an input")
    too_big = {**fits, "features": ("fp16", (1, 8, 64, 64))}
    assert "outside the profile" in engine_support_reason("tilepack", ENGINE, too_big)


def test_feed_problem_names_the_input_and_what_the_engine_expects():
    assert feed_problem(ENGINE, {"features": ("fp16", (2, 8, 32, 8)), "idx": ("int32", (1, 6))}) == ""
    assert feed_problem(ENGINE, {"features": ("fp16", (1, 4, 16, 16)), "idx": ("int32", (1, 6))}) == (
        "input 'features' has shape [1, 4, 16, 16], the engine expects features fp16 [?, 8, ?, ?] "
        "(profile [1, 8, 8, 8] .. [2, 8, 32, 32])")
    assert feed_problem(ENGINE, {"features": ("fp16", (1, 8, 16, 16)), "idx": ("int32", (6,))}).startswith(
        "input 'idx' has shape [6]")
    assert feed_problem(ENGINE, {"idx": ("int32", (1, 6)), "bogus": ("fp16", (1,))}).startswith(
        "unknown input(s) bogus")


def test_dtype_names_of_tensorrt_members_and_cells():
    assert [dtype_name_of_trt(t) for t in ("DataType.HALF", "DataType.BF16", "DataType.FLOAT",
                                           "DataType.INT32", "DataType.FP8")] == ["fp16", "bf16", "fp32",
                                                                                  "int32", "fp8"]
    scan = {"tokens": torch.zeros(2, dtype=torch.bfloat16), "decay": torch.zeros(2),
            "idx": torch.zeros(2, dtype=torch.int32)}
    assert cell_dtype_name(scan) == "bf16"
    assert cell_dtype_name({"x": torch.zeros(1), "i": torch.zeros(1, dtype=torch.int64)}) == "fp32"


def test_profile_around_spans_half_to_double_and_optimizes_for_the_case():
    assert profile_around((1, 8, 16, 6)) == ((1, 4, 8, 3), (1, 8, 16, 6), (2, 16, 32, 12))


def test_network_profile_pins_fixed_dims_and_needs_every_dynamic_input():
    inputs = [("features", (-1, 8, -1, -1)), ("scale", (4,))]
    shapes = {"features": profile_around((1, 8, 16, 16)), "scale": profile_around((4,))}
    profile = network_profile(inputs, shapes)
    assert profile == {"features": ((1, 8, 8, 8), (1, 8, 16, 16), (2, 8, 32, 32))}
    with pytest.raises(EngineBuildError, match="dynamic dimension with no shape given: input 'features'"):
        network_profile(inputs, {})
    with pytest.raises(EngineBuildError, match="rank 2"):
        network_profile(inputs, {"features": ((1, 1), (1, 1), (1, 1))})


def test_profile_of_a_real_onnx_export_ranges_exactly_its_dynamic_axes(tmp_path, workloads):
    onnx = pytest.importorskip("onnx")
    from apex_core.engine.onnx_export import export_workload

    workload = workloads["tilepack"]
    case = first_case(workload)
    exported = export_workload(workload, case, "fp32", tmp_path / "tilepack.onnx")
    graph = onnx.load(str(exported.path)).graph
    network_inputs = [(i.name, tuple(d.dim_value if d.HasField("dim_value") else -1
                                     for d in i.type.tensor_type.shape.dim)) for i in graph.input]
    shapes = dict(zip(exported.input_names, exported.input_shapes, strict=True))
    profile = network_profile(network_inputs, {n: profile_around(s) for n, s in shapes.items()})
    for name, (lo, opt, hi) in profile.items():
        assert opt == shapes[name]
        dynamic = set(exported.dynamic_axes.get(name, {}))
        for axis, size in enumerate(opt):
            if axis in dynamic:
                assert lo[axis] == max(1, size // 2) and hi[axis] == 2 * size, (name, axis)
            else:
                assert lo[axis] == size == hi[axis], (name, axis)
    assert set(profile) == {n for n, axes in exported.dynamic_axes.items() if axes}


# --- end to end ---------------------------------------------------------------------------


def test_built_engine_runs_and_checks_out_where_tensorrt_runs():
    reason = tensorrt_reason("cuda")
    if reason:
        pytest.skip(reason)
    import apex_core

    report = apex_core.run(["tilepack"], ["tensorrt-engine"], device="cuda", profile="smoke",
                           backend_options={"tensorrt-engine": {"build": True}})
    assert [c.status for c in report.cells] == [apex_core.Status.OK], [c.reason for c in report.cells]


@pytest.mark.slow
def test_cli_trt_on_this_machine_skips_every_cell_with_the_reason(tmp_path):
    result = run_cli(["--backends", "trt", "--device", "cpu", "--profile", "smoke", "--quiet",
                      "--trt-plugin-lib", "libapexx_nowhere.so",  # a bare name: the loader's search
                      "--output-json", "r.json", "--output-md", "r.md"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    record = json.loads((tmp_path / "r.json").read_text())
    validate_report(record)
    cells = record["benchmarks"]
    assert {c["backend"] for c in cells} == {"tensorrt-plugin", "tensorrt-engine"}
    assert all(c["status"] == "skipped" and c["skip_kind"] == "unavailable" for c in cells)
    assert {c["reason"] for c in cells} == {tensorrt_reason("cpu")}
    assert record["config"]["backend_options"] == {"tensorrt-plugin": {"plugin_libs": ["libapexx_nowhere.so"]}}
