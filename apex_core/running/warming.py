"""A builder process's one job: fill the compile caches of one cell, without running it.

The request names a cell as a measuring worker gets it (``CellSpec``); the builder
configures and probes the backend, makes the cell's inputs on its device and calls
``Backend.warm_caches``. Nothing here raises: every outcome is a ``WarmResult``, and
none of them can change the cell's own result (the measuring worker builds what the
builder did not). docs/scale.md, "What is and is not overlapped".
"""

from __future__ import annotations

import time
from typing import Any

import attrs
import torch

from apex_core.errors import describe_exception
from apex_core.interfaces import CellSkipped
from apex_core.measure.cell import CellSpec, cell_torch_dtype
from apex_core.results import Case
from apex_core.running.probing import OK, probe_here

# What happened to one cell's warming (the cell's metadata.prebuild.state).
WARMED = "warmed"  # the hook filled the caches
SKIPPED = "skipped"  # the hook, the probe or the backend's supports() said why not
FAILED = "failed"  # the hook (or making the inputs) raised
TIMEOUT = "timeout"  # the builder ran past the cell's timeout and was killed
CRASHED = "crashed"  # the builder process died
NOT_STARTED = "not_started"  # the measuring worker took the cell before any builder did


@attrs.frozen
class WarmRequest:
    """Warm the caches of the cell ``spec`` describes (sent to a builder process)."""

    spec: CellSpec


@attrs.frozen
class WarmResult:
    """How one cell's warming went: its state, the builder's seconds on it, and why (one line)."""

    state: str
    seconds: float = 0.0
    reason: str = ""


def warm_here(registry: Any, spec: CellSpec, probes: dict[tuple[str, str], Any]) -> WarmResult:
    """Warm one cell's caches in this process; ``probes`` remembers each backend's probe here."""
    started = time.perf_counter()
    try:
        result = _warm(registry, spec, probes)
    except Exception as exc:
        result = WarmResult(FAILED, reason=describe_exception(exc))
    finally:
        if spec.device.startswith("cuda") and torch.cuda.is_initialized():
            torch.cuda.empty_cache()  # the builder's cached blocks back: the cell being timed shares the GPU
    return attrs.evolve(result, seconds=time.perf_counter() - started)


def _warm(registry: Any, spec: CellSpec, probes: dict[tuple[str, str], Any]) -> WarmResult:
    backend = registry.backends.get(spec.backend)
    workload = registry.workloads.get(spec.workload)
    if backend is None or workload is None:
        return WarmResult(SKIPPED, reason="the plugin did not load in the builder")
    key = (spec.backend, spec.device)
    if key not in probes:
        probes[key] = probe_here(backend, spec.device, spec.backend_options)
    if probes[key].status != OK:  # unavailable here, or a probe that failed: the worker reports it
        return WarmResult(SKIPPED, reason=f"probe {probes[key].status}: {probes[key].reason}")
    case = Case(spec.workload, spec.case, workload.params_type(**spec.params))
    support = backend.supports(workload, case, spec.dtype)
    if not support.ok:
        return WarmResult(SKIPPED, reason=support.reason)
    try:
        inputs = workload.make_inputs(case, spec.device, cell_torch_dtype(spec.dtype), spec.seed)
    except CellSkipped as skip:
        return WarmResult(SKIPPED, reason=skip.reason)
    why_not = backend.warm_caches(workload, case, inputs)
    return WarmResult(WARMED) if why_not is None else WarmResult(SKIPPED, reason=str(why_not))
