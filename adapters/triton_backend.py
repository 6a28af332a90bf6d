"""Runs the ``apex_kernels`` Triton kernels; on the CPU only under ``TRITON_INTERPRET=1``."""

from __future__ import annotations

import importlib
import os
import sys

from adapters.lazy_import import cuda_reason, try_import
from apex_core.interfaces import Backend, Inputs, Prepared, Workload
from apex_core.results import Availability, Case, Support

INTERPRETER_NOTE = "Triton interpreter on the CPU: correctness only, timings not comparable"


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def tune_with_held_timer() -> str:
    """Make every autotuner in ``apex_kernels`` time its configurations with the held timer.

    Triton's own ``do_bench`` brackets host launches in its events, so for kernels of a few
    microseconds its pick followed the host's jitter and changed between processes. The
    kernels' own defaults are left alone for users of ``apex_kernels`` without the harness.
    Returns the tuning method, for the cell's metadata.
    """
    from triton.runtime.autotuner import Autotuner

    from apex_core.cuda_timer import TUNING_METHOD, tuning_bench

    for name, module in list(sys.modules.items()):
        if name == "apex_kernels" or name.startswith("apex_kernels."):
            for value in vars(module).values():
                if isinstance(value, Autotuner):
                    value._do_bench = tuning_bench  # read by Triton's cached do_bench ...
                    vars(value)["do_bench"] = tuning_bench  # ... unless it was already read
    return TUNING_METHOD


class TritonBackend(Backend):
    """Our Triton kernels through their launch wrappers."""

    name = "triton"
    description = "apex_kernels Triton kernels (CUDA, or the interpreter with TRITON_INTERPRET=1)"

    def probe(self, device: str) -> Availability:
        _triton, reason = try_import("triton", "pip install triton; Linux only")
        if reason:
            return Availability.no(reason)
        if device == "cpu":
            if not interpreting():
                return Availability.no(
                    "triton on the CPU needs TRITON_INTERPRET=1 (interpreter: correctness only)")
            return Availability.yes()
        reason = cuda_reason()
        return Availability.no(reason) if reason else Availability.yes()

    def supports(self, workload: Workload, case: Case, dtype_name: str) -> Support:
        from apex_kernels import KERNELS

        if workload.name not in KERNELS:
            return Support.no(f"apex_kernels has no Triton kernel for {workload.name}")
        module = importlib.import_module(KERNELS[workload.name].partition(":")[0])
        reason = module.supports(case, dtype_name) if hasattr(module, "supports") else None
        return Support.no(reason) if reason else Support.yes()

    def prepare(self, workload: Workload, case: Case, inputs: Inputs) -> Prepared:
        from apex_kernels import KERNELS
        from apex_kernels.tuning import TRACKER

        module_path, _, factory_name = KERNELS[workload.name].partition(":")
        factory = getattr(importlib.import_module(module_path), factory_name)
        TRACKER.reset()
        tuning = None if interpreting() else tune_with_held_timer()
        fn, outputs, metadata = factory(case, inputs)

        def launches() -> dict:
            # Read after the cell's last call: the autotuner's real choice and every launch.
            return {"triton_autotune": TRACKER.snapshot()}

        if interpreting():
            return Prepared(fn, outputs, metadata, INTERPRETER_NOTE, "triton_interpreter",
                            report_metadata=launches)
        tune_with_held_timer()  # again: the factory may have imported more kernel modules
        metadata = {**metadata, "autotune_timer": tuning}
        return Prepared(fn, outputs, metadata, report_metadata=launches)
