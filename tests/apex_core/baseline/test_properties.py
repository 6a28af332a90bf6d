"""Property tests: emit, compare, promote and attest read every report a run can produce.

A report may be refused (exit 2, one line: no ok cell, runs that disagree), a gate may fail
(exit 1); nothing reaches an internal error (exit 3) and every answer is one of those.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from apex_core.report.formats import record_json
from tests.apex_core.report_strategies import run_cli, runs_of_one_build

READERS = settings(derandomize=True, database=None, deadline=None, max_examples=80,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def written(folder: Path, records: list[dict]) -> list[Path]:
    paths = [folder / f"run{i}.json" for i in range(len(records))]
    for path, record in zip(paths, records, strict=True):
        path.write_text(record_json(record), encoding="utf-8")
    return paths


@READERS
@given(runs_of_one_build())
def test_emit_compare_promote_and_attest_answer_every_report(records: list[dict]) -> None:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        runs = written(folder, records)
        baseline, summary = folder / "baseline.json", folder / "summary.json"
        code, text = run_cli("baseline", "emit", "--allow-partial", "--from", *runs, "--output", baseline)
        assert code in (0, 2) and (code == 0) == baseline.exists(), text
        if code == 0:
            code, text = run_cli("compare", "--baseline", baseline, "--current", runs[0], "--summary", summary,
                                 "--markdown", folder / "compare.md", "--trend-output", folder / "trend.json")
            assert code in (0, 1, 2), text
            code, text = run_cli("baseline", "promote", "--baseline", baseline, "--runs", *runs,
                                 "--output", folder / "promoted.json")
            assert code in (0, 2), text
            code, text = run_cli("report", "--html", folder / "report.html", "--baseline", baseline, *runs[:2])
            assert code in (0, 2), text
        gate = ("--summary", summary) if summary.exists() else ()
        code, text = run_cli("attest", "--report", runs[0], *gate, "--output-json", folder / "attest.json",
                             "--output-md", folder / "attest.md")
        assert code in (0, 1), text
