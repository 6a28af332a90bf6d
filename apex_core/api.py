"""The library entry point: run a selection and get the immutable ``Report`` back.

No CLI, no files: everything the command line does is reachable from here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import torch

from apex_core.errors import UsageError
from apex_core.measure.clock_lock import ClockVerdict, clock_request, locked_clocks
from apex_core.plan import build_plan
from apex_core.registry import Registry
from apex_core.results import Report
from apex_core.running.probing import DEFAULT_PROBE_TIMEOUT_S
from apex_core.running.runner import run_plan
from apex_core.running.sharding import CellCallback
from apex_core.timing import TimingOptions


def default_device() -> str:
    """``cuda`` when a CUDA device is usable, else ``cpu``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def default_dtypes(device: str) -> tuple[str, ...]:
    """fp16 on CUDA, fp32 on the CPU (where half precision is slow and rarely the target)."""
    return ("fp16",) if device == "cuda" else ("fp32",)


def check_device(device: str) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is available here (use --device cpu)")


def run(
    workloads: Sequence[str] | None = None,
    backends: Sequence[str] | None = None,
    *,
    device: str | None = None,
    dtypes: Sequence[str] | None = None,
    profile: str = "fixed",
    overrides: Sequence[str] | dict[str, Any] = (),
    seed: int = 0,
    timing: TimingOptions | None = None,
    timeout_s: float = 600.0,
    isolation: str = "process",
    registry: Registry | None = None,
    on_cell: CellCallback | None = None,
    backend_options: Mapping[str, Mapping[str, Any]] | None = None,
    probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
    build_workers: int = 0,
    lock_clocks: str | int | None = None,
) -> Report:
    """Run workloads x cases x backends x dtypes on one device and return the report.

    Names accept aliases (``trt``, ``all``) and ``workload:case`` selectors; ``None``
    selects everything registered. ``overrides`` are ``key=value`` strings or a
    typed dict. ``backend_options`` maps a backend name to its options (plain data,
    e.g. ``{"tensorrt-engine": {"engine_path": "ff.engine"}}``); each selected backend
    gets its own through ``Backend.configure`` wherever it is probed or run, and the
    report's config records them. With process isolation each backend is probed in
    the worker under ``probe_timeout_s``. ``build_workers`` builder processes warm the
    compile caches of upcoming cells while others are timed (docs/scale.md; process
    isolation only). ``lock_clocks`` (``"base"``, ``"max"`` or MHz) locks the CUDA device's
    clocks for the run and resets them after (docs/timing.md, "Locked clocks"); the report's
    ``environment["clock_lock"]`` says whether they were locked, and why not. Raises
    ``UsageError`` for bad selections before any cell runs.
    """
    registry = registry or Registry.discover()
    device = device or default_device()
    check_device(device)
    plan = build_plan(
        registry,
        workloads=workloads,
        backends=backends,
        device=device,
        dtypes=tuple(dtypes or default_dtypes(device)),
        profile=profile,
        overrides=overrides,
        seed=seed,
        timing=timing,
        timeout_s=timeout_s,
        backend_options=backend_options,
    )
    if build_workers:  # the report's config says how many builders ran
        plan = attrs.evolve(plan, extra_config={**plan.extra_config, "build_workers": build_workers})
    with _clock_lock(lock_clocks, device) as clocks:
        report = run_plan(plan, registry, isolation=isolation, on_cell=on_cell, probe_timeout_s=probe_timeout_s,
                          build_workers=build_workers)
    return report if clocks is None else attrs.evolve(
        report, environment={**report.environment, "clock_lock": clocks.record()})


def _clock_lock(request: str | int | None,
                device: str) -> contextlib.AbstractContextManager[ClockVerdict | None]:
    """``run``'s lock_clocks checked (a UsageError before any cell) and held, or nothing."""
    if request is None:
        return contextlib.nullcontext()
    if device != "cuda":
        raise UsageError(f"lock_clocks locks GPU clocks: it needs device='cuda' (got {device!r})")
    try:
        request = clock_request(request)
    except ValueError as exc:
        raise UsageError(f"lock_clocks: {exc}") from None
    return locked_clocks(request)
