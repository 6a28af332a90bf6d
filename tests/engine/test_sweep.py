"""The engine sweep over small ONNX models, exported here and run under ONNX Runtime for real."""

import re
import warnings

import pytest
import torch

from apex_core.engine import sweep
from apex_core.engine.shape_case import parse_shape_case
from apex_core.errors import UsageError
from apex_core.report.writer import validate_report
from apex_core.results import Status
from apex_core.timing import TimingOptions

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


def test_three_cases_give_three_ok_cells_with_resolved_shapes(image_model):
    plan = sweep.plan_sweep(image_model, CASES, timing=FAST)
    assert (plan.runtime, plan.device, plan.dtype, plan.name) == ("onnxruntime", "cpu", "fp32", "image")
    report = sweep.run_sweep(plan)
    assert [c.status for c in report.cells] == [Status.OK] * 3
    assert [c.case for c in report.cells] == ["b1", "b2", "x=4x3x8x8;idx=4x2"]
    b2 = report.cells[1]
    assert b2.key == "image/b2/onnxruntime/fp32/cpu"
    meta = b2.metadata
    assert meta["inputs"]["x"] == {"shape": [2, 3, 16, 8], "dtype": "fp32", "dynamic": True}
    assert meta["inputs"]["bias"] == {"shape": [3], "dtype": "fp32", "dynamic": False}
    assert meta["outputs"]["y"]["shape"] == [2, 3, 16, 8] and meta["outputs"]["picked"]["shape"] == [2, 4]
    assert meta["engine"] == str(image_model) and meta["engine_sha256"] == plan.engine_sha256
    assert len(plan.engine_sha256) == 64 and "no reference" in meta["correctness"]
    assert b2.accuracy == ()  # no check ran, as for any cell that never reached one
    assert b2.timing.method == "cpu_perf_counter" and b2.timing.stats.n >= 3
    # bytes moved: every input read once, every output written once
    expected_bytes = 4 * (2 * 3 * 16 * 8 + 3) + 8 * 8 + 4 * (2 * 3 * 16 * 8 + 8)
    assert b2.derived.bytes_moved == expected_bytes and b2.derived.units == "elements"
    record = sweep.sweep_record(report)
    validate_report(record)
    assert record["suite"] == "apex-bench-sweep" and record["config"]["profile"] == "sweep"
    assert record["replay"]["artifact_hashes"]["image/b1/fp32"] == meta_hash(report.cells[0])
    markdown = sweep.sweep_markdown(report)
    assert "| b2 | x 2x3x16x8 fp32, idx 2x4 int64, 1 fixed | y 2x3x16x8 fp32, picked 2x4 fp32 |" in markdown


def meta_hash(cell):
    return cell.metadata["inputs_sha256"]


def test_every_case_is_checked_before_any_runs(image_model, monkeypatch):
    ran = []
    monkeypatch.setattr(sweep, "run_case", lambda plan, case: ran.append(case))
    with pytest.raises(UsageError, match="case 'bad': input 'x': dimension 1 is 4"):
        sweep.plan_sweep(image_model, [*CASES, "bad:x=1x4x8x8;idx=1x4"], timing=FAST)
    assert ran == []


def test_a_case_that_fails_at_run_time_is_an_error_cell_and_the_rest_run(reshape_model):
    plan = sweep.plan_sweep(reshape_model, ["ok:x=2x3", "odd:x=1x4", "ok2:x=4x6"], timing=FAST)
    assert plan.name == "reshape_net"  # the stem, made key-safe
    report = sweep.run_sweep(plan)
    assert [c.status for c in report.cells] == [Status.OK, Status.ERROR, Status.OK]
    failed = report.cells[1]
    assert re.match(r"\w+ during bind and first call: .*Reshape", failed.reason)
    assert "\n" not in failed.reason
    assert failed.timing is None and "Traceback" in failed.log
    assert failed.metadata["inputs"]["x"]["shape"] == [1, 4]
    validate_report(sweep.sweep_record(report))


def test_inputs_are_fresh_random_and_fixed_by_seed_and_case_name(image_model):
    plan = sweep.plan_sweep(image_model, ["a:x=2x3x8x8;idx=2x64"], timing=FAST, int_high=3)
    specs, case = plan.model.inputs, plan.cases[0]
    feeds = sweep.make_feeds(specs, case.input_shapes, "cpu", case.seed, plan.int_high)
    assert feeds["x"].dtype == torch.float32 and feeds["x"].std() > 0.5
    assert feeds["idx"].dtype == torch.int64 and set(feeds["idx"].unique().tolist()) == {0, 1, 2}
    again = sweep.make_feeds(specs, case.input_shapes, "cpu", case.seed, plan.int_high)
    assert all(torch.equal(feeds[k], again[k]) for k in feeds)
    assert sweep.case_seed(0, "a") == case.seed != sweep.case_seed(0, "b") != sweep.case_seed(1, "a")


def test_bool_and_low_precision_inputs():
    from apex_core.engine.tensor_spec import TensorSpec

    specs = [TensorSpec("m", True, "bool", (64,)), TensorSpec("h", True, "bf16", (64,)),
             TensorSpec("i", True, "int32", (64,)), TensorSpec("b", True, "int8", (512,))]
    shapes = {"m": (64,), "h": (64,), "i": (64,), "b": (512,)}
    feeds = sweep.make_feeds(specs, shapes, "cpu", 3, int_high=5)
    assert feeds["m"].dtype == torch.bool and 0 < int(feeds["m"].sum()) < 64
    assert feeds["h"].dtype == torch.bfloat16 and bool((feeds["h"] != 0).all())
    assert feeds["i"].dtype == torch.int32 and int(feeds["i"].max()) == 4 and int(feeds["i"].min()) == 0
    # a range wider than the type is capped rather than wrapped to negative values
    wide = sweep.make_feeds(specs, shapes, "cpu", 3, int_high=1000)["b"]
    assert wide.dtype == torch.int8 and int(wide.min()) >= 0 and int(wide.max()) > 100


def test_runtime_follows_the_suffix_or_the_flag(tmp_path):
    assert sweep.choose_runtime(tmp_path / "m.onnx", None) == "onnxruntime"
    assert sweep.choose_runtime(tmp_path / "m.PLAN", None) == "tensorrt"
    assert sweep.choose_runtime(tmp_path / "m.bin", "onnxruntime") == "onnxruntime"
    with pytest.raises(UsageError, match=r"suffix '\.bin'.*pass --runtime"):
        sweep.choose_runtime(tmp_path / "m.bin", None)
    with pytest.raises(UsageError, match="unknown runtime 'tvm'"):
        sweep.choose_runtime(tmp_path / "m.onnx", "tvm")


def test_tensorrt_missing_is_a_usage_error_with_its_reason(tmp_path):
    reason = sweep.runtime_reason("tensorrt", "cuda")
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
    broken = tmp_path / "broken.onnx"
    broken.write_text("not a model")
    with pytest.raises(UsageError, match="onnxruntime cannot load"):
        sweep.plan_sweep(broken, ["x=1"])
    parsed = parse_shape_case("p:x=1x3x8x8;idx=1x1")
    assert sweep.plan_sweep(image_model, [parsed], timing=FAST).cases[0].case == parsed
