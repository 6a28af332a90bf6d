"""The workload's own torch reference, run eagerly in the requested dtype and device."""

from __future__ import annotations

import torch

from apex_core.interfaces import Backend, Inputs, Prepared, Workload
from apex_core.results import Availability, Case


class TorchReferenceBackend(Backend):
    """Eager torch: the baseline every other backend is compared with."""

    name = "torch-reference"
    description = "the workload's torch reference, eager, in the requested dtype"
    reprepares = True  # prepare only binds the reference to the inputs

    def probe(self, device: str) -> Availability:
        if device == "cuda" and not torch.cuda.is_available():
            return Availability.no("no CUDA device")
        return Availability.yes()

    def prepare(self, workload: Workload, case: Case, inputs: Inputs) -> Prepared:
        def run() -> dict[str, torch.Tensor]:
            with torch.no_grad():
                return workload.reference(case, inputs)

        return Prepared(run, metadata={"mode": "eager"})
