"""Programmatic dependent launch (Hopper and later): a kernel launched while the one before it ends.

A chain of small dependent kernels (ff-infer's 14 per call) loses time between them: each waits for
the one before to finish before the device even starts launching it. Launched with ``launch_pdl``,
the next kernel is launched early; ``await_previous`` at the top of its body then holds its programs
until the kernel before has finished and its writes are visible (``griddepcontrol.wait``), and lets
the one after it launch in turn. A kernel launched so must call ``await_previous(PDL)`` before any
load or store; ``dependent`` sets both, so that they never come apart.

Dependent launch pays where a chain's kernels are microseconds long and the device's gap between
two of them is a large share of the call; where they are long it can cost (docs/perf.md,
2026-11-28: ff-infer on an H200 took 28-29 % less time at the fixed profile and 2.7-5.5 % more at
the large one). Whoever chains kernels decides where it turns on. An autotuner meets its key on a
call like any other, so it times its configurations as they will run.
"""

from __future__ import annotations

from dataclasses import replace

import torch
import triton
import triton.language as tl

from apex_kernels._utils import KernelLaunch, interpreting


@triton.jit
def await_previous(PDL: tl.constexpr):
    if PDL == 1:
        tl.extra.cuda.gdc_wait()  # every write of the kernel before is visible from here on
        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may launch; its own wait holds it
    if PDL == 2:  # a kernel that reads nothing the kernels before it write: it starts at once
        tl.extra.cuda.gdc_launch_dependents()


@triton.jit
def await_previous_at_end(PDL: tl.constexpr):
    """The last statement of a kernel that can start at once (``dependent(..., at_once=True)``).

    The kernel after it waits only for this one to end; ending after the kernel before it keeps
    everything the chain wrote before visible to that next kernel, as a wait at the top would."""
    if PDL == 2:
        tl.extra.cuda.gdc_wait()


def dependent_launches_run_on(device: torch.device) -> bool:
    """Whether kernels on ``device`` can launch dependently: CUDA at compute capability 9.0 or later,
    not Triton's interpreter."""
    return (device.type == "cuda" and not interpreting()
            and torch.cuda.get_device_capability(device)[0] >= 9)


def dependent(launch: KernelLaunch, at_once: bool = False) -> KernelLaunch:
    """``launch`` started under programmatic dependent launch; its kernel takes ``PDL``.

    ``at_once``: the kernel reads nothing the kernels before it in the chain write, so its
    programs start without waiting and run beside the kernel before it; they wait for it only
    before they end (its kernel must end in ``await_previous_at_end(PDL)``)."""
    return replace(launch, meta={**launch.meta, "PDL": 2 if at_once else 1, "launch_pdl": True})
