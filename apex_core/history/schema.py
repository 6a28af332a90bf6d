"""The history's schema: numbered migrations applied in order, the version kept in ``PRAGMA user_version``.

Version 0 is an empty file. Each migration moves the file up by one version inside the same
``BEGIN IMMEDIATE`` transaction that sets the new version, so two processes opening an old
file at once migrate it once, and a failed migration leaves the file as it was. A migration is
frozen once released: it must not call code that may change later (it reads the stored report
with its own few lines, not with ``rows.py``). A file newer than ``SCHEMA_VERSION`` is refused.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apex_core.history.connection import write_transaction
from apex_core.history.errors import HistoryError

# "APXB": marks the file as an apex-bench history (PRAGMA application_id, in the SQLite header)
APPLICATION_ID = 0x41505842


def _create_v1(conn: sqlite3.Connection) -> None:
    """Runs, their tags and one row per cell with the time statistics and memory."""
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("""
        CREATE TABLE runs (
            run_id INTEGER PRIMARY KEY AUTOINCREMENT,
            recorded_utc TEXT NOT NULL,
            timestamp_utc TEXT NOT NULL,
            suite TEXT NOT NULL,
            status TEXT NOT NULL,
            git_commit TEXT,
            git_branch TEXT,
            git_dirty INTEGER,
            environment_id TEXT NOT NULL,
            environment_key TEXT NOT NULL,
            device TEXT,
            hardware TEXT,
            report_encoding TEXT NOT NULL,
            report BLOB NOT NULL
        )""")
    conn.execute("""
        CREATE TABLE tags (
            run_id INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
            tag TEXT NOT NULL,
            PRIMARY KEY (run_id, tag)
        )""")
    conn.execute("""
        CREATE TABLE cells (
            run_id INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            workload TEXT NOT NULL,
            case_name TEXT NOT NULL,
            backend TEXT NOT NULL,
            dtype TEXT NOT NULL,
            device TEXT NOT NULL,
            status TEXT NOT NULL,
            reason TEXT NOT NULL DEFAULT '',
            timing_method TEXT,
            p50_ms REAL,
            p95_ms REAL,
            min_ms REAL,
            mean_ms REAL,
            gbps REAL,
            tflops REAL,
            peak_memory_mb REAL,
            PRIMARY KEY (run_id, position)
        )""")
    conn.execute("CREATE INDEX tags_by_name ON tags(tag)")
    conn.execute("CREATE INDEX runs_by_environment ON runs(environment_id, run_id)")
    conn.execute("CREATE INDEX runs_by_commit ON runs(git_commit)")
    conn.execute("CREATE INDEX cells_by_identity ON cells(workload, case_name, backend, dtype)")


def _stored_report(encoding: str, blob: Any) -> dict[str, Any]:
    data = zlib.decompress(blob) if encoding == "zlib-json" else blob
    return json.loads(data if isinstance(data, str) else bytes(data).decode("utf-8"))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


_V2_THROUGHPUT = {"tiles": "tiles_per_s", "tokens": "tokens_per_s", "elements": "elements_per_s",
                  "frames": "frames_per_s"}


def _add_v2_columns(conn: sqlite3.Connection) -> None:
    """Throughput in the workload's units, p90/p99 and energy per call, filled in from the stored reports."""
    for column, kind in (("p90_ms", "REAL"), ("p99_ms", "REAL"), ("units", "TEXT"),
                         ("units_per_s", "REAL"), ("energy_j_per_call", "REAL")):
        conn.execute(f"ALTER TABLE cells ADD COLUMN {column} {kind}")
    for run_id, encoding, blob in conn.execute(
            "SELECT run_id, report_encoding, report FROM runs").fetchall():
        cells = _stored_report(encoding, blob).get("benchmarks") or []
        for position, cell in enumerate(cells):
            stats = cell.get("stats") or {}
            units = cell.get("units")
            energy = (cell.get("telemetry") or {}).get("energy_j_per_call")
            conn.execute(
                "UPDATE cells SET p90_ms = ?, p99_ms = ?, units = ?, units_per_s = ?, energy_j_per_call = ? "
                "WHERE run_id = ? AND position = ?",
                (_number(stats.get("p90_ms")), _number(stats.get("p99_ms")),
                 units if isinstance(units, str) else None,
                 _number(cell.get(_V2_THROUGHPUT.get(str(units), ""))), _number(energy), run_id, position))


