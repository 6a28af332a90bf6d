"""``apex-bench report`` as a user runs it: the views it writes, and one-line exit-2 errors on bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apex_core.history import HistoryStore
from tests.apex_core.history.conftest import make_report, ok_cell
from tests.apex_core.report.html.sources import collect
from tests.conftest import run_cli


def one_line_error(result: Any, path: Path | str) -> str:
    """The error of a failed command: exit 2, one line on stderr that names ``path``, no traceback."""
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(path) in lines[0] and "Traceback" not in result.stderr
    return lines[0]


def test_full_report_has_every_view(full_report: dict[str, Any]) -> None:
    text = full_report["html"]
    for anchor in (
        'id="top"',
        'id="cases"',
        'id="roofline"',
        'id="not-timed"',
        'id="history"',
        'id="compare-run0-vs-run1"',
    ):
        assert anchor in text
    plots = {name.split(":")[0] for name in _plot_names(text)}
    assert plots == {"bars", "hist", "ecdf", "bandwidth", "roofline", "trend", "ratio"}
    # every status without a time is listed with its reason, escaped
    for reason in (
        "tensorrt not installed",
        "12 of 1048576 elements mismatch",
        "signal 11",
        "no result within 600 s",
        "&lt;script&gt;alert(1)&lt;/script&gt;",
    ):
        assert reason in text
    assert "<script>alert(1)" not in text
    # flags beside the bars, the subject's tags from the history, the gate's outcome
    assert 'data-flag="launch_bound"' in text and "nightly, v1.2" in text and "Gate: " in text
    # no file or URL outside the page: everything is inline
    for outside in ('src="http', 'href="http', "<link", "@import", "url("):
        assert outside not in text


def _plot_names(text: str) -> list[str]:
    import re

    return re.findall(r'<svg class="plot" data-plot="([^"]+)"', text)


def test_report_from_the_history_alone_reports_its_latest_run(history_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "latest.html"
    result = run_cli(["report", "--history", str(history_file), "--html", str(out)], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert "(latest run)" in text and "this report's run is #12" in text
    assert collect(text).plots > 40


def test_another_schema_version_is_refused(report_files: dict[str, Path], tmp_path: Path) -> None:
    record = json.loads(report_files["events"].read_text())
    record["schema_version"] = 2
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps(record))
    line = one_line_error(
        run_cli(["report", str(newer), "--html", str(tmp_path / "o.html")], cwd=tmp_path), newer
    )
    assert "schema_version" in line and "version 1" in line
    assert not (tmp_path / "o.html").exists()


def test_a_truncated_report_is_refused(report_files: dict[str, Path], tmp_path: Path) -> None:
    cut = tmp_path / "cut.json"
    cut.write_bytes(report_files["events"].read_bytes()[:100_000])
    line = one_line_error(run_cli(["report", str(cut), "--html", str(tmp_path / "o.html")], cwd=tmp_path), cut)
    assert "malformed JSON" in line


def test_a_report_that_breaks_the_schema_names_the_field(report_files: dict[str, Path], tmp_path: Path) -> None:
    record = json.loads(report_files["events"].read_text())
    del record["benchmarks"][3]["status"]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(record))
    line = one_line_error(
        run_cli(["report", str(broken), "--html", str(tmp_path / "o.html")], cwd=tmp_path), broken
    )
    assert "benchmarks[3].status" in line


def test_a_history_of_another_environment_is_refused(report_files: dict[str, Path], tmp_path: Path) -> None:
    other = tmp_path / "cpu-history.sqlite"
    with HistoryStore.open(other) as store:
        store.record(make_report([ok_cell("tilepack", "torch-reference", 0.2)]))
    result = run_cli(
        ["report", str(report_files["events"]), "--history", str(other), "--html", str(tmp_path / "o.html")],
        cwd=tmp_path,
    )
    line = one_line_error(result, other)
    assert "holds no run of the report's environment" in line and "NVIDIA H100" in line and "Test CPU" in line


@pytest.mark.parametrize("problem", ["missing", "not sqlite", "empty"])
def test_unusable_histories_are_one_line_errors(
    problem: str, report_files: dict[str, Path], tmp_path: Path
) -> None:
    history = tmp_path / "h.sqlite"
    if problem == "not sqlite":
        history.write_text("not a database")
    elif problem == "empty":
        HistoryStore.open(history).close()
    argv = ["report", "--history", str(history), "--html", str(tmp_path / "o.html")]
    if problem == "missing":
        argv.insert(1, str(report_files["events"]))
    one_line_error(run_cli(argv, cwd=tmp_path), history)


def test_the_report_never_overwrites_its_input(report_files: dict[str, Path], tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    target.write_bytes(report_files["events"].read_bytes())
    one_line_error(run_cli(["report", str(target), "--html", str(target)], cwd=tmp_path), target)
    assert target.read_bytes() == report_files["events"].read_bytes()


def test_nothing_to_report_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli(["report", "--html", str(tmp_path / "o.html")], cwd=tmp_path)
    assert result.returncode == 2 and "nothing to report" in result.stderr


def test_a_run_with_html_writes_it_and_links_it_from_the_markdown(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    result = run_cli(
        [
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "--backends",
            "torch-reference,triton",
            "--workloads",
            "tilepack",
            "--inline",
            "--quiet",
            "--min-time",
            "0.05",
            "--max-time",
            "0.2",
            "--output-json",
            str(out / "run.json"),
            "--output-md",
            str(out / "run.md"),
            "--html",
            str(out / "run.html"),
        ],
        cwd=tmp_path,
        # the skipped triton cell below needs the interpreter off (kernel tests set it for the process)
        env={"TRITON_INTERPRET": "0"},
    )
    assert result.returncode == 0, result.stderr
    markdown = (out / "run.md").read_text()
    assert "HTML report with plots: [run.html](run.html)" in markdown
    text = (out / "run.html").read_text()
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "complete" and collect(text).plots >= 3
    assert "triton on the CPU needs TRITON_INTERPRET=1" in text  # the skipped cell with its reason


def test_a_run_refuses_an_html_path_it_cannot_write(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("in the way of the folder --html names")
    result = run_cli(
        [
            "--device",
            "cpu",
            "--workloads",
            "tilepack",
            "--output-json",
            str(tmp_path / "r.json"),
            "--html",
            str(tmp_path / "a-file" / "r.html"),
        ],
        cwd=tmp_path,
    )
    assert result.returncode == 2 and "--html" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.json").exists()  # refused before any work started
