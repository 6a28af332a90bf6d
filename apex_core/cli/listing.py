"""``apex-bench --list``: every backend and workload, with availability and reasons.

Backends are probed in a worker process, each under the probe timeout, so a probe
that crashes or hangs shows as an ``error`` or ``timeout`` row instead of taking
the listing with it (``--inline`` probes in this process, each on a thread under the
same timeout: a hang is still a ``timeout`` row, a crash takes the listing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from apex_core.backend_options import configure
from apex_core.errors import one_line, printable
from apex_core.plugin_api import deprecation_lines
from apex_core.registry import Registry
from apex_core.results import PluginRow
from apex_core.running.probing import DEFAULT_PROBE_TIMEOUT_S, Probes, inline_prober
from apex_core.running.workers import WorkerPool, pool_prober


def plugin_rows(registry: Registry, device: str, probes: Probes) -> list[PluginRow]:
    """One row per discovered plugin; backends are probed on ``device``."""
    rows: list[PluginRow] = []
    for name, backend in sorted(registry.backends.items()):
        result = probes.result(name, device)
        rows.append(PluginRow("backend", name, registry.sources.get(("backend", name), ""), result.status,
                              result.reason, backend.description))
    for name, workload in sorted(registry.workloads.items()):
        rows.append(PluginRow("workload", name, registry.sources.get(("workload", name), ""), "ok",
                              f"cases: {', '.join(workload.case_names)}", workload.description))
    rows.extend(registry.broken)
    return sorted(rows, key=lambda r: (r.group, r.name))


def list_plugins(registry: Registry, device: str, options: Mapping[str, Mapping[str, Any]], *,
                 inline: bool = False, probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S) -> None:
    """Print the listing; backends get ``options`` first (availability may depend on them)."""
    for name, values in options.items():
        if name in registry.backends:
            # a bad value is a usage error, here; any other failure its probe reports
            configure(registry.backends[name], values)
    pool = None if inline else WorkerPool()
    prober = (inline_prober(registry.backends, probe_timeout_s) if pool is None
              else pool_prober(pool, probe_timeout_s))
    probes = Probes(registry.backends, prober, lambda name: dict(options.get(name, {})))
    finished = False
    try:
        rows = plugin_rows(registry, device, probes)
        finished = True
    finally:
        if pool is not None:
            pool.close(graceful=finished)
    print_listing(rows, device)
    print_options(registry)
    # the table folds long reasons over several lines: each problem again on one line of its own
    for row in registry.broken:
        print(f"cannot run: {row.group} {row.name!r}: {printable(one_line(row.reason))}")
    for line in deprecation_lines(registry.deprecations):
        print(f"deprecated: {line}")


def print_options(registry: Registry, console: Any = None) -> None:
    """The options each backend declares, as ``--backend-opt NAME.KEY=VALUE`` takes them."""
    specs = [(name, spec) for name, backend in sorted(registry.backends.items())
             for spec in getattr(backend, "option_specs", ())]
    if not specs:
        return
    console = console or Console(width=160)
    table = Table(title="backend options (--backend-opt NAME.KEY=VALUE)")
    for column in ("backend", "key", "type", "meaning"):
        table.add_column(column, overflow="fold")
    for name, spec in specs:
        kind = f"{spec.type}, repeatable" if spec.repeatable else spec.type
        table.add_row(*map(escape, (name, spec.key, kind, spec.help)))
    console.print(table)


def print_listing(rows: list[PluginRow], device: str, console: Any = None) -> None:
    console = console or Console(width=160)
    for group in ("backend", "workload"):
        table = Table(title=f"{group}s (device {device})" if group == "backend" else "workloads")
        for column in ("name", "status", "reason / cases", "description", "source"):
            table.add_column(column, overflow="fold")
        for row in rows:
            if row.group == group:
                # plain text, not rich markup: "pip install 'apex-bench[jax]'" keeps its brackets
                table.add_row(*map(escape, (row.name, row.status, row.reason, row.description, row.source)))
        console.print(table)
