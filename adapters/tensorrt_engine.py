"""A serialized TensorRT engine, or one built from the workload's ONNX export."""

from __future__ import annotations

from adapters.tensorrt_common import tensorrt_reason
from apex_core.interfaces import Backend, Inputs, Prepared, Workload
from apex_core.results import Availability, Case, Support


class TensorRTEngineBackend(Backend):
    """TensorRT engine runner; engine loading and building land with the engine-path work."""

    name = "tensorrt-engine"
    description = "a TensorRT engine (serialized, or built from the ONNX export)"

    def probe(self, device: str) -> Availability:
        reason = tensorrt_reason(device)
        return Availability.no(reason) if reason else Availability.yes()

    def supports(self, workload: Workload, case: Case, dtype_name: str) -> Support:
        return Support.no("the tensorrt-engine backend cannot load or build engines yet")

    def prepare(self, workload: Workload, case: Case, inputs: Inputs) -> Prepared:
        raise NotImplementedError("tensorrt-engine cannot load or build engines yet")
