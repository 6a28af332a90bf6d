"""A serialized TensorRT engine (``--trt-engine-path``), or one built from the workload's ONNX export.

Skip reasons, in the order they are checked: tensorrt not importable, no CUDA device,
engine file not found, deserialization failed (all from ``probe``); then per cell: no
engine given, a workload the engine does not serve, unsupported dtype, a dynamic
dimension with no shape given (from ``supports``). A ``--trt-build`` engine the
builder rejects is skipped from ``prepare`` with the builder's reason.

``engine`` workload cases (a serialized engine swept over shape cases, ``apex-bench
sweep``) bring their own file and need neither option.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from adapters.tensorrt_common import (
    FEEDABLE_DTYPES,
    EngineBuildError,
    EngineLoadError,
    TensorRTEngineModel,
    build_engine_from_onnx,
    cell_dtype_name,
    engine_model_from_bytes,
    feed_metas,
    feed_problem,
    load_engine_model,
    profile_around,
    tensorrt_reason,
)
from apex_core.backend_options import BackendOption
from apex_core.correctness import DTYPES
from apex_core.engine.onnx_export import export_workload, exportable_in
from apex_core.engine.serving import EngineBackend, prepare_engine
from apex_core.engine.tensor_spec import TensorSpec
from apex_core.engine.workload import EngineWorkload
from apex_core.errors import UsageError
from apex_core.interfaces import Backend, CellSkipped, Inputs, Prepared, Workload
from apex_core.results import Availability, Case, Support

DEFAULT_ENGINE_WORKLOAD = "ff-infer"
NO_ENGINE = ("no engine given: pass --trt-engine-path PATH (a serialized engine for the workload named "
             "with --workloads, default ff-infer) or --trt-build (build one from each workload's ONNX export)")


@attrs.frozen
class EngineOptions:
    """The backend's run options (``backend_options["tensorrt-engine"]``)."""

    engine_path: str | None = None
    build: bool = False
    engine_workload: str = DEFAULT_ENGINE_WORKLOAD

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> EngineOptions:
        unknown = sorted(set(options) - {f.name for f in attrs.fields(cls)})
        if unknown:
            raise UsageError(f"tensorrt-engine: unknown option {unknown[0]!r}; valid options: "
                             "build, engine_path, engine_workload")
        path, build = options.get("engine_path"), options.get("build", False)
        workload = options.get("engine_workload", DEFAULT_ENGINE_WORKLOAD)
        if not isinstance(path, str | None) or not isinstance(build, bool) or not isinstance(workload, str):
            raise UsageError("tensorrt-engine: engine_path and engine_workload are strings, build is a boolean")
        if path and build:
            raise UsageError("--trt-engine-path and --trt-build exclude each other: give a serialized "
                             "engine or build one from the ONNX export, not both")
        return cls(path or None, build, workload)


def engine_support_reason(workload: str, engine_inputs: tuple[TensorSpec, ...],
                          metas: Mapping[str, tuple[str, tuple[int, ...]]]) -> str:
    """Empty when a case's inputs ({name: (dtype, shape)}) can drive the engine, else why not.

    Dtypes are checked before shapes, so the reasons come in the documented order.
    """
    for spec in engine_inputs:
        if spec.dtype not in FEEDABLE_DTYPES:
            return f"unsupported dtype: engine input {spec.name!r} is {spec.dtype}, which cannot be fed"
        given = metas.get(spec.name)
        if given is not None and given[0] != spec.dtype:
            return (f"unsupported dtype: engine input {spec.name!r} is {spec.dtype}, this {workload} cell "
                    f"feeds {given[0]} (run --dtype {spec.dtype} or build the engine for {given[0]})")
    absent = [s for s in engine_inputs if s.name not in metas]
    if absent:
        listed = ", ".join(metas)
        if absent[0].is_dynamic:
            return (f"dynamic dimension with no shape given: engine input {absent[0].name!r} has open dims "
                    f"and {workload} has no input of that name (its inputs: {listed})")
        return f"engine input {absent[0].name!r} is not an input of {workload} (its inputs: {listed})"
    used = {s.name: metas[s.name] for s in engine_inputs}
    problem = feed_problem(engine_inputs, used)
    return f"{workload} does not fit the engine: {problem}" if problem else ""


