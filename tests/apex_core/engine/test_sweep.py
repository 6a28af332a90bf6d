"""The engine sweep over small ONNX models, exported here and run under ONNX Runtime for real.

A sweep is a plan of ``engine`` workload cases; most tests here run it inline (in this
process) for speed, test_sweep_faults.py runs it in worker processes.
"""

import re
import warnings

import pytest
import torch

from apex_core.engine import sweep
from apex_core.engine.shape_case import parse_shape_case
from apex_core.engine.sweep_report import sweep_markdown
from apex_core.engine.workload import NO_REFERENCE, EngineParams, EngineWorkload, case_seed, random_feeds
from apex_core.errors import UsageError
from apex_core.report.records import cell_record, report_record
from apex_core.report.schema import validate_report
from apex_core.results import Case, Status
from apex_core.timing import TimingOptions
from tests.markdown_helpers import note_number

pytest.importorskip("onnxruntime")

FAST = TimingOptions(warmup=1, min_iters=3, min_time_s=0.0, max_time_s=0.05)


class _ImageNet(torch.nn.Module):
    """x [B,3,H,W] float, bias [3] (fixed), idx [B,K] int64 -> y [B,3,H,W], picked [B,K]."""

    def forward(self, x, bias, idx):
        y = x * 2.0 + bias.view(1, 3, 1, 1)
        picked = torch.gather(x.flatten(2).sum(1), 1, idx)
        return y, picked


class _ReshapeNet(torch.nn.Module):
    """Fails at run time unless the input's element count is a multiple of 3."""

    def forward(self, x):
        return x.reshape(-1, 3) * 2.0


def export_image_model(path):
    """A dynamic-shape ONNX model: batch, height, width and K open; channels and bias fixed."""
    args = (torch.randn(2, 3, 8, 8), torch.randn(3), torch.zeros(2, 4, dtype=torch.int64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_ImageNet(), args, str(path), dynamo=False, input_names=["x", "bias", "idx"],
                          output_names=["y", "picked"],
                          dynamic_axes={"x": {0: "batch", 2: "height", 3: "width"},
                                        "idx": {0: "batch", 1: "K"}, "y": {0: "batch", 2: "height", 3: "width"},
                                        "picked": {0: "batch", 1: "K"}})
    return path


def export_reshape_model(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_ReshapeNet(), (torch.randn(2, 3),), str(path), dynamo=False, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "rows", 1: "cols"}})
    return path


@pytest.fixture(scope="module")
def image_model(tmp_path_factory):
    return export_image_model(tmp_path_factory.mktemp("models") / "image.onnx")


@pytest.fixture(scope="module")
def reshape_model(tmp_path_factory):
    return export_reshape_model(tmp_path_factory.mktemp("models") / "reshape net.onnx")


CASES = ["b1:x=1x3x8x8;idx=1x4", "b2:x=2x3x16x8;idx=2x4", "x=4x3x8x8;idx=4x2"]


def run_inline(plan):
    return sweep.run_sweep(plan, isolation="inline")


