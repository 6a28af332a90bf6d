"""Programmatic dependent launch (Hopper and later): a kernel launched while the one before it ends.

A chain of small dependent kernels (ff-infer's 14 per call) loses time between them: each waits for
the one before to finish before the device even starts launching it. Launched with ``launch_pdl``,
the next kernel is launched early; ``await_previous`` at the top of its body then holds its programs
until the kernel before has finished and its writes are visible (``griddepcontrol.wait``), and lets
the one after it launch in turn. A kernel launched so must call ``await_previous(PDL)`` before any
load or store; ``dependent`` sets both, so that they never come apart.

An autotuner must not benchmark its configurations under dependent launch: its repeats of one
kernel then overlap their launches, and at ff-infer's large profile on an H200 that changed the
picks of three kernels and cost the call 2.7 % (docs/perf.md, 2026-11-28). ``chain`` therefore
issues its first call plainly, which is when each autotuner meets its key, and every later one
dependently; a key is the same either way, so the later calls find the configurations tuned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import torch
import triton
import triton.language as tl

from apex_kernels._utils import KernelLaunch, interpreting


@triton.jit
def await_previous(PDL: tl.constexpr):
    if PDL:
        tl.extra.cuda.gdc_wait()  # every write of the kernel before is visible from here on
        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may launch; its own wait holds it


def dependent_launches_run_on(device: torch.device) -> bool:
    """Whether kernels on ``device`` can launch dependently: CUDA at compute capability 9.0 or later,
    not Triton's interpreter."""
    return (device.type == "cuda" and not interpreting()
            and torch.cuda.get_device_capability(device)[0] >= 9)


def dependent(launch: KernelLaunch) -> KernelLaunch:
    """``launch`` started under programmatic dependent launch; its kernel takes ``PDL``."""
    return replace(launch, meta={**launch.meta, "PDL": 1, "launch_pdl": True})


Step = KernelLaunch | Callable[[], object]  # a Triton launch, or work on another library's kernels


def _issue(steps: Sequence[Step]) -> Callable[[], None]:
    bound = [(s.start, s.args, s.meta) if isinstance(s, KernelLaunch) else (s, (), {}) for s in steps]

    def run() -> None:
        for start, args, meta in bound:
            start(*args, **meta)

    return run


def chain(steps: Sequence[Step], pdl: bool) -> Callable[[], None]:
    """A call that issues ``steps`` in order; with ``pdl``, plainly the first time and with every
    Triton launch dependent from then on (the module doc says why)."""
    plain = _issue(steps)
    if not pdl:
        return plain
    later = _issue([dependent(s) if isinstance(s, KernelLaunch) else s for s in steps])
    first = iter([plain])

    def run() -> None:
        next(first, later)()

    return run
