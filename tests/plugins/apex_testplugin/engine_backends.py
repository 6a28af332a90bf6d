"""A third-party backend that serves engine workloads (ONNX files swept over shape cases) and misbehaves.

It runs the file under ONNX Runtime like the built-in ``onnxruntime`` backend, except for
cases whose shape-case label says otherwise: ``crash...`` kills the worker with a
segmentation fault on the first call, ``hang...`` never returns from it. The sweep's tests
use it to show that such a case is recorded as ``crashed`` or ``timeout`` and the next case
still runs.
"""

from __future__ import annotations

import ctypes
import time

from apex_core.engine.serving import EngineBackend, prepare_engine
from apex_core.engine.workload import EngineWorkload
from apex_core.interfaces import Backend, Prepared
from apex_core.lazy_import import try_import
from apex_core.results import Availability, Support


class FaultyEngineBackend(EngineBackend, Backend):
    """ONNX files under ONNX Runtime; cases labelled ``crash...`` segfault, ``hang...`` hang."""

    name = "test-engine-faults"
    description = "third-party engine-file backend whose crash/hang cases misbehave"
    devices = frozenset({"cpu"})
    engine_formats = frozenset({"onnx"})

    def probe(self, device):
        _ort, reason = try_import("onnxruntime", "pip install onnxruntime")
        return Availability.no(reason) if reason else Availability.yes()

    def load_engine(self, path, device):
        from apex_core.engine.ort_runtime import load_onnx_model

        return load_onnx_model(path, device=device)

    def supports(self, workload, case, dtype_name):
        if not isinstance(workload, EngineWorkload):
            return Support.no("test-engine-faults runs engine files only")
        return self.engine_support(case.params)

    def prepare(self, workload, case, inputs):
        prepared = prepare_engine(self.load_engine(case.params.engine, "cpu"), case, inputs)
        if case.name.startswith("crash"):
            def crash():
                ctypes.string_at(0)  # reads address 0: SIGSEGV
                raise AssertionError("unreachable")

            return Prepared(crash, metadata=prepared.metadata, work=prepared.work)
        if case.name.startswith("hang"):
            def hang():
                while True:
                    time.sleep(1)

            return Prepared(hang, metadata=prepared.metadata, work=prepared.work)
        return prepared
