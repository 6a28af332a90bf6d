"""The run's report files, one per format, rewritten whole after every cell (apex_core.report.formats)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from apex_core.files import atomic_write_text, check_distinct, prepare_output
from apex_core.report.formats import FORMATS, ReportFormat
from apex_core.results import Report

log = logging.getLogger(__name__)


def optional_output(text: str | None, flag: str, *others: Path | None) -> Path | None:
    """The path of an output a run writes only when asked (``--html``, ``--output-csv``), checked
    like the other outputs before any work starts."""
    if text is None:
        return None
    path = Path(text)
    prepare_output(path, flag)
    for other in filter(None, others):
        check_distinct({flag: path, "another output": other})
    return path


class ReportWriter:
    """Writes a run's report in each format it was given a file for (``{format name: path}``).

    Every format is rewritten after every finished cell, except those written once the run
    has ended (complete or interrupted). A failed write or render never stops the run nor
    the other formats: the file keeps the last report written whole, and ``failure`` says why.
    """

    def __init__(self, files: Mapping[str, Path | None],
                 formats: Mapping[str, ReportFormat] = FORMATS) -> None:
        self.files = {name: path for name, path in files.items() if path is not None}
        self.formats = {name: formats[name] for name in self.files}
        self.failure = ""

    def write(self, report: Report) -> None:
        for name, fmt in self.formats.items():
            if fmt.at_end_only and report.status == "running":
                continue
            path = self.files[name]
            try:
                atomic_write_text(path, fmt.render(report, self.files))
            except OSError as exc:
                self.failure = f"could not write {exc.filename or path}: {exc.strerror or exc}"
            except Exception as exc:  # a rendering bug in one format must not lose the others
                log.exception("the %s report could not be rendered", fmt.title)
                self.failure = f"could not render the {fmt.title} report {path}: {type(exc).__name__}: {exc}"
