"""One cell's way from the queue to its result, on the slot that took it.

Whether it runs at all (a broken plugin, a failed ``configure`` or probe, a backend unavailable
here, a case it does not support: a result without running), then its builder's warm caches,
then the cell itself in the slot's worker process (or in this process for an inline run), the
result stamped with what its builder did. The runner hands ``CellPath.run`` to the slots
(``sharding.run_slots``); nothing here calls back into the runner.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence

import attrs

from apex_core.errors import describe_exception
from apex_core.interfaces import warms_caches
from apex_core.measure.cell import CellSpec, execute_cell
from apex_core.plan import Plan, PlannedCell
from apex_core.registry import Registry
from apex_core.results import CellResult, SkipKind, Status
from apex_core.running.prebuild import BuildAhead
from apex_core.running.probing import ERROR, TIMEOUT, UNAVAILABLE, Probes
from apex_core.running.sharding import Slot

log = logging.getLogger(__name__)

# Backend.supports is plugin code, called from every slot's thread: one call at a time.
_SUPPORTS_LOCK = threading.Lock()


def planned_result(cell: PlannedCell, status: Status, reason: str,
                    kind: SkipKind | None = None) -> CellResult:
    return CellResult(cell.case.workload, cell.case.name, cell.backend, cell.dtype, cell.device,
                      status, params=cell.case.params_dict(), reason=reason, skip_kind=kind)


def decide_without_running(cell: PlannedCell, registry: Registry, probes: Probes,
                           configure_failures: Mapping[str, str]) -> CellResult | None:
    """The result of a cell that will not run (broken plugin, failed probe, unavailable, unsupported)."""
    for group, name in (("workload", cell.case.workload), ("backend", cell.backend)):
        row = registry.broken_row(group, name)
        if row is not None:
            return planned_result(cell, Status.ERROR, f"{group} plugin {name!r} failed: {row.reason}")
    if cell.backend in configure_failures:
        return planned_result(cell, Status.ERROR, configure_failures[cell.backend])
    probe = probes.result(cell.backend, cell.device)
    if probe.status in (ERROR, TIMEOUT):  # a probe that raised, crashed or hung is a bug, not a skip
        return planned_result(cell, Status.ERROR if probe.status == ERROR else Status.TIMEOUT, probe.reason)
    if probe.status == UNAVAILABLE:
        return planned_result(cell, Status.SKIPPED, probe.reason, SkipKind.UNAVAILABLE)
    backend = registry.backends[cell.backend]
    workload = registry.workloads[cell.case.workload]
    try:
        with _SUPPORTS_LOCK:
            support = backend.supports(workload, cell.case, cell.dtype)
    except Exception as exc:
        return planned_result(cell, Status.ERROR, f"supports() raised {describe_exception(exc)}")
    if not support.ok:
        return planned_result(cell, Status.SKIPPED, support.reason, SkipKind.UNSUPPORTED)
    return None


def cell_spec(plan: Plan, cell: PlannedCell) -> CellSpec:
    """What a worker needs to run ``cell`` of ``plan``."""
    return CellSpec(cell.case.workload, cell.case.name, cell.backend, cell.dtype, cell.device,
                    cell.case.params_dict(), plan.seed, plan.timing, plan.options_for(cell.backend))


def warmable_cells(cells: Sequence[PlannedCell], registry: Registry, configure_failures: Mapping[str, str]
                   ) -> list[bool]:
    """For each cell, whether a builder can fill its caches ahead (its backend has the hook)."""
    return [cell.backend in registry.backends and cell.case.workload in registry.workloads
            and cell.backend not in configure_failures and warms_caches(registry.backends[cell.backend])
            for cell in cells]


@attrs.frozen
class CellPath:
    """What every slot of one run needs to take a cell to its result."""

    plan: Plan
    registry: Registry
    configure_failures: Mapping[str, str]
    ahead: BuildAhead

    def run(self, slot: Slot, cell: PlannedCell) -> CellResult:
        """Decide and, if it can run, run ``cell`` on ``slot``; raises WorkerStartError when no
        worker starts."""
        if slot.device is not None and slot.pool is not None:
            slot.pool.ensure_started()  # before probing: a GPU that fails here hands the cell on
        result = decide_without_running(cell, self.registry, slot.probes, self.configure_failures)
        if result is None:
            prebuild = self.ahead.claim(cell)  # waits for a builder still warming it
            spec = cell_spec(self.plan, cell)
            if slot.pool is not None:  # crashes and hangs become results
                result = slot.pool.run(spec, self.plan.timeout_s)
            else:
                started = time.perf_counter()
                result = execute_cell(self.registry.workloads[cell.case.workload],
                                      self.registry.backends[cell.backend], spec)
                log.debug("cell %s took %.2f s", cell.label, time.perf_counter() - started)
            if prebuild is not None:
                result = prebuild.stamp(result)
        else:
            self.ahead.claim(cell, wait=False)  # it will not run: no builder needs to warm it
        if result.log:
            log.error("cell %s: %s\n%s", cell.label, result.reason, result.log)
        return result
