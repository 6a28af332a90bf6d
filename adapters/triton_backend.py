"""Runs the ``apex_kernels`` Triton kernels; on the CPU only under ``TRITON_INTERPRET=1``.

``triton_ops`` maps a case to a kernel function's arguments; the cell times the bound
launcher as is, with nothing tracked per call; ``triton_autotune`` reads what the
autotuners chose once, after the cell.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch

from adapters.triton_autotune import autotune_entries, cached_keys
from adapters.triton_picks import RETUNE, shipped_picks
from adapters.triton_warm import compile_launches
from apex_core.backend_options import BackendOption
from apex_core.errors import describe_exception
from apex_core.interfaces import Backend, Inputs, Prepared, Workload
from apex_core.lazy_import import cuda_reason, try_import
from apex_core.measure.tuning_timer import TUNING_METHOD, tuning_bench
from apex_core.plugin_api import implementation
from apex_core.results import Availability, Case, Support
from apex_kernels.tuned import autotuners, kernel_ids

INTERPRETER_NOTE = "Triton interpreter on the CPU: correctness only, timings not comparable"


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def tune_with_held_timer(tuners: Mapping[str, Any]) -> str:
    """Make every autotuner in ``apex_kernels`` time its configurations with the held timer.

    Triton's own ``do_bench`` brackets host launches in its events, so for kernels of a few
    microseconds its pick followed the host's jitter and changed between processes. The
    kernels' own defaults are left alone for users of ``apex_kernels`` without the harness.
    ``tuners`` are ``apex_kernels.tuned.autotuners()``. Returns the tuning method, for the
    cell's metadata.
    """
    for tuner in tuners.values():
        tuner._do_bench = tuning_bench  # read by Triton's cached do_bench ...
        vars(tuner)["do_bench"] = tuning_bench  # ... unless it was already read
    return TUNING_METHOD


class TritonBackend(Backend):
    """Our Triton kernels through their launch wrappers."""

    name = "triton"
    description = "apex_kernels Triton kernels (CUDA, or the interpreter with TRITON_INTERPRET=1)"
    # prepare binds the launch wrappers to the inputs; compiled kernels and the autotuners'
    # choices are the process's, so a second prepare compiles and tunes nothing
    reprepares = True
    option_specs = (
        BackendOption("retune", "bool", "tune every kernel and shape here instead of starting from the "
                                        "configurations shipped for this GPU model (alias --retune)"),
    )

    def __init__(self) -> None:
        self.retune = False

    def configure(self, options: Mapping[str, Any]) -> None:
        self.retune = bool(options.get("retune", False))

    def _seed_picks(self, inputs: Inputs, tuners: Mapping[str, Any]
                    ) -> tuple[Any, dict[int, str], dict[str, Any]]:
        """Seed ``tuners`` (``autotuners()``) from this GPU model's picks unless retuning; what the
        cell records.

        The picks only save time: whatever goes wrong here leaves the autotuners as they
        were (every shape tuned) and the cell's record says why, never failing the cell.
        """
        try:
            if self.retune:
                return None, kernel_ids(tuners), dict(RETUNE)
            device = next((t.device for t in inputs.values() if isinstance(t, torch.Tensor) and t.is_cuda),
                          None)
            return shipped_picks(torch.cuda.get_device_name(device)).seed(tuners)
        except Exception as exc:  # a broken picks path must cost time, not cells
            return None, {}, {"state": "none", "reason": f"picks not used: {describe_exception(exc)}"}

    def probe(self, device: str) -> Availability:
        _triton, reason = try_import("triton", "pip install 'apex-bench[triton]'; Linux only")
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
        op = implementation(workload, "triton")
        if op is None:
            return Support.no(f"{workload.name} brings no Triton implementation "
                              "(its Workload.implementations has no 'triton')")
        reason = op.supports(case, dtype_name)
        return Support.no(reason) if reason else Support.yes()

    def prepare(self, workload: Workload, case: Case, inputs: Inputs) -> Prepared:
        launcher = implementation(workload, "triton").bind(workload, case, inputs)
        # after binding: the kernel modules are imported, and no launch has run yet
        interpreted = interpreting()
        if not interpreted:
            tuners = autotuners()  # the kernel modules the binding imported, among them
            tuning = tune_with_held_timer(tuners)
            seeding, names, picks = self._seed_picks(inputs, tuners)
            metadata = {**launcher.metadata, "autotune_timer": tuning, "autotune_picks": picks}
        else:
            seeding, names, metadata = None, {}, launcher.metadata
        before = cached_keys(launcher.launches)  # seeded keys count as cached: this cell did not tune them

        def chosen() -> dict:
            # read once after the cell's last call: the autotuners' choices for its launches
            return {"triton_autotune": autotune_entries(launcher.launches, before, seeding, names)}

        note, method = (INTERPRETER_NOTE, "triton_interpreter") if interpreted else ("", None)
        return Prepared(launcher.run, launcher.outputs, metadata, note, method, report_metadata=chosen)

    def warm_caches(self, workload: Workload, case: Case, inputs: Inputs) -> str | None:
        """Compile every configuration of the cell's kernels into Triton's cache, launching none."""
        if interpreting():
            return "the Triton interpreter compiles nothing"

        # binding allocates the outputs (and may fill a buffer); it launches none of the cell's kernels
        launcher = implementation(workload, "triton").bind(workload, case, inputs)

        self._seed_picks(inputs, autotuners())  # a shipped pick is the only configuration its launch compiles
        compiled, failed = compile_launches(launcher.launches)
        if not compiled:
            return f"none of its {failed} Triton configurations compiled ahead" if failed \
                else "no Triton launch to compile"
        return None