class TensorRTEngineBackend(EngineBackend, Backend):
    """Runs a TensorRT engine on the workload's inputs, bound by name; timed like any CUDA backend."""

    name = "tensorrt-engine"
    description = "a TensorRT engine (serialized with --trt-engine-path, or built with --trt-build)"
    option_specs = (
        BackendOption("engine_path", "path", "a serialized engine to time (alias --trt-engine-path)"),
        BackendOption("engine_workload", "str", "the workload whose inputs it takes (default ff-infer)"),
        BackendOption("build", "bool", "build each cell's engine from the ONNX export (alias --trt-build)"),
    )
    aliases = ("trt",)
    engine_formats = frozenset({"tensorrt"})

    def __init__(self) -> None:
        self.options = EngineOptions()
        self._engine_inputs: dict[str, tuple[TensorSpec, ...]] = {}  # per path, from the probe
        self._models: dict[tuple[str, str], TensorRTEngineModel] = {}  # per (path, device), this process
        self._metas: dict[tuple[str, str], dict[str, tuple[str, tuple[int, ...]]]] = {}

    def configure(self, options: Mapping[str, Any]) -> None:
        self.options = EngineOptions.from_mapping(options)

    def probe(self, device: str) -> Availability:
        reason = tensorrt_reason(device)
        if reason:
            return Availability.no(reason)
        if self.options.engine_path:
            try:
                # the probing process keeps only the engine's I/O description, not the engine
                inputs = load_engine_model(self.options.engine_path, device).inputs
            except EngineLoadError as exc:
                return Availability.no(str(exc))
            self._engine_inputs[self.options.engine_path] = inputs
        return Availability.yes()

    def load_engine(self, path: str, device: str) -> TensorRTEngineModel:
        return load_engine_model(path, device)

    def supports(self, workload: Workload, case: Case, dtype_name: str) -> Support:
        if isinstance(workload, EngineWorkload):
            return self._file_support(workload, case, dtype_name)
        if self.options.build:
            if dtype_name not in ("fp16", "bf16", "fp32"):
                return Support.no(f"unsupported dtype: --trt-build builds fp16, bf16 or fp32, not {dtype_name}")
            # the workload's export recipe, which also knows the exports that fail in one dtype (bf16)
            ok, why = exportable_in(workload, case, dtype_name)
            return Support.yes() if ok else Support.no(f"no ONNX export to build from: {why}")
        if not self.options.engine_path:
            return Support.no(NO_ENGINE)
        if workload.name != self.options.engine_workload:
            return Support.no(f"the engine from --trt-engine-path serves {self.options.engine_workload} only "
                              "(name its workload with --workloads)")
        path = self.options.engine_path
        engine_inputs = self._engine_inputs.get(path) or self._model(path, "cuda").inputs
        key = (case.id, dtype_name)
        if key not in self._metas:
            # shapes and dtypes only: the same generator the cell uses, on the CPU
            self._metas[key] = feed_metas(workload.make_inputs(case, "cpu", DTYPES[dtype_name], 0))
        reason = engine_support_reason(workload.name, engine_inputs, self._metas[key])
        return Support.no(reason) if reason else Support.yes()

    def _file_support(self, workload: Workload, case: Case, dtype_name: str) -> Support:
        """A serialized engine of the engine workload: the case's inputs must fit it."""
        support = self.engine_support(case.params)
        if not support.ok:
            return support
        try:
            engine_inputs = self._model(case.params.engine, "cuda").inputs
        except EngineLoadError as exc:
            return Support.no(str(exc))
        metas = feed_metas(workload.make_inputs(case, "cpu", DTYPES.get(dtype_name, DTYPES["fp32"]), 0))
        reason = engine_support_reason(case.params.engine, engine_inputs, metas)
        return Support.no(reason) if reason else Support.yes()

    def _model(self, path: str, device: str) -> TensorRTEngineModel:
        key = (path, device)
        if key not in self._models:
            self._models[key] = load_engine_model(path, device)
        return self._models[key]

    def _loaded(self, path: str, device: str) -> TensorRTEngineModel:
        """The engine at ``path`` for a cell, which is skipped if the file does not load (the worker
        meets the file the probe saw)."""
        try:
            return self._model(path, device)
        except EngineLoadError as exc:
            raise CellSkipped(str(exc)) from None

    def prepare(self, workload: Workload, case: Case, inputs: Inputs) -> Prepared:
        device = str(next(iter(inputs.values())).device)
        if isinstance(workload, EngineWorkload):
            return prepare_engine(self._loaded(case.params.engine, device), case, inputs)
        if self.options.build:
            model, source = self._built_model(workload, case, inputs, device), "built from the ONNX export"
        else:
            source = self.options.engine_path or ""
            model = self._loaded(source, device)
        bound = model.bind({spec.name: inputs[spec.name] for spec in model.inputs})
        metadata = {"engine": source, "input_shapes": bound.input_shapes, "output_shapes": bound.output_shapes,
                    "profile": {s.name: [list(s.profile.min), list(s.profile.max)]
                                for s in model.inputs if s.profile is not None and s.is_dynamic}}
        return Prepared(bound.fn, outputs=bound.outputs, metadata=metadata)

    def _built_model(self, workload: Workload, case: Case, inputs: Inputs, device: str) -> TensorRTEngineModel:
        """Export the case to ONNX, build with a profile around its shapes, deserialize."""
        dtype_name = cell_dtype_name(inputs)
        with tempfile.TemporaryDirectory(prefix="apex-bench-trt-") as folder:
            onnx_path = Path(folder) / f"{workload.name}-{case.name}-{dtype_name}.onnx"
            exported = export_workload(workload, case, dtype_name, onnx_path, device="cpu")
            shapes = {name: profile_around(tuple(t.shape)) for name, t in inputs.items()}
            try:
                data = build_engine_from_onnx(exported.path, precision=dtype_name, profile_shapes=shapes)
            except EngineBuildError as exc:
                raise CellSkipped(f"engine build failed: {exc}") from None
        try:
            return engine_model_from_bytes(data, device, f"the {case.id} engine")
        except EngineLoadError as exc:
            raise CellSkipped(str(exc)) from None
