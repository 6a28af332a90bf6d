"""Write reports atomically, so an interrupted or killed run leaves a valid file behind."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from apex_core.errors import UsageError
from apex_core.report.markdown import render_markdown
from apex_core.report.records import report_record
from apex_core.results import Report

log = logging.getLogger(__name__)


def atomic_write_text(path: Path, text: str) -> None:
    """Write to a temporary file in the same folder, flush it to disk, then rename over ``path``."""
    path = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file owner-only; give it the mode a plain open() would have
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        # a lone surrogate (a plugin's message from an undecodable file name) is written escaped, never fatal
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


# room for the temporary file's prefix and suffix within the usual 255-byte name limit
MAX_NAME_BYTES = 200


def check_writable(path: Path, flag: str) -> None:
    """Fail before any work starts when ``path`` cannot be written as a plain file of its own.

    The folder must exist and take a new file; the path must not name a folder, a symbolic
    link (a write would follow it) or anything but a regular file (a device node or FIFO
    would be replaced by a file), and its name must leave room for the temporary file.
    """
    text = str(path)
    if not text.strip():
        raise UsageError(f"{flag}: empty path")
    path = Path(path)
    if len(path.name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        raise UsageError(f"{flag}: file name of {len(path.name)} characters is too long "
                         f"(at most {MAX_NAME_BYTES} bytes)")
    if path.is_symlink():
        raise UsageError(f"{flag} {path}: is a symbolic link; name the file itself")
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a folder, expected a file path")
    if path.exists() and not path.is_file():
        raise UsageError(f"{flag} {path}: exists and is not a regular file (a device, FIFO or socket)")
    folder = path.resolve().parent
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: folder {folder} does not exist")
    try:
        fd, probe = tempfile.mkstemp(prefix=".apex-bench-write-check.", dir=folder)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: folder {folder} is not writable ({exc.strerror})") from None
    os.close(fd)
    os.unlink(probe)


def check_distinct(paths: dict[str, Path]) -> None:
    """Refuse two outputs that name the same file (the second would overwrite the first)."""
    seen: dict[Path, str] = {}
    for flag, path in paths.items():
        key = Path(path).resolve()
        if key in seen:
            raise UsageError(f"{flag} and {seen[key]} name the same file {path}")
        seen[key] = flag


@cache
def report_schema() -> dict[str, Any]:
    """The JSON Schema every report validates against (shipped in the package)."""
    text = resources.files("apex_core.report").joinpath("report.schema.json").read_text("utf-8")
    return json.loads(text)


def validate_report(record: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` when a report record breaks the schema."""
    import jsonschema

    jsonschema.validate(record, report_schema())


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
        from apex_core.report.html import ReportInputs, RunInput, write_html

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
