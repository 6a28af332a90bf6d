"""The workload's ONNX export, run under ONNX Runtime (CPU, or the CUDA execution provider)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from apex_core.engine.onnx_export import export_workload, exportable_in
from apex_core.engine.ort_runtime import UnsupportedModelError, dtype_name_of, load_onnx_model
from apex_core.engine.serving import EngineBackend, prepare_engine
from apex_core.engine.workload import EngineWorkload
from apex_core.interfaces import Backend, CellSkipped, Inputs, Prepared, Workload
from apex_core.lazy_import import cuda_reason, try_import
from apex_core.results import Availability, Case, Support

_ORT_HINT = "pip install onnxruntime, or onnxruntime-gpu for CUDA"


class OnnxRuntimeBackend(EngineBackend, Backend):
    """Exports each case with ``apex_core.engine.onnx_export`` and runs it in an ORT session.

    The export is traced per cell into a temporary folder and loaded from there; the session
    keeps the model in memory, so nothing is left on disk. Export and session creation
    count as build time. ``engine`` workload cases (an ONNX file swept over shape cases)
    load their own file instead.
    """

    name = "onnxruntime"
    description = "the workload's ONNX export (torch.onnx), or an ONNX file, under ONNX Runtime"
    engine_formats = frozenset({"onnx"})

    def load_engine(self, path: str, device: str) -> Any:
        return load_onnx_model(path, device=device)

    def probe(self, device: str) -> Availability:
        ort, reason = try_import("onnxruntime", _ORT_HINT)
        if ort is None:
            return Availability.no(reason)
        _onnx, reason = try_import("onnx", "pip install onnx; the export needs it")
        if reason:
            return Availability.no(reason)
        if device == "cuda":
            reason = cuda_reason()
            if reason:
                return Availability.no(reason)
            providers = list(ort.get_available_providers())
            if "CUDAExecutionProvider" not in providers:
                return Availability.no(
                    f"onnxruntime {ort.__version__} has no CUDAExecutionProvider (available: "
                    f"{', '.join(providers)}; install onnxruntime-gpu)"
                )
        return Availability.yes()

    def supports(self, workload: Workload, case: Case, dtype_name: str) -> Support:
        """Unsupported when the case has no ONNX export in ``dtype_name``.

        Whether the provider has a kernel for every operator in the dtype depends on the
        device, which only ``prepare`` knows: there a missing kernel skips the cell.
        """
        if isinstance(workload, EngineWorkload):
            return self.engine_support(case.params)
        ok, reason = exportable_in(workload, case, dtype_name)
        return Support.yes() if ok else Support.no(reason)

    def prepare(self, workload: Workload, case: Case, inputs: Inputs) -> Prepared:
        device = str(next(iter(inputs.values())).device)
        if isinstance(workload, EngineWorkload):  # an ONNX file of the engine workload
            try:
                model = self.load_engine(case.params.engine, device)
            except UnsupportedModelError as exc:
                raise CellSkipped(str(exc)) from None
            return prepare_engine(model, case, inputs, providers=list(model.providers))
        dtype_name = _cell_dtype(inputs)
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="apex-bench-onnx-") as scratch:
            path = Path(scratch) / f"{workload.name}-{case.name}-{dtype_name}.onnx"
            # trace on the CPU: the graph does not depend on the device it was traced on
            exported = export_workload(workload, case, dtype_name, path, device="cpu")
            export_s = time.perf_counter() - started
            try:
                model = load_onnx_model(path, device=device)
            except UnsupportedModelError as exc:
                raise CellSkipped(str(exc)) from None
        bound = model.bind(inputs)
        return Prepared(
            bound.fn,
            outputs=bound.outputs,
            metadata={
                "providers": list(model.providers),
                "opset": exported.opset,
                "onnx_sha256": exported.sha256,
                "dynamic_axes": {name: {str(a): n for a, n in axes.items()}
                                 for name, axes in exported.dynamic_axes.items()},
                "export_s": round(export_s, 3),
            },
        )


def _cell_dtype(inputs: Inputs) -> str:
    """The cell's dtype: data inputs take it, while index inputs and parameters that are
    float32 in every cell (scan parameters, scalars, utilities) keep theirs."""
    floating = {dtype_name_of(t.dtype) for t in inputs.values() if t.is_floating_point()}
    others = sorted(floating - {"fp32"})
    return others[0] if others else "fp32"
