"""``torch.compile`` of the workload's reference."""

from __future__ import annotations

import shutil
from functools import partial

import torch

from apex_core.interfaces import Backend, Inputs, Prepared, Workload
from apex_core.lazy_import import cuda_reason, try_import
from apex_core.results import Availability, Case


class TorchCompileBackend(Backend):
    """Inductor-compiled reference; compile time is recorded as build time."""

    name = "torch-compile"
    description = "torch.compile (inductor) of the workload's reference"

    def __init__(self, mode: str = "default") -> None:
        self.mode = mode

    def probe(self, device: str) -> Availability:
        if not hasattr(torch, "compile"):
            return Availability.no(f"torch {torch.__version__} has no torch.compile")
        if device == "cuda":
            reason = cuda_reason()
            if reason:
                return Availability.no(reason)
            _triton, reason = try_import("triton", "pip install triton")
            if reason:
                return Availability.no(f"inductor needs triton on CUDA: {reason}")
            return Availability.yes()
        if not any(shutil.which(cc) for cc in ("g++", "c++", "clang++")):
            return Availability.no("inductor on CPU needs a C++ compiler (g++ or clang++) on PATH")
        return Availability.yes()

    def prepare(self, workload: Workload, case: Case, inputs: Inputs) -> Prepared:
        # Compile per cell: dynamic=False keeps one specialised graph, as a user timing one
        # shape would; the first call (in the runner's build time) triggers compilation.
        # Reset dynamo first: every cell compiles the same reference function, and past
        # its recompile limit dynamo would silently fall back to eager.
        torch._dynamo.reset()
        compiled = torch.compile(partial(workload.reference, case), mode=self.mode, dynamic=False)

        def run() -> dict[str, torch.Tensor]:
            with torch.no_grad():
                return compiled(inputs)

        return Prepared(run, metadata={"mode": self.mode, "dynamic": False})
