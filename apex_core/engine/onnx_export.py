"""Export a workload case's torch reference to an ONNX file, with its dynamic axes.

The exporter is the legacy TorchScript tracer (``torch.onnx.export(..., dynamo=False)``):
the dynamo exporter needs onnxscript, which apex-bench does not depend on, and tracing
the reference as it is keeps the export the same function the suite checks against.
Tracing unrolls the references' Python loops (the scan's doubling passes, blend over K),
so those lengths are fixed in the file; every other axis a user would sweep is declared
dynamic only where the traced graph stays correct at other sizes (tests check each one
against the reference at a second size). The graph's input and output names are the
workload's own input and output keys, in the same order, so feeds come straight from
``workload.make_inputs`` and results compare with ``workload.reference``.

What varies and what does not belongs to the workload: ``Workload.export_recipe`` gives the
dynamic axes, the note and the cases or dtypes that do not export, for built-in and
third-party workloads alike.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import torch

from apex_core.correctness import DTYPES
from apex_core.engine.ort_runtime import ELEMENT_TYPES, dtype_name_of
from apex_core.engine.tensor_spec import DYNAMIC, TensorSpec
from apex_core.errors import ApexBenchError, UsageError, first_line
from apex_core.interfaces import ExportRecipe, Workload
from apex_core.results import Case

# Opset 18: ScatterElements with reduction "max" (tileunpack's priority scatter) needs it;
# ONNX Runtime and TensorRT 10 both import it.
OPSET = 18
EXPORT_SEED = 0

DynamicAxes = dict[str, dict[int, str]]


class ExportError(ApexBenchError):
    """A workload case could not be exported or the exported file failed the ONNX checker."""


@attrs.frozen
class ExportedModel:
    """One exported workload case: the file, its interface and how it was made."""

    path: Path
    workload: str
    case: str
    dtype: str
    params: dict[str, Any]
    input_names: tuple[str, ...]
    input_shapes: tuple[tuple[int, ...], ...]  # the shapes traced (make_inputs at the case)
    input_dtypes: tuple[str, ...]
    output_names: tuple[str, ...]
    output_shapes: tuple[tuple[int, ...], ...]
    output_dtypes: tuple[str, ...]
    dynamic_axes: DynamicAxes  # input name -> {axis: symbolic name}; absent: all fixed
    unused_inputs: tuple[str, ...]  # inputs this case never reads (kept in the graph by name)
    sha256: str
    opset: int
    note: str = ""  # what stays fixed in this export and why

    @property
    def input_specs(self) -> tuple[TensorSpec, ...]:
        """The inputs as TensorSpec values, ``DYNAMIC`` on the dynamic axes."""
        return tuple(
            _spec(name, True, dtype, shape, self.dynamic_axes.get(name, {}))
            for name, shape, dtype in zip(self.input_names, self.input_shapes, self.input_dtypes, strict=True)
        )


def _spec(name: str, is_input: bool, dtype: str, shape: tuple[int, ...], axes: dict[int, str]) -> TensorSpec:
    dims = tuple(DYNAMIC if i in axes else d for i, d in enumerate(shape))
    return TensorSpec(name, is_input, dtype, dims, tuple(axes.get(i) for i in range(len(shape))))


# --- the workload's recipe ---------------------------------------------------------------


def recipe_of(workload: Workload, case: Case, dtype_name: str) -> tuple[ExportRecipe | None, str]:
    """The workload's export recipe for the case and dtype, or (None, why there is none)."""
    try:
        recipe = workload.export_recipe(case, dtype_name)
    except Exception as exc:
        return None, f"{workload.name}.export_recipe() raised {type(exc).__name__}: {first_line(exc)}"
    if recipe is None:
        return None, (f"no ONNX export recipe: workload {workload.name!r} does not define "
                      "export_recipe() (docs/onnx.md)")
    if recipe.unsupported:
        return None, recipe.unsupported
    return recipe, ""


def exportable_in(workload: Workload, case: Case, dtype_name: str = "fp32") -> tuple[bool, str]:
    """Whether the workload exports this case in ``dtype_name`` (some fail in bf16), and if not, why."""
    recipe, reason = recipe_of(workload, case, dtype_name)
    return recipe is not None, reason


exportable = exportable_in  # ``exportable(workload, case)``: in fp32


# --- export -----------------------------------------------------------------------------


