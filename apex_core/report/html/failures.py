"""The cells that produced no time (skipped, incorrect, suspect, error, crashed, timeout), broken plugins,
and the deprecated plugin-API forms the plugins use."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apex_core.report.html.cells import Cell
from apex_core.report.html.svg import esc, sortable_table

# the order a reader acts on them: what is broken first, then what could not run
STATUS_RANK = {"incorrect": 0, "suspect": 1, "crashed": 2, "timeout": 3, "error": 4, "skipped": 5}


def failures_section(record: Mapping[str, Any], cells: Sequence[Cell]) -> str:
    untimed = sorted((c for c in cells if c.status != "ok"), key=lambda c: STATUS_RANK.get(c.status, 6))
    plugins = [p for p in record.get("plugins") or [] if isinstance(p, Mapping)]
    parts = ['<section id="not-timed"><h2>Cells without a time</h2>']
    if not untimed:
        parts.append('<p class="none">Every cell ran and was timed.</p>')
    else:
        rows = (
            f'<tr class="status-{esc(c.status)}"><td>{esc(c.record["workload"])}</td>'
            f'<td>{esc(c.record["case"])}</td>'
            f"<td>{esc(c.backend)}</td><td>{esc(c.record['dtype'])}</td><td>{esc(c.status)}"
            f"{' (' + esc(c.record['skip_kind']) + ')' if c.record.get('skip_kind') else ''}</td>"
            f'<td class="reason">{esc(c.record.get("reason") or "no reason recorded")}</td></tr>'
            for c in untimed
        )
        parts.append(sortable_table(("workload", "case", "backend", "dtype", "status", "reason"), rows))
    if plugins:
        parts.append(
            "<h3>Plugins that failed to load</h3><ul>"
            + "".join(
                f"<li>{esc(p.get('group', '?'))} <code>{esc(p.get('name', '?'))}</code> "
                f"({esc(p.get('source', ''))}): "
                f"{esc(p.get('reason', ''))}</li>"
                for p in plugins
            )
            + "</ul>"
        )
    parts.append(_deprecations(record))
    return "".join(parts) + "</section>"


def _deprecations(record: Mapping[str, Any]) -> str:
    """The report's ``deprecations`` (docs/plugin-api.md): what a shim serves, per plugin."""
    found = [d for d in record.get("deprecations") or [] if isinstance(d, Mapping)]
    if not found:
        return ""
    items = "".join(
        f"<li>{esc(d.get('group', '?'))} <code>{esc(d.get('plugin', '?'))}</code>: "
        f"<code>{esc(d.get('used', ''))}</code>, deprecated since plugin API {esc(d.get('since', '?'))}; use "
        f"<code>{esc(d.get('instead', ''))}</code> (shim removed in {esc(d.get('removal', '?'))})</li>"
        for d in found)
    return f"<h3>Deprecated plugin API the plugins use</h3><ul>{items}</ul>"