def _positive(value: Any) -> float | None:
    number = _number(value)
    return number if number is not None and number > 0 else None


def _v3_card(report: dict[str, Any]) -> tuple[Any, ...]:
    """(model, uuid, copy_gbps, sm_clock_mhz) of a stored report's fingerprint; all None without one
    or when it does not name its GPU model."""
    environment = report.get("environment")
    facts = environment.get("device_facts") if isinstance(environment, dict) else None
    if not isinstance(facts, dict):
        return (None, None, None, None)
    found = facts.get("fingerprint")
    if not isinstance(found, dict):  # reports from before it was stored: the facts it is made of
        identity, clock = facts.get("identity"), facts.get("clock")
        spin = clock.get("spin_cycles_per_us") if isinstance(clock, dict) else None
        found = {**(identity if isinstance(identity, dict) else {}), "copy_gbps": facts.get("copy_gbps"),
                 "sm_clock_under_load_mhz": spin}
    model, uuid = found.get("gpu"), found.get("uuid")
    if not isinstance(model, str) or not model.strip():
        return (None, None, None, None)
    return (model, uuid if isinstance(uuid, str) and uuid else None, _positive(found.get("copy_gbps")),
            _positive(found.get("sm_clock_under_load_mhz")))


def _add_v3_card_columns(conn: sqlite3.Connection) -> None:
    """Each run's card (model, UUID, measured copy bandwidth, SM clock under load) and each cell's
    launch-bound flag and timer floor, filled in from the stored reports: what scales a run's times to
    another card of its model without reading its report."""
    for column, kind in (("card_model", "TEXT"), ("card_uuid", "TEXT"), ("copy_gbps", "REAL"),
                         ("sm_clock_mhz", "REAL")):
        conn.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")
    for column, kind in (("launch_bound", "INTEGER"), ("timer_floor_ms", "REAL")):
        conn.execute(f"ALTER TABLE cells ADD COLUMN {column} {kind}")
    for run_id, encoding, blob in conn.execute(
            "SELECT run_id, report_encoding, report FROM runs").fetchall():
        report = _stored_report(encoding, blob)
        conn.execute("UPDATE runs SET card_model = ?, card_uuid = ?, copy_gbps = ?, sm_clock_mhz = ? "
                     "WHERE run_id = ?", (*_v3_card(report), run_id))
        for position, cell in enumerate(report.get("benchmarks") or []):
            bound = cell.get("launch_bound")
            conn.execute("UPDATE cells SET launch_bound = ?, timer_floor_ms = ? "
                         "WHERE run_id = ? AND position = ?",
                         (int(bound) if isinstance(bound, bool) else None, _number(cell.get("timer_floor_ms")),
                          run_id, position))
    conn.execute("CREATE INDEX runs_by_card ON runs(card_model, card_uuid)")


# version reached -> migration from the version before; applied in order, never edited once released
MIGRATIONS: tuple[tuple[int, Callable[[sqlite3.Connection], None]], ...] = (
    (1, _create_v1),
    (2, _add_v2_columns),
    (3, _add_v3_card_columns),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _check_ours(conn: sqlite3.Connection, path: Path, version: int) -> None:
    if version == 0:
        tables = [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        if tables:
            raise HistoryError(path, f"is an SQLite database but not an apex-bench history "
                                     f"(it holds tables {', '.join(sorted(tables)[:5])})")
        return
    application_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
    if application_id != APPLICATION_ID:
        raise HistoryError(path, f"is an SQLite database but not an apex-bench history "
                                 f"(application_id {application_id:#x})")
    if version > SCHEMA_VERSION:
        raise HistoryError(path, f"has history schema version {version}, newer than this apex-bench "
                                 f"knows ({SCHEMA_VERSION}); upgrade apex-bench or use another file")


def migrate(conn: sqlite3.Connection, path: Path, target: int = SCHEMA_VERSION) -> int:
    """Bring the file up to ``target`` (default: the current version); returns the version it had."""
    conn.execute("BEGIN")  # one snapshot for the version and the tables: another opener may be migrating
    try:
        found = schema_version(conn)
        _check_ours(conn, path, found)
    finally:
        conn.execute("COMMIT")
    if found >= target:
        return found
    with write_transaction(conn):
        found = schema_version(conn)  # another process may have migrated while this one waited
        _check_ours(conn, path, found)
        for version, step in MIGRATIONS:
            if found < version <= target:
                step(conn)
                conn.execute(f"PRAGMA user_version = {version}")
    return found
