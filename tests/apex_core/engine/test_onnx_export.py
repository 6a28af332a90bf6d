"""ONNX export of every built-in workload case: checker, names, ORT results, dynamic axes."""

from __future__ import annotations

import hashlib

import attrs
import pytest
import torch

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from apex_core.correctness import DTYPES, compare_outputs, upcast_inputs  # noqa: E402
from apex_core.engine.onnx_export import (  # noqa: E402
    OPSET,
    ExportError,
    export_workload,
    exportable,
    exportable_in,
    fold_constant_ifs,
)
from apex_core.engine.ort_runtime import load_onnx_model  # noqa: E402
from apex_core.engine.tensor_spec import DYNAMIC  # noqa: E402
from apex_core.errors import UsageError  # noqa: E402
from apex_core.registry import Registry  # noqa: E402
from tests.apex_core.fakes import Axpy  # noqa: E402

REGISTRY = Registry.discover()
BUILTIN = ("tilepack", "tileunpack", "fusiongate", "tilessm-scan", "tile-stage1", "ff-infer")
# ff-infer's smoke profile takes every level-0 tile (k0 capped by the grid), so its height is
# fixed there; with a smaller budget_b1 k0 no longer depends on the grid and the height is dynamic
UNCAPPED_FF = {"budget_b1": 2, "budget_b2": 1}
CASES = [(w, name, {}) for w in BUILTIN for name in REGISTRY.workloads[w].case_names]
CASES.append(("ff-infer", "default", UNCAPPED_FF))


def _case(workload_name, case_name, overrides):
    workload = REGISTRY.workloads[workload_name]
    params = workload.make_params("smoke", overrides)
    return workload, next(c for c in workload.cases(params) if c.name == case_name)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """Export each case once per module (fp32), keyed like CASES."""
    folder = tmp_path_factory.mktemp("onnx")
    cache = {}

    def get(workload_name, case_name, overrides):
        key = (workload_name, case_name, tuple(sorted(overrides.items())))
        if key not in cache:
            workload, case = _case(workload_name, case_name, overrides)
            path = folder / f"{workload_name}-{case_name}-{len(cache)}.onnx"
            cache[key] = export_workload(workload, case, "fp32", path)
        return cache[key]

    return get


def _ort_matches_reference(workload, case, path, dtype_name="fp32", seed=7):
    inputs = workload.make_inputs(case, "cpu", DTYPES[dtype_name], seed)
    outputs = load_onnx_model(path).bind(inputs).fn()
    reference = workload.reference(case, upcast_inputs(inputs, torch.float64))
    return compare_outputs(outputs, reference, workload.tolerance(dtype_name), "onnx")


def _label(*item):
    return f"{item[0]}:{item[1]}" + ("-uncapped" if item[2] else "")


@pytest.mark.parametrize("item", CASES, ids=[_label(*i) for i in CASES])
def test_export_passes_the_checker_and_keeps_the_workload_names(item, exports):
    exported = exports(*item)
    workload, case = _case(*item)
    model = onnx.load(str(exported.path))
    onnx.checker.check_model(model, full_check=True)
    inputs = workload.make_inputs(case, "cpu", torch.float32, 0)
    outputs = workload.reference(case, inputs)
    assert [i.name for i in model.graph.input] == list(inputs) == list(exported.input_names)
    assert [o.name for o in model.graph.output] == list(outputs) == list(exported.output_names)
    assert exported.input_shapes == tuple(tuple(t.shape) for t in inputs.values())
    assert exported.output_shapes == tuple(tuple(t.shape) for t in outputs.values())
    assert exported.sha256 == hashlib.sha256(exported.path.read_bytes()).hexdigest()
    assert exported.opset == OPSET == next(o.version for o in model.opset_import if o.domain == "")
    assert (exported.workload, exported.case, exported.dtype) == (workload.name, case.name, "fp32")
    # every dynamic axis is symbolic in the file, every other one fixed
    for spec in exported.input_specs:
        file_dims = next(i for i in model.graph.input if i.name == spec.name).type.tensor_type.shape.dim
        assert [d.dim_param or None for d in file_dims] == list(spec.dim_names)
        assert [d.dim_value if not d.dim_param else DYNAMIC for d in file_dims] == list(spec.shape)


@pytest.mark.parametrize("item", CASES, ids=[_label(*i) for i in CASES])
def test_onnx_runtime_matches_the_reference(item, exports):
    workload, case = _case(*item)
    accuracy = _ort_matches_reference(workload, case, exports(*item).path)
    assert accuracy.passed, accuracy.message


def _grown(case, label):
    """Parameters of a second size along one dynamic axis."""
    p = case.params
    step = getattr(p, "tile_size", 1) * (2 if case.workload == "ff-infer" else 1)
    if label == "batch":
        change = {"batch": p.batch + 2}
    elif label in ("height", "tiles0"):  # the level-0 grid grows with the height
        change = {"height": p.height + 2 * step}
    elif label == "width":
        change = {"width": p.width + 3 * step}
    else:
        assert label == "K"
        change = {"kmax": p.kmax + 3}
    return attrs.evolve(case, params=attrs.evolve(p, **change))


