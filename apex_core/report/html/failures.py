"""The cells that produced no time (skipped, incorrect, suspect, error, crashed, timeout), broken plugins,
and the deprecated plugin-API forms the plugins use."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from apex_core.report.html.cells import Cell
from apex_core.report.html.svg import esc, sortable_table

# the order a reader acts on them: what is broken first, then what could not run
STATUS_RANK = {"incorrect": 0, "suspect": 1, "crashed": 2, "timeout": 3, "error": 4, "skipped": 5}


def _plugin(p: Mapping[str, Any]) -> str:
    return (f"<li>{esc(p.get('group', '?'))} <code>{esc(p.get('name', '?'))}</code> "
            f"({esc(p.get('source', ''))}): {esc(p.get('reason', ''))}</li>")


def _deprecation(d: Mapping[str, Any]) -> str:
    """One of the report's ``deprecations`` (docs/plugin-api.md): what a shim serves, per plugin."""
    return (f"<li>{esc(d.get('group', '?'))} <code>{esc(d.get('plugin', '?'))}</code>: "
            f"<code>{esc(d.get('used', ''))}</code>, deprecated since plugin API {esc(d.get('since', '?'))}; "
            f"use <code>{esc(d.get('instead', ''))}</code> (shim removed in {esc(d.get('removal', '?'))})</li>")


def _listed(record: Mapping[str, Any], field: str, title: str, item: Callable[[Mapping[str, Any]], str]) -> str:
    found = [entry for entry in record.get(field) or [] if isinstance(entry, Mapping)]
    return f"<h3>{title}</h3><ul>{''.join(item(entry) for entry in found)}</ul>" if found else ""


def failures_section(record: Mapping[str, Any], cells: Sequence[Cell]) -> str:
    untimed = sorted((c for c in cells if c.status != "ok"), key=lambda c: STATUS_RANK.get(c.status, 6))
    rows = (
        f'<tr class="status-{esc(c.status)}"><td>{esc(c.record["workload"])}</td>'
        f'<td>{esc(c.record["case"])}</td><td>{esc(c.backend)}</td><td>{esc(c.record["dtype"])}</td>'
        f"<td>{esc(c.status)}{' (' + esc(c.record['skip_kind']) + ')' if c.record.get('skip_kind') else ''}"
        f'</td><td class="reason">{esc(c.record.get("reason") or "no reason recorded")}</td></tr>'
        for c in untimed
    )
    head = ("workload", "case", "backend", "dtype", "status", "reason")
    return (
        '<section id="not-timed"><h2>Cells without a time</h2>'
        + (sortable_table(head, rows) if untimed else '<p class="none">Every cell ran and was timed.</p>')
        + _listed(record, "plugins", "Plugins that failed to load", _plugin)
        + _listed(record, "deprecations", "Deprecated plugin API the plugins use", _deprecation)
        + "</section>"
    )
