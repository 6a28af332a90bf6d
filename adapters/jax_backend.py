"""The built-in workloads in ``jax.numpy`` under ``jax.jit``, sharing torch's tensors through DLPack.

The cell's torch inputs are imported into JAX once, at prepare, without a copy (the
arrays alias the tensors' memory, which the runner refreshes in place between checks),
so the timed call is the jitted function and nothing else. Outputs go back to torch
through DLPack, also without a copy, and only when the runner reads them (the check):
the timer never pays for the conversion. Tracing and XLA compilation happen in the
first call, which the runner counts as build time.

Timing: every call ends in ``block_until_ready``. On the CPU the sample is the host's
``perf_counter`` around the call, the method ``jax_block_until_ready``. On CUDA, JAX
launches on streams of its own, which events on the timing stream do not see: the cell
takes the kernel-only timer (the profiler's device activity per call, on every stream),
and the wait only makes sure each call's launches fall inside its profiler range.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch

from adapters.jax_setup import gpu_reason, load_jax
from apex_core.interfaces import Backend, Inputs, Prepared, Workload
from apex_core.lazy_import import cuda_reason
from apex_core.measure.kernel_timer import profiler_unavailable_reason
from apex_core.plugin_api import implementation
from apex_core.results import Availability, Case, Support

CPU_METHOD = "jax_block_until_ready"


class TorchView(Mapping[str, torch.Tensor]):
    """JAX outputs seen as torch tensors through DLPack, converted when first read (no copy)."""

    def __init__(self, arrays: Mapping[str, Any]) -> None:
        self.arrays = arrays
        self.tensors: dict[str, torch.Tensor] = {}

    def __getitem__(self, name: str) -> torch.Tensor:
        if name not in self.tensors:
            self.tensors[name] = torch.from_dlpack(self.arrays[name])
        return self.tensors[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.arrays)

    def __len__(self) -> int:
        return len(self.arrays)


def share_inputs(jax: Any, inputs: Inputs) -> dict[str, Any]:
    """The torch inputs as JAX arrays on the same memory; raises if DLPack had to copy one.

    A copy would not see the runner's in-place refreshes, so every check would compare
    the outputs of stale inputs: refuse rather than measure the wrong thing.
    """
    arrays = {}
    for name, tensor in inputs.items():
        array = jax.dlpack.from_dlpack(tensor.detach())
        if tensor.numel() and array.unsafe_buffer_pointer() != tensor.data_ptr():
            raise RuntimeError(f"DLPack copied input {name!r} ({tuple(tensor.shape)} {tensor.dtype}) instead "
                               "of sharing it; JAX would not see the runner's fresh inputs")
        arrays[name] = array
    return arrays


class JaxBackend(Backend):
    """``jax.jit`` of a ``jax.numpy`` port of each built-in workload (adapters/jax_workloads)."""

    name = "jax"
    description = "jax.numpy ports of the built-in workloads under jax.jit (XLA); inputs shared via DLPack"

    def probe(self, device: str) -> Availability:
        jax, reason = load_jax()
        if jax is not None and device == "cuda":
            reason = cuda_reason() or gpu_reason(jax) or _kernel_timer_reason()
        return Availability.no(reason) if reason else Availability.yes()

    def supports(self, workload: Workload, case: Case, dtype_name: str) -> Support:
        if "jax" not in workload.implementations:  # not imported here: its module imports jax
            return Support.no(f"{workload.name} brings no jax.numpy implementation "
                              "(its Workload.implementations has no 'jax')")
        return Support.yes()

    def prepare(self, workload: Workload, case: Case, inputs: Inputs) -> Prepared:
        jax, reason = load_jax()
        if jax is None:
            raise RuntimeError(reason)
        arrays = share_inputs(jax, inputs)
        build = implementation(workload, "jax")  # build(case) -> a pure function of the inputs
        jitted, block = jax.jit(build(case)), jax.block_until_ready

        def run() -> Any:  # a Mapping of torch tensors (TorchView), read like the dict it stands for
            return TorchView(block(jitted(arrays)))

        platforms = {d.platform for a in arrays.values() for d in a.devices()}
        metadata = {"jax": jax.__version__, "jit": True, "platform": ",".join(sorted(platforms))}
        if next(iter(inputs.values())).device.type == "cuda":
            return Prepared(run, metadata=metadata, timer="kernel",
                            timing_note="JAX launches on its own streams: kernel-only timer")
        return Prepared(run, metadata=metadata, timing_method=CPU_METHOD)


def _kernel_timer_reason() -> str:
    why = profiler_unavailable_reason()
    return f"jax on CUDA is timed by the kernel-only timer, which cannot run here: {why}" if why else ""
