"""What each format writes for fixed records stays as it is (tests/golden/README.md).

A run (JSON, Markdown, HTML), a second build of it against a baseline emitted from the first
(the compare's summary, Markdown and trend), the two runs side by side in one HTML report, and
both in a history (list, show, trend): each output is compared, whole, with its file under
tests/golden/expected/, after the parts that change from one writing to the next (the time it
was written, this checkout's version) are masked. ``APEX_BENCH_UPDATE_GOLDEN=1`` rewrites the
files instead: the diff is then the change to review.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from pathlib import Path

import pytest

from apex_core.cli.main import main as cli_main
from apex_core.engine.sweep_report import SWEEP_FORMATS
from apex_core.history import HistoryStore
from apex_core.report.writer import ReportWriter
from tests.golden import records

EXPECTED = Path(__file__).parent / "expected"
UPDATE = os.environ.get("APEX_BENCH_UPDATE_GOLDEN") == "1"
# what differs between two writings of one record: the clock, the temporary folder, the version
VOLATILE = (
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"/[^\s\"'<>]*/golden-tmp"), "<tmp>"),
)


def _masked(text: str, tmp: Path) -> str:
    text = text.replace(str(tmp), "/golden-tmp")
    for pattern, mask in VOLATILE:
        text = pattern.sub(mask, text)
    return text


def _cli(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            cli_main(list(args))
        except SystemExit as stop:
            assert stop.code in (0, 1, None), f"apex-bench {' '.join(args)} exited {stop.code}"
    return out.getvalue()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every output, by the name of its expected file, masked."""
    tmp = tmp_path_factory.mktemp("golden")
    runs = {"run-a": records.report(), "run-b": records.report(slower=1.5, timestamp="2026-11-28T10:00:00Z")}
    for name, report in runs.items():
        files = {"json": tmp / f"{name}.json", "markdown": tmp / f"{name}.md", "html": tmp / f"{name}.html",
                 "csv": tmp / f"{name}.csv"}
        ReportWriter(files).write(report)
    sweep = {"json": tmp / "sweep.json", "markdown": tmp / "sweep.md", "csv": tmp / "sweep.csv"}
    ReportWriter(sweep, SWEEP_FORMATS).write(records.sweep_report())
    _cli("baseline", "emit", "--from", str(tmp / "run-a.json"), "--output", str(tmp / "baseline.json"))
    compare_text = _cli("compare", "--baseline", str(tmp / "baseline.json"),
                        "--current", str(tmp / "run-b.json"), "--summary", str(tmp / "compare-summary.json"),
                        "--markdown", str(tmp / "compare.md"),
                        "--trend-output", str(tmp / "compare-trend.json"))
    history = tmp / "history.sqlite"
    with pytest.MonkeyPatch.context() as env:  # the default history, not yet written: the page says so
        env.setenv("APEX_BENCH_HISTORY", str(history))
        _cli("report", str(tmp / "run-a.json"), str(tmp / "run-b.json"),
             "--html", str(tmp / "side-by-side.html"))
    with HistoryStore.open(history) as store:
        for name in runs:
            store.record(json.loads((tmp / f"{name}.json").read_text(encoding="utf-8")), tags=[name])
    texts = {path.name: path.read_text(encoding="utf-8") for path in sorted(tmp.iterdir())
             if path.suffix in (".json", ".md", ".html", ".csv")}
    texts["compare.txt"] = compare_text
    texts["history-list.txt"] = _cli("history", "list", "--history", str(history))
    texts["history-show.txt"] = _cli("history", "show", "run-b", "--history", str(history))
    texts["history-trend.txt"] = _cli("history", "trend", "p50_ms", "--history", str(history),
                                      "--min-segment", "1")
    return {name: _masked(text, tmp) for name, text in texts.items()}


NAMES = ("run-a.json", "run-a.md", "run-a.html", "run-a.csv", "run-b.json", "run-b.md", "baseline.json",
         "compare-summary.json", "compare.md", "compare-trend.json", "compare.txt", "side-by-side.html",
         "history-list.txt", "history-show.txt", "history-trend.txt", "sweep.json", "sweep.md", "sweep.csv")


@pytest.mark.parametrize("name", NAMES)
def test_each_format_writes_what_it_wrote_before(outputs: dict[str, str], name: str) -> None:
    expected = EXPECTED / name
    if UPDATE:
        EXPECTED.mkdir(exist_ok=True)
        expected.write_text(outputs[name], encoding="utf-8")
    assert expected.exists(), f"no {expected}: write it with APEX_BENCH_UPDATE_GOLDEN=1 and review it"
    assert outputs[name] == expected.read_text(encoding="utf-8"), (
        f"{name} changed; if the change is meant, rewrite tests/golden/expected with "
        "APEX_BENCH_UPDATE_GOLDEN=1 and review the diff")
