"""Schema versions and migrations, and the files the history refuses with one line naming them."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from apex_core.history import HistoryError, HistoryStore
from apex_core.history.schema import APPLICATION_ID, SCHEMA_VERSION, migrate
from tests.apex_core.history.conftest import make_report, ok_cell

# the runs columns of schema version 1, as released (a migration test must not follow later code)
V1_RUN_COLUMNS = ("recorded_utc", "timestamp_utc", "suite", "status", "git_commit", "git_branch", "git_dirty",
                  "environment_id", "environment_key", "device", "hardware", "report_encoding", "report")


def version_of(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def test_from_version_0_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    path.touch()
    with HistoryStore.open(path) as store:
        store.record(make_report([ok_cell("tilepack", "torch-reference", 0.2)]))
    assert version_of(path) == SCHEMA_VERSION


def test_from_version_0_an_empty_sqlite_database(tmp_path: Path) -> None:
    path = tmp_path / "blank.sqlite"
    sqlite3.connect(path).execute("PRAGMA user_version = 0").connection.close()
    HistoryStore.open(path).close()
    assert version_of(path) == SCHEMA_VERSION


def write_v1_history(path: Path, report: dict) -> None:
    """A history as version 1 wrote it: the report as plain JSON text, no v2 columns."""
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, path, target=1)
    assert int(conn.execute("PRAGMA user_version").fetchone()[0]) == 1
    cell = report["benchmarks"][0]
    conn.execute(f"INSERT INTO runs ({', '.join(V1_RUN_COLUMNS)}) VALUES ({', '.join('?' * 13)})",
                 ("2026-01-01T00:00:00Z", report["timestamp_utc"], "apex-bench", "complete", "f" * 40, "main",
                  0, "0123456789ab", json.dumps({"device": "cpu"}), "cpu", "Test CPU", "json",
                  json.dumps(report)))
    conn.execute("INSERT INTO tags (run_id, tag) VALUES (1, 'old')")
    conn.execute("INSERT INTO cells (run_id, position, workload, case_name, backend, dtype, device, status, "
                 "reason, timing_method, p50_ms, p95_ms, min_ms, mean_ms, gbps, tflops, peak_memory_mb) "
                 "VALUES (1, 0, ?, ?, ?, ?, 'cpu', 'ok', '', 'cpu_perf_counter', ?, ?, ?, ?, ?, ?, ?)",
                 (cell["workload"], cell["case"], cell["backend"], cell["dtype"], cell["stats"]["p50_ms"],
                  cell["stats"]["p95_ms"], cell["stats"]["min_ms"], cell["stats"]["mean_ms"], cell["gbps"],
                  cell["tflops"], cell["peak_memory_mb"]))
    conn.close()


def test_from_version_1_the_new_columns_are_filled_from_the_stored_reports(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    report = make_report([ok_cell("tilepack", "torch-reference", 0.2, energy_j=0.004)])
    write_v1_history(path, report)
    with HistoryStore.open(path) as store:
        old = store.run(1)
        assert old.report == report and old.summary.tags == ("old",)
        (cell,) = old.cells
        assert cell.energy_j_per_call == 0.004
        assert cell.p99_ms == report["benchmarks"][0]["stats"]["p99_ms"]
        assert (cell.units, cell.units_per_s) == ("tiles", report["benchmarks"][0]["tiles_per_s"])
        new = store.record(make_report([ok_cell("tilepack", "torch-reference", 0.3)]))
        assert [p.run_id for p in store.series("p50", workload="tilepack")] == [1, new]
    assert version_of(path) == SCHEMA_VERSION


def test_a_newer_schema_is_refused(history_path: Path) -> None:
    HistoryStore.open(history_path).close()
    conn = sqlite3.connect(history_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(HistoryError) as caught:
        HistoryStore.open(history_path)
    assert str(caught.value) == (f"{history_path}: has history schema version {SCHEMA_VERSION + 1}, newer than "
                                 f"this apex-bench knows ({SCHEMA_VERSION}); upgrade apex-bench or use "
                                 "another file")


def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite"
    path.write_text('{"this": "is a JSON report"}\n')
    with pytest.raises(HistoryError, match="is not an SQLite database") as caught:
        HistoryStore.open(path)
    assert str(caught.value).startswith(f"{path}: ") and "\n" not in str(caught.value)
    assert path.read_text() == '{"this": "is a JSON report"}\n'


def test_another_programs_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE accounts (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(HistoryError, match="not an apex-bench history .*accounts"):
        HistoryStore.open(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    with pytest.raises(HistoryError, match="not an apex-bench history .*application_id 0x0"):
        HistoryStore.open(path)


def test_the_application_id_marks_the_file(history_path: Path) -> None:
    HistoryStore.open(history_path).close()
    conn = sqlite3.connect(history_path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    conn.close()


def test_a_lock_held_past_the_timeout_is_one_line(history_path: Path) -> None:
    store = HistoryStore.open(history_path, timeout_s=0.2)
    holder = sqlite3.connect(history_path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(HistoryError) as caught:
            store.record(make_report([ok_cell("tilepack", "torch-reference", 0.2)]))
        message = str(caught.value)
        assert message.startswith(f"{history_path}: cannot record the run: the history file stayed locked")
        assert "busy timeout of 0.2 s" in message and "\n" not in message
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store.record(make_report([ok_cell("tilepack", "torch-reference", 0.2)]))  # the lock gone, it works
    assert len(store.runs()) == 1
    store.close()


def test_a_lock_on_a_file_not_yet_migrated_fails_the_open(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE IF NOT EXISTS probe (x)")  # a real SQLite file, rollback journal
    holder.execute("DROP TABLE probe")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(HistoryError, match="stayed locked by another process past the busy timeout"):
            HistoryStore.open(path, timeout_s=0.2)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