def export_workload(
    workload: Workload, case: Case, dtype_name: str, path: str | os.PathLike[str], *, device: str = "cpu"
) -> ExportedModel:
    """Trace ``workload.reference`` at ``case`` in ``dtype_name`` and write a checked ONNX file."""
    if dtype_name not in DTYPES:
        raise UsageError(f"unknown dtype {dtype_name!r}; valid dtypes: {', '.join(DTYPES)}")
    recipe, reason = recipe_of(workload, case, dtype_name)
    if recipe is None:
        raise UsageError(f"{case.id}: {reason}")
    inputs = workload.make_inputs(case, device, DTYPES[dtype_name], EXPORT_SEED)
    with torch.no_grad():
        outputs = workload.reference(case, inputs)
    axes: DynamicAxes = {name: dict(dims) for name, dims in recipe.dynamic_axes.items()}
    target = Path(path)
    with tempfile.TemporaryDirectory() as scratch:
        raw = Path(scratch) / "raw.onnx"
        _trace(workload, case, inputs, list(outputs), raw, axes)
        unused = _finish(raw, target, case, inputs, axes)
    return ExportedModel(
        path=target,
        workload=workload.name,
        case=case.name,
        dtype=dtype_name,
        params=case.params_dict(),
        input_names=tuple(inputs),
        input_shapes=tuple(tuple(t.shape) for t in inputs.values()),
        input_dtypes=tuple(dtype_name_of(t.dtype) for t in inputs.values()),
        output_names=tuple(outputs),
        output_shapes=tuple(tuple(t.shape) for t in outputs.values()),
        output_dtypes=tuple(dtype_name_of(t.dtype) for t in outputs.values()),
        dynamic_axes={name: dict(a) for name, a in axes.items()},
        unused_inputs=tuple(unused),
        sha256=hashlib.sha256(target.read_bytes()).hexdigest(),
        opset=OPSET,
        note=recipe.note,
    )


def _trace(workload: Workload, case: Case, inputs: dict[str, torch.Tensor], output_names: list[str],
           raw: Path, axes: DynamicAxes) -> None:
    names = list(inputs)

    class ReferenceModule(torch.nn.Module):  # the reference, with positional inputs and a tuple of outputs
        def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return tuple(workload.reference(case, dict(zip(names, args, strict=True))).values())

    with warnings.catch_warnings(), torch.no_grad(), _native_stdout_discarded():
        # the legacy exporter warns that it is deprecated and about traced Python values
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(ReferenceModule(), tuple(inputs.values()), str(raw), input_names=list(inputs),
                              output_names=output_names, dynamic_axes=axes, opset_version=OPSET,
                              do_constant_folding=True, dynamo=False)
        except Exception as exc:
            raise ExportError(f"{case.id}: torch.onnx.export failed: {type(exc).__name__}: "
                              f"{first_line(exc)}") from exc


@contextlib.contextmanager
def _native_stdout_discarded() -> Iterator[None]:
    """Discard what native code writes to fd 1: on a failed export torch's C++ side dumps
    the whole TorchScript graph there, burying the one-line error."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _finish(
    raw: Path, target: Path, case: Case, inputs: dict[str, torch.Tensor], axes: DynamicAxes
) -> list[str]:
    """Clean the traced graph, put back unused inputs, check it, write it to ``target``.

    Returns the inputs the trace dropped because the case never reads them.
    """
    import onnx

    model = onnx.load(str(raw))
    fold_constant_ifs(model.graph)
    traced = {value.name for value in model.graph.input}
    specs = {name: (dtype_name_of(t.dtype), tuple(t.shape)) for name, t in inputs.items()}
    restore_unused_inputs(model.graph, specs, axes)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:
        raise ExportError(f"{case.id}: the exported graph fails the ONNX checker: {first_line(exc)}") from exc
    target.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(target))
    return [name for name in inputs if name not in traced]


# --- graph clean-up ---------------------------------------------------------------------


def fold_constant_ifs(graph: Any) -> int:
    """Replace each ``If`` whose condition is a constant by the branch it always takes.

    The legacy exporter wraps ``scatter_reduce`` in ``If(rank == 0)`` blocks whose
    then-branch squeezes; after constant folding the condition is a constant False, but
    ONNX shape inference still merges the squeezed branch and fails the graph. Returns
    how many were folded.
    """
    import onnx
    from onnx import helper, numpy_helper

    constants: dict[str, Any] = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    kept: list[onnx.NodeProto] = []
    folded = 0
    for node in graph.node:
        if node.op_type != "If" or node.input[0] not in constants:
            kept.append(node)
            continue
        branch_name = "then_branch" if bool(constants[node.input[0]]) else "else_branch"
        branch = next(a.g for a in node.attribute if a.name == branch_name)
        fold_constant_ifs(branch)
        kept.extend(branch.node)
        for index, (inner, outer) in enumerate(zip(branch.output, node.output, strict=True)):
            kept.append(helper.make_node("Identity", [inner.name], [outer], name=f"{node.name}_taken_{index}"))
        folded += 1
    del graph.node[:]
    graph.node.extend(kept)
    return folded


def restore_unused_inputs(
    graph: Any, inputs: dict[str, tuple[str, tuple[int, ...]]], axes: DynamicAxes
) -> None:
    """Give the graph every input of ``inputs`` (name -> dtype, shape), in that order.

    The exporter drops inputs a case never reads (the scan's gate unless merge is gated);
    keeping them by name lets feeds come from ``make_inputs`` unchanged.
    """
    from onnx import helper

    present = {value.name: value for value in graph.input}
    ordered = []
    for name, (dtype, shape) in inputs.items():
        if name in present:
            ordered.append(present[name])
            continue
        dims = [axes.get(name, {}).get(i, d) for i, d in enumerate(shape)]
        ordered.append(helper.make_tensor_value_info(name, ELEMENT_TYPES[dtype], dims))
    del graph.input[:]
    graph.input.extend(ordered)
