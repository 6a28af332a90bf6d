"""Run a plan: probe each backend once, skip what cannot run, execute the rest, record each cell."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from apex_core.cell import CellSpec, execute_cell
from apex_core.environment import capture_environment
from apex_core.errors import UsageError, describe_exception
from apex_core.plan import Plan, PlannedCell
from apex_core.probing import (
    DEFAULT_PROBE_TIMEOUT_S,
    ERROR,
    TIMEOUT,
    UNAVAILABLE,
    Probes,
    inline_prober,
)
from apex_core.registry import Registry
from apex_core.report.autotune import summarize_autotune
from apex_core.results import CellResult, Report, SkipKind, Status
from apex_core.workers import WorkerPool, pool_prober

log = logging.getLogger(__name__)

CellCallback = Callable[[int, int, PlannedCell, CellResult | None], None]


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def configure_backends(plan: Plan, registry: Registry) -> dict[str, str]:
    """Hand each planned backend its options in this process; returns {backend: why it failed}.

    A ``UsageError`` (a bad option value) propagates, so it stops the run before any
    cell; anything else a backend raises marks that backend's cells as errors.
    """
    failures: dict[str, str] = {}
    for name in plan.backends:
        backend = registry.backends.get(name)
        if backend is None:
            continue  # a broken plugin: its cells already become error rows
        try:
            backend.configure(plan.options_for(name))
        except UsageError:
            raise
        except Exception as exc:
            failures[name] = f"configure() raised {describe_exception(exc)}"
    return failures


def _planned_result(cell: PlannedCell, status: Status, reason: str,
                    kind: SkipKind | None = None) -> CellResult:
    return CellResult(cell.case.workload, cell.case.name, cell.backend, cell.dtype, cell.device,
                      status, params=cell.case.params_dict(), reason=reason, skip_kind=kind)


def decide_without_running(cell: PlannedCell, registry: Registry, probes: Probes,
                           configure_failures: dict[str, str]) -> CellResult | None:
    """The result of a cell that will not run (broken plugin, failed probe, unavailable, unsupported)."""
    for group, name in (("workload", cell.case.workload), ("backend", cell.backend)):
        row = registry.broken_row(group, name)
        if row is not None:
            return _planned_result(cell, Status.ERROR, f"{group} plugin {name!r} failed: {row.reason}")
    if cell.backend in configure_failures:
        return _planned_result(cell, Status.ERROR, configure_failures[cell.backend])
    probe = probes.result(cell.backend, cell.device)
    if probe.status in (ERROR, TIMEOUT):  # a probe that raised, crashed or hung is a bug, not a skip
        return _planned_result(cell, Status.ERROR if probe.status == ERROR else Status.TIMEOUT, probe.reason)
    if probe.status == UNAVAILABLE:
        return _planned_result(cell, Status.SKIPPED, probe.reason, SkipKind.UNAVAILABLE)
    backend = registry.backends[cell.backend]
    workload = registry.workloads[cell.case.workload]
    try:
        support = backend.supports(workload, cell.case, cell.dtype)
    except Exception as exc:
        return _planned_result(cell, Status.ERROR, f"supports() raised {describe_exception(exc)}")
    if not support.ok:
        return _planned_result(cell, Status.SKIPPED, support.reason, SkipKind.UNSUPPORTED)
    return None


def _spec(plan: Plan, cell: PlannedCell) -> CellSpec:
    return CellSpec(cell.case.workload, cell.case.name, cell.backend, cell.dtype, cell.device,
                    cell.case.params_dict(), plan.seed, plan.timing, plan.options_for(cell.backend))


def run_plan(
    plan: Plan,
    registry: Registry,
    *,
    isolation: str = "process",
    suite: str = "apex-bench",
    environment: dict[str, Any] | None = None,
    on_cell: CellCallback | None = None,
    probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
) -> Report:
    """Run every cell of ``plan`` and return the immutable report.

    ``isolation="process"`` runs cells in a replaceable worker process (crashes and
    hangs are recorded, the run goes on); ``"inline"`` runs them in this process,
    which is faster and works with registries of in-memory objects. Backends are
    probed where their cells run: in the worker, each under ``probe_timeout_s``, with
    process isolation; in this process inline.
    ``on_cell(index, total, cell, result)`` is called with ``result=None`` before a
    cell starts and with its result once it is done.
    """
    if isolation not in ("process", "inline"):
        raise ValueError(f"isolation must be 'process' or 'inline', got {isolation!r}")
    timestamp = utc_now()
    configure_failures = configure_backends(plan, registry)
    env = environment if environment is not None else capture_environment(plan.device)
    pool = WorkerPool(registry.in_memory_blob()) if isolation == "process" else None
    probes = Probes(registry.backends, pool_prober(pool, probe_timeout_s) if pool is not None
                    else inline_prober(registry.backends), plan.options_for)
    results: list[CellResult] = []
    status = "interrupted"
    try:
        for index, cell in enumerate(plan.cells):
            if on_cell:
                on_cell(index, len(plan.cells), cell, None)
            result = decide_without_running(cell, registry, probes, configure_failures)
            if result is None:
                result = _execute(plan, cell, registry, pool)
            if result.log:
                log.error("cell %s: %s\n%s", cell.label, result.reason, result.log)
            results.append(result)
            if on_cell:
                on_cell(index, len(plan.cells), cell, result)
        status = "complete"
    finally:
        if pool is not None:
            # an interrupted run may leave the worker in a hanging cell: kill it, do not wait
            pool.close(graceful=status == "complete")
    return Report(
        suite=suite,
        timestamp_utc=timestamp,
        environment=env,
        config=plan.config(),
        status=status,
        cells=tuple(results),
        plugins=registry.broken,
        triton_autotune=summarize_autotune(results),
    )


def _execute(plan: Plan, cell: PlannedCell, registry: Registry, pool: WorkerPool | None) -> CellResult:
    spec = _spec(plan, cell)
    if pool is not None:
        return pool.run(spec, plan.timeout_s)
    started = time.perf_counter()
    result = execute_cell(registry.workloads[cell.case.workload], registry.backends[cell.backend], spec)
    log.debug("cell %s took %.2f s", cell.label, time.perf_counter() - started)
    return result