@pytest.mark.parametrize("item", CASES, ids=[_label(*i) for i in CASES])
def test_each_dynamic_axis_holds_at_a_second_size(item, exports):
    exported = exports(*item)
    workload, case = _case(*item)
    labels = {label for axes in exported.dynamic_axes.values() for label in axes.values()}
    assert "batch" in labels or workload.name in ("tile-stage1", "tileunpack")
    for label in sorted(labels):
        grown = _grown(case, label)
        accuracy = _ort_matches_reference(workload, grown, exported.path)
        assert accuracy.passed, f"{label}: {accuracy.message}"


@pytest.mark.parametrize(
    ("item", "change", "input_name"),
    [
        (("tile-stage1", "default", {}), {"batch": 2}, "x"),  # ScatterND bakes the update shape
        (("tilessm-scan", "forward", {}), {"steps": 20}, "tokens"),  # the doubling offsets are fixed
        (("ff-infer", "default", UNCAPPED_FF), {"width": 32}, "features"),  # ids use the grid width
        (("ff-infer", "default", {}), {"height": 32}, "features"),  # k0 capped by the grid
    ],
)
def test_axes_left_fixed_are_refused_at_bind(item, change, input_name, exports):
    workload, case = _case(*item)
    other = attrs.evolve(case, params=attrs.evolve(case.params, **change))
    inputs = workload.make_inputs(other, "cpu", torch.float32, 0)
    with pytest.raises(UsageError, match=f"input '{input_name}' has shape .* is fixed at"):
        load_onnx_model(exports(*item).path).bind(inputs)


def test_unused_inputs_stay_in_the_graph_by_name(exports):
    exported = exports("tilessm-scan", "forward", {})
    assert exported.unused_inputs == ("gate",)  # read only by the gated bidirectional merge
    model = load_onnx_model(exported.path)
    assert [spec.name for spec in model.inputs] == list(exported.input_names)


def _bf16_refused():
    """The built-in cases whose export recipe refuses bf16 (Workload.export_recipe)."""
    refused = []
    for name in BUILTIN:
        workload = REGISTRY.workloads[name]
        for case in workload.cases(workload.make_params("smoke")):
            if workload.export_recipe(case, "bf16").unsupported:
                refused.append((name, case.name))
    return refused


BF16_REFUSED = _bf16_refused()


def test_the_bf16_refusals_are_the_known_exporter_failures():
    assert BF16_REFUSED == [("fusiongate", "default"), ("ff-infer", "default")]


@pytest.mark.parametrize("key", BF16_REFUSED, ids=str)
def test_refused_bf16_exports_really_fail(key, tmp_path, monkeypatch):
    workload_name, case_name = key
    workload = REGISTRY.workloads[workload_name]
    case = next(c for c in workload.cases(workload.make_params("smoke")) if c.name == case_name)
    ok, reason = exportable_in(workload, case, "bf16")
    assert not ok and reason.startswith("no bf16 ONNX export: ")
    with pytest.raises(UsageError, match="no bf16 ONNX export"):  # refused before tracing
        export_workload(workload, case, "bf16", tmp_path / "x.onnx")
    # the refusal is true: with the fp32 recipe the exporter itself fails in bf16
    fp32_recipe = workload.export_recipe(case, "fp32")
    monkeypatch.setattr(workload, "export_recipe", lambda case, dtype_name: fp32_recipe)
    with pytest.raises(ExportError):
        export_workload(workload, case, "bf16", tmp_path / "x.onnx")


def test_fp16_exports_run_under_onnx_runtime_on_the_cpu(tmp_path):
    workload, case = _case("tile-stage1", "default", {})
    exported = export_workload(workload, case, "fp16", tmp_path / "stage1.onnx")
    assert exported.input_dtypes[0] == "fp16" and exported.output_dtypes == ("fp16",)
    accuracy = _ort_matches_reference(workload, case, exported.path, "fp16")
    assert accuracy.passed, accuracy.message


def test_workloads_without_a_recipe_are_not_exportable(tmp_path):
    workload = Axpy()
    case = workload.cases(workload.make_params())[0]
    ok, reason = exportable(workload, case)
    assert not ok and "no ONNX export recipe: workload 'axpy' does not define export_recipe()" in reason
    with pytest.raises(UsageError, match="axpy/small: no ONNX export recipe"):
        export_workload(workload, case, "fp32", tmp_path / "a.onnx")
    tilepack, tp_case = _case("tilepack", "default", {})
    with pytest.raises(UsageError, match="unknown dtype 'fp8'"):
        export_workload(tilepack, tp_case, "fp8", tmp_path / "b.onnx")


def test_fold_constant_ifs_inlines_the_branch_taken():
    then_graph = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [],
                                   [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    else_graph = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [],
                                   [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    cond = helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", TensorProto.BOOL, [], [False]))
    branch = helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_graph, else_branch=else_graph)
    graph = helper.make_graph([cond, branch], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    assert fold_constant_ifs(graph) == 1
    assert [n.op_type for n in graph.node] == ["Constant", "Abs", "Identity"]
    assert list(graph.node[-1].output) == ["y"]
