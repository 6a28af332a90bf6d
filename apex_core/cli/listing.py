"""``apex-bench --list``: every backend and workload, with availability and reasons."""

from __future__ import annotations

from typing import Any

from apex_core.registry import Registry
from apex_core.results import PluginRow


def plugin_rows(registry: Registry, device: str) -> list[PluginRow]:
    """One row per discovered plugin; backends are probed on ``device``."""
    rows: list[PluginRow] = []
    for name, backend in sorted(registry.backends.items()):
        source = registry.sources.get(("backend", name), "")
        try:
            availability = backend.probe(device) if device in backend.devices else None
        except Exception as exc:
            rows.append(PluginRow("backend", name, source, "error", f"probe raised {exc!r}",
                                  backend.description))
            continue
        if availability is None:
            reason = f"runs on {', '.join(sorted(backend.devices))}, not {device}"
            rows.append(PluginRow("backend", name, source, "unavailable", reason, backend.description))
        else:
            status = "ok" if availability.ok else "unavailable"
            rows.append(PluginRow("backend", name, source, status, availability.reason,
                                  backend.description))
    for name, workload in sorted(registry.workloads.items()):
        source = registry.sources.get(("workload", name), "")
        cases = ", ".join(workload.case_names)
        rows.append(PluginRow("workload", name, source, "ok", f"cases: {cases}", workload.description))
    rows.extend(registry.broken)
    return sorted(rows, key=lambda r: (r.group, r.name))


def print_listing(registry: Registry, device: str, console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=160)
    for group in ("backend", "workload"):
        table = Table(title=f"{group}s (device {device})" if group == "backend" else "workloads")
        for column in ("name", "status", "reason / cases", "description", "source"):
            table.add_column(column, overflow="fold")
        for row in plugin_rows(registry, device):
            if row.group == group:
                table.add_row(row.name, row.status, row.reason, row.description, row.source)
        console.print(table)
