"""The report formats: one seam (a format turns a report into text), CSV as the proof."""

from __future__ import annotations

import csv
import io
import json

import attrs
import pytest

from apex_core.report import formats
from apex_core.report.csv_table import COLUMNS
from apex_core.report.records import report_record
from apex_core.report.writer import ReportWriter
from tests.conftest import run_cli
from tests.golden import records


def test_csv_has_one_row_per_cell_saying_what_the_json_says():
    report = records.report()
    rows = list(csv.DictReader(io.StringIO(formats.CSV.render(report, {}))))
    cells = report_record(report)["benchmarks"]
    assert len(rows) == len(cells) and tuple(rows[0]) == COLUMNS
    for row, cell in zip(rows, cells, strict=True):
        assert (row["workload"], row["backend"], row["status"]) == (cell["workload"], cell["backend"],
                                                                   cell["status"])
        stats = cell["stats"] or {}
        assert row["p50_ms"] == ("" if "p50_ms" not in stats else str(stats["p50_ms"]))
        assert row["flags"] == ";".join(cell.get("flags") or ())
        assert row["reason"] == cell["reason"]
    # every status of the fixed run reaches the table, a failed cell with its reason and no time
    assert {r["status"] for r in rows} == {c["status"] for c in cells}
    failed = next(r for r in rows if r["status"] != "ok")
    assert failed["p50_ms"] == "" and failed["reason"]


def test_a_format_that_fails_to_render_loses_neither_the_others_nor_the_run(tmp_path):
    def broken(report, files):
        raise ZeroDivisionError("a format's bug")

    mine = {**formats.FORMATS, "csv": formats.ReportFormat("csv", "CSV", "--output-csv", broken)}
    files = {"json": tmp_path / "r.json", "markdown": tmp_path / "r.md", "csv": tmp_path / "r.csv"}
    writer = ReportWriter(files, mine)
    writer.write(records.report())
    assert json.loads((tmp_path / "r.json").read_text())["benchmarks"]
    assert (tmp_path / "r.md").read_text().startswith("#")
    assert not (tmp_path / "r.csv").exists()
    assert writer.failure.startswith("could not render the CSV report")
    assert "ZeroDivisionError" in writer.failure


def test_a_format_written_at_the_end_waits_for_the_end(tmp_path):
    writer = ReportWriter({"json": tmp_path / "r.json", "html": tmp_path / "r.html"})
    running = records.report()
    writer.write(attrs.evolve(running, status="running"))
    assert (tmp_path / "r.json").exists() and not (tmp_path / "r.html").exists()
    writer.write(attrs.evolve(running, status="complete"))
    assert (tmp_path / "r.html").read_text().startswith("<!")


@pytest.mark.slow
def test_the_cli_writes_csv_when_asked_and_refuses_it_over_another_output(tmp_path):
    args = ["--device", "cpu", "--profile", "smoke", "--workloads", "tilepack", "--backends", "torch-reference",
            "--fixed-iters", "3", "--no-history", "--quiet", "--output-json", "r.json", "--output-md", "r.md"]
    result = run_cli([*args, "--output-csv", "r.csv"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    (row,) = csv.DictReader((tmp_path / "r.csv").open())
    assert (row["workload"], row["backend"], row["status"]) == ("tilepack", "torch-reference", "ok")
    assert row["n"] == "3"
    clash = run_cli([*args, "--output-csv", "r.json"], cwd=tmp_path)
    assert clash.returncode == 2 and "Traceback" not in clash.stderr
    assert len(clash.stderr.strip().splitlines()) == 1 and "--output-csv" in clash.stderr
