"""Assemble one self-contained HTML report: header, summary, per-case views, roofline, failures, history,
A vs B.

``render_html(inputs)`` returns the whole document as text: the style sheet, the plots (inline
SVG) and the one small script are all inside it, and it names no other file or URL, so it opens
offline and can be mailed or attached as a CI artifact (docs/report.md).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from apex_core.files import atomic_write_text
from apex_core.report.html.assets import ERROR_TRAP, SCRIPT, STYLE
from apex_core.report.html.case_view import case_floor, case_section, draws_host, floor_source
from apex_core.report.html.cells import CaseGroup, case_groups, report_cells
from apex_core.report.html.failures import failures_section
from apex_core.report.html.header import header_section
from apex_core.report.html.inputs import ReportInputs
from apex_core.report.html.roofline import roofline_section
from apex_core.report.html.side_by_side import side_by_side_section
from apex_core.report.html.summary import summary_section
from apex_core.report.html.svg import backend_colours, esc
from apex_core.report.html.trends import history_section
from apex_core.report.markdown import REFERENCE_BACKEND

NAV = (
    '<a href="#top">environment</a><a href="#summary">summary</a><a href="#cases">per case</a>'
    '<a href="#roofline">roofline</a>'
    '<a href="#not-timed">cells without a time</a><a href="#history">history</a>'
)


def _subject_tags(inputs: ReportInputs) -> tuple[str, ...]:
    history = inputs.history
    if history is None or history.subject_run_id is None:
        return ()
    return next((r.tags for r in history.runs if r.run_id == history.subject_run_id), ())


def cases_caption(groups: Sequence[CaseGroup], run: Mapping[str, Any]) -> str:
    """What the bar plots draw, in words (no user text): the diamond and the floor only where drawn."""
    parts = ["Bars are the p50 per call, whiskers run from p5 to p95 of the raw samples"]
    if any(draws_host(g) for g in groups):
        parts.append("the diamond is the host's time to issue one call (above the bar: launch-bound)")
    if any(case_floor(g, run) is not None for g in groups):
        parts.append(f"the dashed line is the physics floor: the case's minimal bytes at {floor_source(run)}; "
                     "a bar left of it is faster than physics")
    return (", ".join(parts) + f". The speed-up is {REFERENCE_BACKEND}'s p50 over the backend's. The axis "
            "turns logarithmic when the values span more than 20x.")


def render_html(inputs: ReportInputs) -> str:
    """The report of ``inputs.subject`` (with the history and A vs B views the inputs allow)."""
    subject = inputs.subject
    record, doc = subject.record, subject.doc
    cells = report_cells(doc, record)
    backends = [c.backend for c in cells]
    if inputs.history is not None:
        backends += [p.backend for p in inputs.history.series]
    colours = backend_colours(backends, REFERENCE_BACKEND)
    groups = case_groups(cells)
    timed_groups = [g for g in groups if any(c.timed for c in g.cells)]
    compares = [side_by_side_section(other, subject, cells) for other in inputs.runs[:-1]]
    nav = NAV + (f'<a href="#compare-{esc(inputs.runs[0].doc)}-vs-{esc(doc)}">A vs B</a>' if compares else "")
    case_index = " · ".join(f'<a href="#{esc(g.anchor)}">{esc(g.title)}</a>' for g in timed_groups)
    body = [
        f"<nav>{nav}</nav>",
        header_section(record, doc, subject.label, cells, _subject_tags(inputs),
                       inputs.history.path if inputs.history else ""),
        summary_section(groups, cells),
        '<section id="cases"><h2>Per workload and case</h2>'
        f'<p class="caption">{cases_caption(groups, record)}</p><p class="note">{case_index}</p>',
        *(case_section(g, record, colours) for g in groups),
        "</section>",
        roofline_section(record, doc, cells, colours, inputs.peak_tflops),
        failures_section(record, cells),
        history_section(inputs.history, inputs.baseline, inputs.gate, inputs.gate_label, colours,
                        inputs.history_note),
        *compares,
    ]
    title = f"{record.get('suite', 'apex-bench')} {record.get('timestamp_utc', '')}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="apex-bench report">'
        f"<title>{html.escape(title)}</title><script>{ERROR_TRAP}</script><style>{STYLE}</style></head>"
        f"<body>{''.join(body)}<script>{SCRIPT}</script></body></html>\n"
    )


def write_html(path: Path | str, inputs: ReportInputs) -> None:
    """Render and write the report atomically (a reader never sees half a file)."""
    atomic_write_text(Path(path), render_html(inputs))
