"""Report formats: each turns a run's report into the text of one file (docs/report.md).

A format is a name, the flag that names its file, and a function from the report (and the
run's other files, which a format may point at) to text. The run writes every format it was
given a file for (``ReportWriter``): after each cell, or, for a format that needs the whole
run (the HTML's plots), once it has ended. A new format is one new module and one entry in
``FORMATS``; a sweep swaps in its own Markdown (``engine/sweep_report.py``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from apex_core.report.csv_table import render_csv
from apex_core.report.html import ReportInputs, RunInput, render_html
from apex_core.report.markdown import render_markdown
from apex_core.report.records import report_record
from apex_core.report.roofline_table import render_roofline
from apex_core.results import Report

# the files of one run, by format name: a format may point at another (the Markdown at the HTML)
Files = Mapping[str, Path]


@attrs.frozen
class ReportFormat:
    """One way to write a run down."""

    name: str
    title: str  # as a message names it
    flag: str  # the run's option that names its file
    render: Callable[[Report, Files], str]
    at_end_only: bool = False  # written once the run has ended, not after every cell


def record_json(record: dict[str, Any]) -> str:
    """A report record as the JSON file holds it (no NaN or infinity: the schema's numbers)."""
    return json.dumps(record, indent=2, default=str, allow_nan=False)


def report_json(report: Report) -> str:
    return record_json(report_record(report))


def markdown_link(markdown_path: Path, html_path: Path) -> str:
    """The line of the Markdown summary that points at the HTML report (relative, so artifacts keep it)."""
    target = os.path.relpath(html_path.resolve(), markdown_path.resolve().parent)
    return f"\nHTML report with plots: [{html_path.name}]({target.replace(' ', '%20')})\n"


def markdown_format(summary: Callable[[Report], str]) -> ReportFormat:
    """The Markdown summary made by ``summary``, linked to the run's HTML report when there is one."""
    def render(report: Report, files: Files) -> str:
        linked = "markdown" in files and "html" in files
        return summary(report) + (markdown_link(files["markdown"], files["html"]) if linked else "")

    return ReportFormat("markdown", "Markdown", "--output-md", render)


def _html(report: Report, files: Files) -> str:
    label = str(files["json"]) if "json" in files else "this run"
    return render_html(ReportInputs(runs=(RunInput("run0", label, report_record(report)),)))


JSON = ReportFormat("json", "JSON", "--output-json", lambda report, _files: report_json(report) + "\n")
MARKDOWN = markdown_format(render_markdown)
HTML = ReportFormat("html", "HTML", "--html", _html, at_end_only=True)
CSV = ReportFormat("csv", "CSV", "--output-csv", lambda report, _files: render_csv(report_record(report)))
ROOFLINE = ReportFormat("roofline", "roofline", "--output-roofline",
                        lambda report, _files: render_roofline(report_record(report)))
FORMATS = {f.name: f for f in (JSON, MARKDOWN, HTML, CSV, ROOFLINE)}
