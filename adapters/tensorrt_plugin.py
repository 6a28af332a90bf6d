"""A one-layer TensorRT network around an ``apexx`` plugin from a user-supplied library."""

from __future__ import annotations

import os

from adapters.tensorrt_common import tensorrt_reason
from apex_core.interfaces import Backend, Inputs, Prepared, Workload
from apex_core.results import Availability, Case, Support

PLUGIN_LIB_ENV = "APEXX_TRT_PLUGIN_LIB"


class TensorRTPluginBackend(Backend):
    """TensorRT plugin runner; the network building lands with the engine-path work."""

    name = "tensorrt-plugin"
    description = "TensorRT plugin layers (namespace apexx) from APEXX_TRT_PLUGIN_LIB"

    def probe(self, device: str) -> Availability:
        reason = tensorrt_reason(device)
        if reason:
            return Availability.no(reason)
        if not os.environ.get(PLUGIN_LIB_ENV):
            return Availability.no(f"{PLUGIN_LIB_ENV} not set (path of the apexx plugin library)")
        return Availability.yes()

    def supports(self, workload: Workload, case: Case, dtype_name: str) -> Support:
        return Support.no("the tensorrt-plugin backend cannot build plugin networks yet")

    def prepare(self, workload: Workload, case: Case, inputs: Inputs) -> Prepared:
        raise NotImplementedError("tensorrt-plugin cannot build plugin networks yet")
