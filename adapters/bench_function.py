"""``bench-function``: the computation a ``bench.yaml`` declares (its ``module`` and ``function``), run as is.

Provided (entry-point group ``apex_bench.backend_providers``) only while ``bench.yaml``
folders are configured, so runs without them carry no column of unsupported cells.
"""

from __future__ import annotations

import torch

from apex_core.config_file import current_config, discover_folders
from apex_core.discovery.workload import DiscoveredWorkload
from apex_core.interfaces import Backend, Inputs, Prepared, Workload
from apex_core.results import Availability, Case, Support


class BenchFunctionBackend(Backend):
    """Runs each discovered workload's own function; other workloads are unsupported."""

    name = "bench-function"
    description = "the function a bench.yaml names for its workload (apex-bench --discover DIR)"

    def probe(self, device: str) -> Availability:
        if device == "cuda" and not torch.cuda.is_available():
            return Availability.no("no CUDA device")
        return Availability.yes()

    def supports(self, workload: Workload, case: Case, dtype_name: str) -> Support:
        if not isinstance(workload, DiscoveredWorkload):
            return Support.no("runs only workloads declared by bench.yaml files (--discover)")
        return Support.yes()

    def prepare(self, workload: Workload, case: Case, inputs: Inputs) -> Prepared:
        assert isinstance(workload, DiscoveredWorkload)
        function = workload.resolve("function")
        return Prepared(lambda: workload.call(function, case, inputs),
                        metadata={"function": f"{workload.spec.module}:{workload.spec.function}",
                                  "bench_yaml": str(workload.spec.path)})


def bench_function_backend() -> dict[str, Backend]:
    """``{"bench-function": ...}`` while discover folders are configured (``--discover``, config); else {}."""
    path, config = current_config()
    return {BenchFunctionBackend.name: BenchFunctionBackend()} if discover_folders(config, path) else {}
