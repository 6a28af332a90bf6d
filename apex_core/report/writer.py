"""The run's report files (JSON, Markdown, HTML), rewritten whole after every cell (apex_core.report.files)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apex_core.report.files import atomic_write_text, check_distinct, check_writable
from apex_core.report.html import ReportInputs, RunInput, write_html
from apex_core.report.markdown import render_markdown
from apex_core.report.records import report_record
from apex_core.results import Report

log = logging.getLogger(__name__)


def record_json(record: dict[str, Any]) -> str:
    """A report record as the JSON file holds it (no NaN or infinity: the schema's numbers)."""
    return json.dumps(record, indent=2, default=str, allow_nan=False)


def report_json(report: Report) -> str:
    return record_json(report_record(report))


def html_output(text: str | None, *others: Path) -> Path | None:
    """The ``--html`` path of a run, checked like the other outputs before any work starts."""
    if text is None:
        return None
    path = Path(text)
    check_writable(path, "--html")
    for other in others:
        check_distinct({"--html": path, "another output": other})
    return path


def markdown_link(markdown_path: Path, html_path: Path) -> str:
    """The line of the Markdown summary that points at the HTML report (relative, so artifacts keep it)."""
    target = os.path.relpath(html_path.resolve(), markdown_path.resolve().parent)
    return f"\nHTML report with plots: [{html_path.name}]({target.replace(' ', '%20')})\n"


class ReportWriter:
    """Rewrites the JSON report (and the Markdown summary) after every finished cell.

    With ``html_path`` the HTML report is written too, once the run has ended (complete or
    interrupted), and the Markdown summary links to it.
    """

    def __init__(self, json_path: Path | None, markdown_path: Path | None, html_path: Path | None = None,
                 *, record: Callable[[Report], dict[str, Any]] = report_record,
                 markdown: Callable[[Report], str] = render_markdown) -> None:
        # a model file's run writes the sweep's record and summary (its replay block, its shapes)
        self.record, self.markdown = record, markdown
        self.json_path = json_path
        self.markdown_path = markdown_path
        self.html_path = html_path
        # the last write that failed (a full disk, a folder made read-only): the run goes on,
        # the files keep the last report written whole, and the CLI says so at the end
        self.failure = ""

    def write(self, report: Report) -> None:
        record = None  # built once, for the JSON and the HTML alike
        try:
            if self.json_path is not None:
                record = self.record(report)
                atomic_write_text(self.json_path, record_json(record) + "\n")
            if self.markdown_path is not None:
                link = markdown_link(self.markdown_path, self.html_path) if self.html_path else ""
                atomic_write_text(self.markdown_path, self.markdown(report) + link)
        except OSError as exc:
            self.failure = f"could not write {exc.filename or self.json_path}: {exc.strerror or exc}"
        if self.html_path is not None and report.status != "running":
            self._write_html(report, record)

    def _write_html(self, report: Report, record: dict[str, Any] | None) -> None:
        assert self.html_path is not None
        label = str(self.json_path) if self.json_path is not None else "this run"
        try:
            record = record if record is not None else self.record(report)
            write_html(self.html_path, ReportInputs(runs=(RunInput("run0", label, record),)))
        except OSError as exc:
            self.failure = f"could not write {exc.filename or self.html_path}: {exc.strerror or exc}"
        except Exception as exc:  # the JSON and Markdown are written; a rendering bug must not lose them
            log.exception("the HTML report could not be rendered")
            self.failure = f"could not render the HTML report {self.html_path}: {type(exc).__name__}: {exc}"