def test_three_cases_give_three_ok_unchecked_cells_with_resolved_shapes(image_model):
    plan = sweep.plan_sweep(image_model, CASES, timing=FAST)
    assert (plan.runtime, plan.device, plan.name) == ("onnxruntime", "cpu", "image")
    assert plan.plan.backends == ("onnxruntime",) and plan.plan.workloads == ("engine",)
    cells = [(c.case.workload, c.backend, c.dtype) for c in plan.plan.cells]
    assert cells == [("engine", "onnxruntime", "fp32")] * 3
    report = run_inline(plan)
    assert [c.status for c in report.cells] == [Status.OK] * 3
    assert [c.case for c in report.cells] == ["b1", "b2", "x=4x3x8x8;idx=4x2"]
    b2 = report.cells[1]
    assert b2.key == "image/b2/onnxruntime/fp32/cpu"  # filed under the file's name, not "engine"
    assert b2.params["shape_case"] == "b2:x=2x3x16x8;idx=2x4"
    assert b2.params["inputs"] == (("x", "fp32", (2, 3, 16, 8)), ("bias", "fp32", (3,)),
                                   ("idx", "int64", (2, 4)))
    meta = b2.metadata
    assert meta["inputs"]["x"] == {"shape": [2, 3, 16, 8], "dtype": "fp32", "dynamic": True}
    assert meta["inputs"]["bias"] == {"shape": [3], "dtype": "fp32", "dynamic": False}
    assert meta["outputs"]["y"]["shape"] == [2, 3, 16, 8] and meta["outputs"]["picked"]["shape"] == [2, 4]
    assert meta["engine"] == str(image_model) and meta["engine_sha256"] == plan.engine_sha256
    assert len(plan.engine_sha256) == 64
    # no reference: timed, never checked, and the cell says so
    assert b2.accuracy == () and b2.unchecked == NO_REFERENCE
    record = cell_record(b2)
    assert record["correctness"] == "unchecked" and record["unchecked_reason"] == NO_REFERENCE
    assert b2.timing.method == "cpu_perf_counter" and b2.timing.stats.n >= 3
    # bytes moved: every input read once, every output written once
    expected_bytes = 4 * (2 * 3 * 16 * 8 + 3) + 8 * 8 + 4 * (2 * 3 * 16 * 8 + 8)
    assert b2.derived.bytes_moved == expected_bytes and b2.derived.units == "elements"
    full = report_record(report)
    validate_report(full)
    assert full["suite"] == "apex-bench-sweep" and full["config"]["profile"] == "sweep"
    assert full["config"]["workloads"] == ["image"] and full["config"]["engine"]["sha256"] == plan.engine_sha256
    assert full["replay"]["inputs_only"] == ["image/b1/fp32", "image/b2/fp32", "image/x=4x3x8x8;idx=4x2/fp32"]
    workload, case = EngineWorkload(), plan.cases[0]
    from apex_core.measure.replay_artifacts import tensors_sha256

    inputs = workload.make_inputs(case, "cpu", torch.float32, plan.plan.seed)
    assert full["replay"]["artifact_hashes"]["image/b1/fp32"] == tensors_sha256(inputs, {})
    markdown = sweep_markdown(report)
    assert ("| b2 | onnxruntime | x 2x3x16x8 fp32, idx 2x4 int64, 1 fixed | y 2x3x16x8 fp32, picked 2x4 fp32 |"
            in markdown)
    number = note_number(markdown, NO_REFERENCE)
    assert number is not None and f"unchecked [{number}]" in markdown


def test_every_case_is_checked_before_any_runs(image_model):
    with pytest.raises(UsageError, match="case 'bad': input 'x': dimension 1 is 4"):
        sweep.plan_sweep(image_model, [*CASES, "bad:x=1x4x8x8;idx=1x4"], timing=FAST)


def test_a_case_that_fails_at_run_time_is_an_error_cell_and_the_rest_run(reshape_model):
    plan = sweep.plan_sweep(reshape_model, ["ok:x=2x3", "odd:x=1x4", "ok2:x=4x6"], timing=FAST)
    assert plan.name == "reshape_net"  # the stem, made key-safe
    report = run_inline(plan)
    assert [c.status for c in report.cells] == [Status.OK, Status.ERROR, Status.OK]
    failed = report.cells[1]
    assert re.match(r"\w+ during prepare: .*Reshape", failed.reason)
    assert "\n" not in failed.reason
    assert failed.timing is None and "Traceback" in failed.log and failed.unchecked == ""
    assert cell_record(failed)["correctness"] == "not_reached"
    assert failed.params["inputs"] == (("x", "fp32", (1, 4)),)
    validate_report(report_record(report))
    assert "| odd | onnxruntime | x 1x4 fp32 | – |" in sweep_markdown(report)


def test_inputs_are_fresh_random_and_fixed_by_seed_and_case_name(image_model):
    plan = sweep.plan_sweep(image_model, ["a:x=2x3x8x8;idx=2x64"], timing=FAST, int_high=3)
    case, workload = plan.cases[0], EngineWorkload()
    assert case.params.int_high == 3
    feeds = workload.make_inputs(case, "cpu", torch.float16, 0)  # the file fixes the dtypes
    assert feeds["x"].dtype == torch.float32 and feeds["x"].std() > 0.5
    assert feeds["idx"].dtype == torch.int64 and set(feeds["idx"].unique().tolist()) == {0, 1, 2}
    again = workload.make_inputs(case, "cpu", torch.float32, 0)
    assert all(torch.equal(feeds[k], again[k]) for k in feeds)
    assert case_seed(0, "a") != case_seed(0, "b") != case_seed(1, "a")
    renamed = Case("engine", "b", case.params)
    assert not torch.equal(workload.make_inputs(renamed, "cpu", torch.float32, 0)["x"], feeds["x"])


