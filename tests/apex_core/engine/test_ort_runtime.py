"""The ONNX Runtime model loader: specs from the session, feed checks, binding and runs."""

from __future__ import annotations

import importlib.util

import pytest
import torch

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from apex_core.engine import ort_runtime  # noqa: E402
from apex_core.engine.ort_runtime import (  # noqa: E402
    RuntimeUnavailableError,
    UnsupportedModelError,
    load_onnx_model,
)
from apex_core.engine.runtime import EngineModel  # noqa: E402
from apex_core.engine.tensor_spec import DYNAMIC  # noqa: E402
from apex_core.errors import UsageError  # noqa: E402


def _save(graph: onnx.GraphProto, path) -> str:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture()
def small_model(tmp_path) -> str:
    """y = 2x over x [batch, 3] (fp32), j = idx + 1 over idx [4] (int32)."""
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    one = helper.make_tensor("one", TensorProto.INT32, [], [1])
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["y"]), helper.make_node("Add", ["idx", "one"], ["j"])],
        "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3]),
         helper.make_tensor_value_info("idx", TensorProto.INT32, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3]),
         helper.make_tensor_value_info("j", TensorProto.INT32, [4])],
        initializer=[two, one],
    )
    return _save(graph, tmp_path / "small.onnx")


def test_specs_come_from_the_session(small_model):
    model = load_onnx_model(small_model)
    engine: EngineModel = model  # what the sweep and the engine backends type it as
    assert callable(engine.bind)
    assert model.runtime == "onnxruntime"
    x, idx = model.inputs
    assert (x.name, x.dtype, x.shape, x.dim_names) == ("x", "fp32", (DYNAMIC, 3), ("batch", None))
    assert x.is_input and x.is_dynamic
    assert (idx.name, idx.dtype, idx.shape, idx.is_dynamic) == ("idx", "int32", (4,), False)
    assert [(o.name, o.dtype) for o in model.outputs] == [("y", "fp32"), ("j", "int32")]
    assert not any(o.is_input for o in model.outputs)
    assert x.profile is None


def test_bind_resolves_shapes_and_reads_the_feeds_on_every_call(small_model):
    model = load_onnx_model(small_model)
    x = torch.randn(5, 3)
    idx = torch.arange(4, dtype=torch.int32)
    bound = model.bind({"x": x, "idx": idx})
    assert bound.input_shapes == {"x": (5, 3), "idx": (4,)}
    assert bound.output_shapes == {"y": (5, 3), "j": (4,)}
    first = bound.fn()
    torch.testing.assert_close(first["y"], 2 * x)
    torch.testing.assert_close(first["j"], idx + 1)
    # the runner refreshes inputs in place: the next call must see the new contents
    x.copy_(torch.full((5, 3), 7.0))
    idx.copy_(torch.tensor([9, 8, 7, 6], dtype=torch.int32))
    second = bound.fn()
    torch.testing.assert_close(second["y"], torch.full((5, 3), 14.0))
    assert second["j"].tolist() == [10, 9, 8, 7]
    # outputs are the preallocated buffers listed on the binding (the runner poisons them)
    assert bound.outputs is not None and second["y"].data_ptr() == bound.outputs["y"].data_ptr()


def test_a_non_contiguous_feed_is_read_anew_each_call(small_model):
    model = load_onnx_model(small_model)
    base = torch.randn(3, 6)
    x = base.t()[::2]  # [3, 3], strided
    assert not x.is_contiguous()
    bound = model.bind({"x": x, "idx": torch.zeros(4, dtype=torch.int32)})
    torch.testing.assert_close(bound.fn()["y"], 2 * x)
    base.mul_(-1)
    torch.testing.assert_close(bound.fn()["y"], 2 * x)


@pytest.mark.parametrize(
    ("feeds", "expected"),
    [
        ({"x": torch.zeros(2, 3)}, "missing input(s) idx; the model expects: x fp32 [batch, 3]; idx int32 [4]"),
        ({"x": torch.zeros(2, 3), "idx": torch.zeros(4, dtype=torch.int32), "z": torch.zeros(1)},
         "unknown input(s) z"),
        ({"x": torch.zeros(3), "idx": torch.zeros(4, dtype=torch.int32)},
         "input 'x' has rank 1 (shape [3]), the model expects rank 2: x fp32 [batch, 3]"),
        ({"x": torch.zeros(2, 4), "idx": torch.zeros(4, dtype=torch.int32)},
         "input 'x' has shape [2, 4], the model expects x fp32 [batch, 3] (dim 1 is fixed at 3)"),
        ({"x": torch.zeros(2, 3), "idx": torch.zeros(4, dtype=torch.int64)},
         "input 'idx' is int64, the model expects idx int32 [4]"),
    ],
)
def test_bad_feeds_are_usage_errors_naming_the_input(small_model, feeds, expected):
    with pytest.raises(UsageError) as info:
        load_onnx_model(small_model).bind(feeds)
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_cuda_needs_the_cuda_execution_provider(small_model):
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA execution provider")
    with pytest.raises(RuntimeUnavailableError, match="no CUDAExecutionProvider here .*onnxruntime-gpu"):
        load_onnx_model(small_model, device="cuda")


def test_unknown_device_and_missing_or_broken_files(small_model, tmp_path):
    with pytest.raises(UsageError, match="unknown device 'tpu'"):
        load_onnx_model(small_model, device="tpu")
    with pytest.raises(UsageError, match="ONNX model file not found"):
        load_onnx_model(tmp_path / "absent.onnx")
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a protobuf")
    with pytest.raises(UsageError, match="onnxruntime cannot load"):
        load_onnx_model(broken)


def test_feeds_on_another_device_than_the_model(small_model):
    model = load_onnx_model(small_model)
    feeds = {"x": torch.zeros(2, 3, device="meta"), "idx": torch.zeros(4, dtype=torch.int32)}
    with pytest.raises(UsageError, match="the model was loaded for cpu"):
        model.bind(feeds)


def test_an_operator_without_a_kernel_in_its_type_is_unsupported(tmp_path):
    # ONNX Runtime's CPU provider has no bfloat16 Mul: what a bf16 export of tile-stage1 needs
    graph = helper.make_graph(
        [helper.make_node("Mul", ["a", "b"], ["c"])], "bf16-mul",
        [helper.make_tensor_value_info(n, TensorProto.BFLOAT16, [2]) for n in ("a", "b")],
        [helper.make_tensor_value_info("c", TensorProto.BFLOAT16, [2])],
    )
    with pytest.raises(UnsupportedModelError, match="CPUExecutionProvider cannot run .*Mul"):
        load_onnx_model(_save(graph, tmp_path / "bf16.onnx"))


def test_bf16_tensors_bind_without_numpy(tmp_path):
    # numpy has no bfloat16: binding raw torch memory is what makes bf16 models usable
    graph = helper.make_graph(
        [helper.make_node("Identity", ["a"], ["b"])], "bf16-identity",
        [helper.make_tensor_value_info("a", TensorProto.BFLOAT16, [3])],
        [helper.make_tensor_value_info("b", TensorProto.BFLOAT16, [3])],
    )
    model = load_onnx_model(_save(graph, tmp_path / "id.onnx"))
    a = torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16)
    out = model.bind({"a": a}).fn()["b"]
    assert out.dtype == torch.bfloat16 and out.tolist() == a.tolist()


def test_missing_onnxruntime_is_one_clear_line(small_model, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with pytest.raises(RuntimeUnavailableError, match=r"^onnxruntime not installed \(pip install onnxruntime"):
        ort_runtime.load_onnx_model(small_model)
