"""``apex-bench report`` and the run history: the default history read without --history (and said
so in the page), ``--no-history``, and ``--run SPEC`` picking the subject from the history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apex_core.cli.main import main as cli_main
from apex_core.history import HistoryStore
from tests.apex_core.history.conftest import commit_of, make_report, ok_cell
from tests.apex_core.report.html.test_report_cli import one_line_error
from tests.conftest import run_cli

RUNS = 3


def record_runs(path: Path, cpu: str = "Test CPU") -> list[dict[str, Any]]:
    """Three CPU runs of one environment, tagged nightly; the second also release."""
    reports = [
        make_report([ok_cell("tilepack", "torch-reference", 0.2 * (1 + 0.01 * i), seed=i),
                     ok_cell("tilepack", "triton", 0.1, seed=i)],
                    cpu=cpu, commit=commit_of(i), timestamp=f"2026-01-0{i + 1}T00:00:00Z")
        for i in range(RUNS)
    ]
    with HistoryStore.open(path) as store:
        for i, report in enumerate(reports):
            store.record(report, tags=["nightly", *(["release"] if i == 1 else [])])
    return reports


def report(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """Run ``apex-bench report`` in this process: (the page, what it printed)."""
    out = Path(argv[argv.index("--html") + 1])
    assert cli_main(["report", *argv]) == 0, capsys.readouterr().err
    return out.read_text(encoding="utf-8"), capsys.readouterr().out


def test_the_default_history_is_read_without_history(
    default_history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = tmp_path / "run.json"
    subject.write_text(json.dumps(record_runs(default_history)[-1]))
    html, printed = report([str(subject), "--html", str(tmp_path / "o.html")], capsys)
    assert f"Read from <code>{default_history}</code> (the default history: $APEX_BENCH_HISTORY" in html
    assert f"history <code>{default_history}</code>" in html  # beside the run's source, at the top
    assert "this report's run is #3" in html and 'data-plot="trend:' in html
    assert "No history" not in html
    assert f"history {default_history} (default)" in printed


def test_without_a_default_history_the_page_says_where_it_looked(
    default_history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = tmp_path / "run.json"
    subject.write_text(json.dumps(make_report([ok_cell("tilepack", "torch-reference", 0.2)])))
    html, printed = report([str(subject), "--html", str(tmp_path / "o.html")], capsys)
    assert f"No history: none given with --history, and none at the default {default_history}." in html
    assert ", history " not in printed


def test_no_history_skips_the_default_one(
    default_history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = tmp_path / "run.json"
    subject.write_text(json.dumps(record_runs(default_history)[-1]))
    html, _ = report([str(subject), "--no-history", "--html", str(tmp_path / "o.html")], capsys)
    assert "No history given." in html and 'data-plot="trend:' not in html


def test_a_default_history_of_another_environment_is_said_not_refused(
    default_history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record_runs(default_history, cpu="Another CPU")
    subject = tmp_path / "run.json"
    subject.write_text(json.dumps(make_report([ok_cell("tilepack", "torch-reference", 0.2)])))
    html, _ = report([str(subject), "--html", str(tmp_path / "o.html")], capsys)
    assert f"The default history {default_history} ($APEX_BENCH_HISTORY" in html
    assert "holds no run of the report&#x27;s environment" in html and "Another CPU" in html


def test_with_no_run_the_default_historys_latest_run_is_the_subject(
    default_history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record_runs(default_history)
    html, printed = report(["--html", str(tmp_path / "o.html")], capsys)
    assert f"{default_history} run #3 (latest run)" in html and "this report's run is #3" in html
    assert "(latest run)" in printed


def test_nothing_to_report_names_the_default_history_it_looked_for(
    default_history: Path, tmp_path: Path
) -> None:
    result = run_cli(["report", "--html", str(tmp_path / "o.html")], cwd=tmp_path)
    line = one_line_error(result, default_history)
    assert "nothing to report: give RUN.json files or --history DB (no default history at" in line


SPECS = [("2", 2), ("latest", 3), ("release", 2), (commit_of(0)[:8], 1)]  # an id, latest, a tag, a commit


@pytest.mark.parametrize(("spec", "run_id"), SPECS)
def test_run_picks_the_subject_from_the_history(
    spec: str, run_id: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = tmp_path / "runs.sqlite"
    reports = record_runs(history)
    argv = ["--history", str(history), "--run", spec, "--html", str(tmp_path / "o.html")]
    html, printed = report(argv, capsys)
    assert f"{history} run #{run_id} (--run {spec})" in html and f"this report's run is #{run_id}" in html
    assert reports[run_id - 1]["timestamp_utc"] in html
    assert f"run #{run_id} (--run {spec})" in printed


def test_run_reads_the_default_history_and_sets_run_files_beside_it(
    default_history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = tmp_path / "first.json"
    first.write_text(json.dumps(record_runs(default_history)[0]))
    html, _ = report([str(first), "--run", "nightly", "--html", str(tmp_path / "o.html")], capsys)
    assert f"{default_history} run #3 (--run nightly)" in html  # a tag's newest run
    assert 'id="compare-run0-vs-run1"' in html and "A is <code>" in html


def test_a_run_spec_that_names_nothing_is_one_line(tmp_path: Path) -> None:
    history = tmp_path / "runs.sqlite"
    record_runs(history)
    out = tmp_path / "o.html"
    result = run_cli(["report", "--history", str(history), "--run", "nosuch", "--html", str(out)], cwd=tmp_path)
    line = one_line_error(result, history)
    assert "--run nosuch: 'nosuch' names no run, tag or commit" in line and "nearest tags" in line
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--run", "latest"], "--run latest picks a run from a history: give --history DB (no default history"),
        (["--run", "latest", "--no-history"], "--run latest reads the history: drop --no-history"),
        (["--history", "h.sqlite", "--no-history"], "not allowed with argument --history"),
    ],
)
def test_run_without_a_history_is_one_line(argv: list[str], said: str, tmp_path: Path) -> None:
    result = run_cli(["report", *argv, "--html", str(tmp_path / "o.html")], cwd=tmp_path)
    assert said in one_line_error(result, "")