def test_bool_and_low_precision_inputs():
    specs = [("m", "bool", (64,)), ("h", "bf16", (64,)), ("i", "int32", (64,)), ("b", "int8", (512,))]
    feeds = random_feeds(specs, "cpu", 3, int_high=5)
    assert feeds["m"].dtype == torch.bool and 0 < int(feeds["m"].sum()) < 64
    assert feeds["h"].dtype == torch.bfloat16 and bool((feeds["h"] != 0).all())
    assert feeds["i"].dtype == torch.int32 and int(feeds["i"].max()) == 4 and int(feeds["i"].min()) == 0
    # a range wider than the type is capped rather than wrapped to negative values
    wide = random_feeds(specs, "cpu", 3, int_high=1000)["b"]
    assert wide.dtype == torch.int8 and int(wide.min()) >= 0 and int(wide.max()) > 100


def test_the_engine_workload_has_no_case_without_a_file_and_rebuilds_from_plain_params(image_model):
    workload = EngineWorkload()
    assert workload.cases(workload.make_params()) == []  # a bare suite run gets no engine cells
    plan = sweep.plan_sweep(image_model, CASES[:1], timing=FAST)
    case = plan.cases[0]
    # what a worker gets: the parameters as plain data, rebuilt into the same case
    rebuilt = EngineParams(**case.params_dict())
    assert rebuilt == case.params and workload.cases(rebuilt) == [case]
    with pytest.raises(ValueError, match="engine_format 'tvm'"):
        EngineParams(engine="m", engine_format="tvm")


def test_runtime_follows_the_suffix_or_the_flag(tmp_path):
    assert sweep.choose_runtime(tmp_path / "m.onnx", None) == "onnxruntime"
    assert sweep.choose_runtime(tmp_path / "m.PLAN", None) == "tensorrt"
    assert sweep.choose_runtime(tmp_path / "m.bin", "onnxruntime") == "onnxruntime"
    with pytest.raises(UsageError, match=r"suffix '\.bin'.*pass --runtime"):
        sweep.choose_runtime(tmp_path / "m.bin", None)
    with pytest.raises(UsageError, match="unknown runtime 'tvm'"):
        sweep.choose_runtime(tmp_path / "m.onnx", "tvm")


def tensorrt_reason():
    from adapters.tensorrt_engine import TensorRTEngineBackend

    return TensorRTEngineBackend().probe("cuda").reason


def test_tensorrt_missing_is_a_usage_error_with_its_reason(tmp_path):
    reason = tensorrt_reason()
    if not reason:
        pytest.skip("tensorrt is importable here and a CUDA device is present")
    engine = tmp_path / "model.engine"
    engine.write_bytes(b"\0" * 16)
    with pytest.raises(UsageError) as info:
        sweep.plan_sweep(engine, ["x=1x3"])
    assert str(info.value) == f"runtime tensorrt cannot run here: {reason}"


def test_plan_errors(image_model, tmp_path):
    with pytest.raises(UsageError, match="file not found"):
        sweep.plan_sweep(tmp_path / "missing.onnx", ["x=1"])
    with pytest.raises(UsageError, match="no shape case given"):
        sweep.plan_sweep(image_model, [])
    with pytest.raises(UsageError, match="share the name 'a'"):
        sweep.plan_sweep(image_model, ["a:x=1x3x8x8;idx=1x4", "a:x=2x3x8x8;idx=2x4"])
    with pytest.raises(UsageError, match="--name"):
        sweep.plan_sweep(image_model, CASES, name="my model")
    with pytest.raises(UsageError, match="--graph needs --device cuda"):
        sweep.plan_sweep(image_model, CASES, timing=TimingOptions(graph=True))
    with pytest.raises(UsageError, match="unknown backend 'nope'"):
        sweep.plan_sweep(image_model, CASES, backends=["nope"])
    with pytest.raises(UsageError, match="torch-reference does not run onnx files"):
        sweep.plan_sweep(image_model, CASES, backends=["torch-reference"])
    broken = tmp_path / "broken.onnx"
    broken.write_text("not a model")
    with pytest.raises(UsageError, match="onnxruntime cannot load"):
        sweep.plan_sweep(broken, ["x=1"])
    parsed = parse_shape_case("p:x=1x3x8x8;idx=1x1")
    assert sweep.plan_sweep(image_model, [parsed], timing=FAST).shape_cases == (parsed,)
