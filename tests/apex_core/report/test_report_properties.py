"""Property tests: every report a run can produce renders and validates (Markdown, JSON, HTML).

The records come from ``report_strategies`` (stats of 0 ms, one sample, 1e-9 and 1e9 ms, every
status, missing and odd optional parts); the examples are derandomized so CI is reproducible.
"""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path

import jsonschema
from hypothesis import HealthCheck, given, settings

from apex_core.report.flags import FLAGS, cell_flags
from apex_core.report.html.inputs import ReportInputs, RunInput
from apex_core.report.html.page import render_html
from apex_core.report.markdown import render_markdown
from apex_core.report.records import report_record
from apex_core.report.schema import report_schema
from apex_core.report.writer import ReportWriter
from apex_core.results import Report, Status
from tests.apex_core.report_strategies import reports, runs_of_one_build


@functools.cache
def schema_validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(report_schema())


PROPERTY = settings(derandomize=True, database=None, deadline=None, max_examples=300,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@PROPERTY
@given(reports())
def test_markdown_renders_every_report_with_one_row_per_case(report: Report) -> None:
    text = render_markdown(report)
    rows = {(c.workload, c.case, c.dtype) for c in report.cells}
    # the times' table: the first table after "## Times" (the energy table has the same shape)
    times = text.split("## Times")[1].split("| workload")[1].split("\n\n")[0]
    table = [line for line in times.splitlines() if line.startswith("| ") and not line.startswith("| ---")]
    assert len(table) == len(rows)
    # a speed-up is a finite ratio or a dash with its reason, never inf or nan
    assert "infx" not in text and "nanx" not in text


@PROPERTY
@given(reports())
def test_the_json_record_is_strict_json_and_validates_against_the_schema(report: Report) -> None:
    record = report_record(report)
    strict = json.loads(json.dumps(record, allow_nan=False))
    schema_validator().validate(strict)  # validate_report, without checking the schema itself each time
    assert len(strict["benchmarks"]) == len(report.cells)
    for cell, entry in zip(report.cells, strict["benchmarks"], strict=True):
        assert set(entry.get("flags", [])) <= set(FLAGS)
        if cell.timing is not None and not cell.timing.stats.p50 > 0:
            assert "no_device_work" in cell_flags(cell, report.environment, report.config)


def test_the_schema_lists_every_status_and_every_flag() -> None:
    cell = report_schema()["$defs"]["cell"]["properties"]
    assert set(cell["status"]["enum"]) == {str(s) for s in Status}
    assert set(cell["flags"]["items"]["enum"]) == set(FLAGS)


@settings(PROPERTY, max_examples=150)
@given(reports())
def test_html_renders_every_report(report: Report) -> None:
    record = json.loads(json.dumps(report_record(report), allow_nan=False))
    page = render_html(ReportInputs(runs=(RunInput("run0", "r.json", record),)))
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")


@settings(PROPERTY, max_examples=60)
@given(runs_of_one_build(runs=2))
def test_html_sets_any_two_runs_side_by_side(records: list[dict]) -> None:
    runs = tuple(RunInput(f"run{i}", f"r{i}.json", json.loads(json.dumps(r))) for i, r in enumerate(records))
    page = render_html(ReportInputs(runs=runs))
    assert 'id="compare-run0-vs-run1"' in page


@settings(PROPERTY, max_examples=150)
@given(reports())
def test_the_writer_writes_every_report_whole(report: Report) -> None:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        writer = ReportWriter({"json": folder / "r.json", "markdown": folder / "r.md",
                               "html": folder / "r.html"})
        writer.write(report)
        assert writer.failure == ""
        schema_validator().validate(json.loads((folder / "r.json").read_text(encoding="utf-8")))
        assert (folder / "r.md").read_text(encoding="utf-8").startswith(f"# {report.suite}")
        assert (folder / "r.html").exists() == (report.status != "running")
