"""``--reference-model``: an ONNX model that checks an engine file's outputs, run on the CPU."""

import pytest
import torch

from apex_core.engine.reference_model import check_reference, reference_outputs
from apex_core.engine.sweep import plan_sweep
from apex_core.engine.workload import NO_REFERENCE, EngineWorkload
from apex_core.errors import UsageError
from apex_core.results import Status
from apex_core.running.runner import run_plan
from apex_core.timing import TimingOptions
from tests.apex_core.engine.foreign_model import build_model

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

FAST = TimingOptions(warmup=1, min_iters=3, min_time_s=0.0, max_time_s=0.05)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("foreign")
    return {name: build_model(folder / f"{name}.onnx", **kwargs) for name, kwargs in (
        ("model", {}), ("reference", {}), ("wrong", {"scale": 3.0}), ("renamed", {"output": "scores"}))}


def _run(models, reference=None):
    from apex_core.engine.input_shape import input_shapes_case

    case = input_shapes_case([("pixel_values:0", (2, 4)), ("Mask", (2, 4))])
    sweep = plan_sweep(models["model"], [case], timing=FAST, reference_model=reference,
                       shape_flag="--input-shape")
    return sweep, run_plan(sweep.plan, sweep.registry, isolation="inline")


def test_without_a_reference_the_cell_is_ok_and_unchecked(models):
    _sweep, report = _run(models)
    (cell,) = report.cells
    assert cell.status == Status.OK and cell.unchecked == NO_REFERENCE and cell.accuracy == ()
    assert cell.metadata["inputs"]["pixel_values:0"] == {"shape": [2, 4], "dtype": "fp32", "dynamic": True}
    assert cell.params["reference_model"] == ""


def test_with_the_right_reference_the_cell_is_checked_and_ok(models):
    sweep, report = _run(models, models["reference"])
    (cell,) = report.cells
    assert cell.status == Status.OK and cell.unchecked == ""
    assert [a.stage for a in cell.accuracy] == ["before-timing", "after-timing"]
    assert all(a.passed for a in cell.accuracy) and cell.accuracy[0].atol == 1e-6
    assert cell.metadata["reference_model"] == str(models["reference"])
    assert sweep.plan.config()["reference_model"]["path"] == str(models["reference"])


def test_with_a_wrong_reference_the_cell_is_incorrect(models):
    _sweep, report = _run(models, models["wrong"])
    (cell,) = report.cells
    assert cell.status == Status.INCORRECT and "logits: 8/8 elements off" in cell.reason


def test_reference_outputs_take_the_reference_dtypes(models):
    inputs = {"pixel_values:0": torch.ones(2, 4, dtype=torch.float64),
              "Mask": torch.ones(2, 4, dtype=torch.int32)}
    out = reference_outputs(str(models["reference"]), inputs)
    assert out["logits"].dtype == torch.float32 and torch.equal(out["logits"], torch.full((2, 4), 3.0))


def test_integer_outputs_are_compared_exactly():
    tolerance = EngineWorkload().tolerance("int64")
    assert (tolerance.atol, tolerance.rtol) == (0.0, 0.0)


def test_a_reference_that_does_not_fit_is_a_usage_error(models, tmp_path):
    from apex_core.engine.ort_runtime import load_onnx_model

    model = load_onnx_model(models["model"])
    shapes = [{"pixel_values:0": (2, 4), "Mask": (2, 4)}]
    with pytest.raises(UsageError, match=r"^--reference-model \S+: its outputs \(scores\) are not the model's "
                       r"\(logits\)"):
        check_reference(models["renamed"], model, shapes, "fp32")
    with pytest.raises(UsageError, match="file not found"):
        check_reference(tmp_path / "nope.onnx", model, shapes, "fp32")
    with pytest.raises(UsageError, match="a fp64 model cannot be checked"):
        check_reference(models["reference"], model, shapes, "fp64")
    (tmp_path / "x.plan").write_bytes(b"0")
    with pytest.raises(UsageError, match=r"expected an ONNX model \(\.onnx\)"):
        check_reference(tmp_path / "x.plan", model, shapes, "fp32")
