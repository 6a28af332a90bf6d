"""Property tests: the history records, lists, shows, trends and ranks every report a run can produce."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from apex_core.history import HistoryStore
from tests.apex_core.report_strategies import run_cli, runs_of_one_build

READERS = settings(derandomize=True, database=None, deadline=None, max_examples=80,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@READERS
@given(runs_of_one_build())
def test_every_run_is_recorded_and_every_history_view_reads_it(records: list[dict]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        history = Path(folder) / "history.sqlite"
        with HistoryStore.open(history) as store:
            ids = [store.record(json.loads(json.dumps(r))) for r in records]
            stored = [len(store.run(i).report["benchmarks"]) for i in ids]
            assert stored == [len(r["benchmarks"]) for r in records]
        for args in (("history", "list"), ("history", "show", "latest"), ("history", "trend", "p50_ms"),
                     ("history", "trend", "gbps"), ("leaderboard",)):
            code, text = run_cli(*args, "--history", history)
            assert code == 0, text
