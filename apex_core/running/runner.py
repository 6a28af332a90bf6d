"""Run a plan: configure the backends, start the slots (one worker per card) and their builders,
hand every slot each cell's way to its result (``cell_path.CellPath``), and assemble the report."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

from apex_core.backend_options import configure
from apex_core.errors import UsageError
from apex_core.measure.doctor import BackgroundFacts
from apex_core.measure.environment import capture_environment
from apex_core.plan import Plan
from apex_core.registry import Registry
from apex_core.results import DeviceInfo, Report, Status
from apex_core.running.autotune import summarize_autotune
from apex_core.running.cell_path import CellPath, cell_spec, planned_result, warmable_cells
from apex_core.running.devices import pinning_env
from apex_core.running.env_vars import overlaid_environ
from apex_core.running.prebuild import BuildAhead
from apex_core.running.probing import DEFAULT_PROBE_TIMEOUT_S, Probes, inline_prober
from apex_core.running.sharding import CellBook, CellCallback, Slot, retired_reason, run_slots
from apex_core.running.workers import WorkerPool, WorkerStartError, pool_prober

log = logging.getLogger(__name__)


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def configure_backends(plan: Plan, registry: Registry) -> dict[str, str]:
    """Hand each planned backend its options in this process; returns {backend: why it failed}.

    A ``UsageError`` (a bad option value) propagates, so it stops the run before any cell;
    anything else a backend raises marks that backend's cells as errors.
    """
    failures = {name: configure(registry.backends[name], plan.options_for(name))[0]
                for name in plan.backends if name in registry.backends}  # a broken plugin: error rows
    return {name: reason for name, reason in failures.items() if reason}


def run_plan(
    plan: Plan,
    registry: Registry,
    *,
    isolation: str = "process",
    suite: str = "apex-bench",
    environment: dict[str, Any] | None = None,
    on_cell: CellCallback | None = None,
    probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
    devices: Sequence[DeviceInfo] | None = None,
    worker_env: Mapping[str, str] | None = None,
    executor: Any = None,
    build_workers: int = 0,
    measure_device_facts: bool = False,
) -> Report:
    """Run every cell of ``plan`` and return the immutable report.

    ``isolation="process"`` runs cells in a replaceable worker process (crashes and
    hangs are recorded, the run goes on); ``"inline"`` runs them in this process,
    which is faster and works with registries of in-memory objects. Backends are
    probed where their cells run: in the worker, each under ``probe_timeout_s``, with
    process isolation; in this process inline.
    ``devices`` shards the cells over one worker per card (``apex_core.running.sharding``);
    ``worker_env`` is set in every worker before it starts (the compile caches);
    ``executor`` (``apex_core.running.ray_executor.RayExecutor``) runs the cells
    elsewhere instead. ``build_workers`` builder processes warm the compile caches of
    upcoming cells meanwhile (``apex_core.running.prebuild``; process isolation, no executor).
    With ``measure_device_facts`` (the default when ``environment`` is None and no
    executor is given) the device's figures (``apex_core.measure.doctor.device_facts``) are
    measured into the environment in a thread while the run's processes start, and no
    slot takes a cell until they are in.
    ``on_cell(index, total, cell, result)`` is called with
    ``result=None`` before a cell starts and with its result once it is done; with
    several workers the calls come from their threads, one at a time.
    """
    if isolation not in ("process", "inline"):
        raise ValueError(f"isolation must be 'process' or 'inline', got {isolation!r}")
    if isolation == "inline" and (devices or executor is not None):
        raise UsageError("--inline runs every cell in this process: it cannot use --devices or --executor")
    if build_workers and (isolation == "inline" or executor is not None):
        raise UsageError("--build-workers starts builder processes beside the local workers: it cannot be "
                         "used with --inline, and under Ray the executor's build_workers says how many")
    timestamp = utc_now()
    configure_failures = configure_backends(plan, registry)
    if environment is None and executor is None:
        environment, measure_device_facts = capture_environment(plan.device, measure_device=False), True
    env = environment if environment is not None else capture_environment(plan.device)
    book = CellBook(plan.cells, on_cell)
    status = "interrupted"
    if executor is not None:
        try:
            uses = executor.run(plan, registry, book, configure_failures, dict(worker_env or {}),
                                probe_timeout_s)
            status = "complete"
        finally:
            book.stopping.set()
    else:
        slots = _slots(plan, registry, devices, worker_env, probe_timeout_s, isolation)
        # the run's builders (none when build_workers is 0), sharing its cards' environments in turn
        ahead = BuildAhead(book.cells, warmable_cells(book.cells, registry, configure_failures),
                           lambda index: cell_spec(plan, book.cells[index]), build_workers,
                           [slot.env for slot in slots], plan.timeout_s,
                           registry.in_memory_blob() if build_workers else b"", run_stopping=book.stopping)
        book.defer = ahead.building
        if measure_device_facts:
            # measured while the processes start; no slot takes a cell until they are in
            book.before_first = partial(_get_ready, facts=BackgroundFacts(plan.device, env).start(), book=book)
        try:
            ahead.start()
            # an inline run gets the workers' environment (the compile caches) here, then restored
            with overlaid_environ(worker_env if isolation == "inline" and worker_env else {}):
                run_slots(slots, book, CellPath(plan, registry, configure_failures, ahead).run)
            for index in book.drain():  # left by slots that were all taken out of the rotation
                book.finish(index, planned_result(book.cells[index], Status.ERROR, retired_reason(slots)))
            status = "complete"
        finally:
            ahead.close()  # first: what builders still warm is of no use now
            for slot in slots:
                if slot.pool is not None:
                    # an interrupted run may leave a worker in a hanging cell: kill it, do not wait
                    slot.pool.close(graceful=status == "complete")
        uses = tuple(use for use in (slot.use() for slot in slots) if use is not None)
    results = book.results()
    return Report(
        suite=suite,
        timestamp_utc=timestamp,
        environment=env,
        config=plan.config(),
        status=status,
        cells=results,
        plugins=registry.broken,
        deprecations=registry.deprecations,
        triton_autotune=summarize_autotune(results),
        devices=uses,
    )


def _slots(plan: Plan, registry: Registry, devices: Sequence[DeviceInfo] | None,
           worker_env: Mapping[str, str] | None, probe_timeout_s: float, isolation: str) -> list[Slot]:
    """One slot per card (or the one worker of a plain run), each with its pool and probes."""
    slots = [Slot(card, {**(worker_env or {}), **pinning_env(card)}) for card in devices] if devices \
        else [Slot(None, dict(worker_env or {}))]
    for slot in slots:
        if isolation == "inline":
            prober = inline_prober(registry.backends, probe_timeout_s)
        else:
            # a worker pinned to a real GPU checks it before taking work (a fake list has none to check)
            self_test = slot.device is not None and plan.device == "cuda"
            slot.pool = WorkerPool(registry.in_memory_blob(), env=slot.env, self_test=self_test)
            prober = pool_prober(slot.pool, probe_timeout_s)
        slot.probes = Probes(registry.backends, prober, plan.options_for)
    return slots


def _get_ready(slot: Slot, facts: BackgroundFacts, book: CellBook) -> None:
    """A slot's start: its worker starts while the device facts are measured, then it waits for them."""
    if slot.pool is not None:
        # a worker that does not start here is started (and its failure counted) with the first cell
        with contextlib.suppress(WorkerStartError):
            slot.pool.ensure_started()
    facts.wait(book.stopping)


