"""``HistoryStore``: record runs into the SQLite history and read them back.

One file holds every run of one or more checkouts and machines. Each run is one row of
``runs`` (the whole JSON report, compressed, with its git commit and branch and the gate's
environment key), its tags in ``tags``, and one row per cell in ``cells`` with the metric
columns, so queries never parse JSON. See docs/history.md.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from apex_core.history import rows
from apex_core.history.cards import HistoryCard, history_cards
from apex_core.history.connection import (
    DEFAULT_TIMEOUT_S,
    check_sqlite_header,
    connect,
    translated,
    write_transaction,
)
from apex_core.history.errors import HistoryError
from apex_core.history.model import CellMetrics, Leaderboard, RunSummary, SeriesPoint, StoredRun
from apex_core.history.paths import HISTORY_ENV_VAR, default_history_path
from apex_core.history.queries import leaderboard_query, resolve_spec, series_query
from apex_core.history.schema import migrate

EnvironmentRef = Mapping[str, Any] | str | None

_SUMMARY_SQL = """
    SELECT r.run_id, r.recorded_utc, r.timestamp_utc, r.suite, r.status, r.git_commit, r.git_branch,
           r.git_dirty, r.environment_id, r.environment_key, r.device, r.hardware,
           (SELECT group_concat(tag, char(10)) FROM (SELECT tag FROM tags t WHERE t.run_id = r.run_id
                                                     ORDER BY tag)),
           (SELECT count(*) FROM cells c WHERE c.run_id = r.run_id),
           (SELECT count(*) FROM cells c WHERE c.run_id = r.run_id AND c.status = 'ok')
    FROM runs r"""


def _summary(row: tuple[Any, ...]) -> RunSummary:
    return RunSummary(run_id=row[0], recorded_utc=row[1], timestamp_utc=row[2], suite=row[3], status=row[4],
                      commit=row[5], branch=row[6], dirty=None if row[7] is None else bool(row[7]),
                      environment_id=row[8], environment_key=json.loads(row[9]), device=row[10],
                      hardware=row[11], tags=tuple(row[12].split("\n")) if row[12] else (),
                      cells_total=row[13], cells_ok=row[14])


def _cell(row: tuple[Any, ...]) -> CellMetrics:
    """A row of ``rows.CELL_COLUMNS`` after the position; CellMetrics' fields are in that order."""
    return CellMetrics(**dict(zip(attrs.fields_dict(CellMetrics), row, strict=True)))


def environment_filter(ref: EnvironmentRef) -> str | None:
    """The gate's environment key (as ``environment_identity`` returns it) or an id (a prefix) as an id prefix.

    A report's own ``environment_key`` field lacks the timing methods and the CPU count, so it
    would name no environment of the history: it raises ValueError instead of matching nothing.
    """
    if ref is None:
        return None
    if isinstance(ref, Mapping) and not {"timing_methods", "cpu_count"} <= set(ref):
        raise ValueError("environment_key: give the gate's key (environment_identity(report)[0]) or its id; "
                         "this mapping lacks timing_methods and cpu_count")
    return rows.environment_id_of(ref) if isinstance(ref, Mapping) else str(ref).strip().lower()


def check_history_path(path: Path | str | None = None) -> Path:
    """The history's path (default: ``default_history_path()``); ``HistoryError`` when it names a
    folder or anything but a regular file (reading a FIFO's header would block for ever)."""
    where = Path(path) if path is not None else default_history_path()
    if where.is_dir():
        raise HistoryError(where, "is a directory, not a history file")
    if where.exists() and not where.is_file():
        raise HistoryError(where, "is not a regular file (a device, FIFO or socket), not a history file")
    return where


class HistoryStore:
    """An open history file. Use ``HistoryStore.open(path)``; close it (or use ``with``) when done."""

    def __init__(self, path: Path, conn: sqlite3.Connection, timeout_s: float) -> None:
        self.path = path
        self._conn = conn
        self.timeout_s = timeout_s

    @classmethod
    def open(cls, path: Path | str | None = None, *, create: bool = True,
             timeout_s: float = DEFAULT_TIMEOUT_S) -> HistoryStore:
        """Open (and migrate) the history at ``path`` (default: ``default_history_path()``).

        ``create=False`` refuses a missing file instead of making one (for commands that only read).
        Raises ``HistoryError`` (one line naming the file) when the file is not SQLite, is another
        program's database, stays locked past ``timeout_s``, or has a newer schema than this code.
        """
        where = check_history_path(path)
        if not where.exists():
            if not create:
                raise HistoryError(where, "no history file here (name one with --history or "
                                          f"${HISTORY_ENV_VAR})")
            try:
                where.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise HistoryError(where, f"cannot create its folder ({exc.strerror or exc})") from None
        check_sqlite_header(where)
        conn = connect(where, timeout_s)
        try:
            with translated(where, "cannot read or migrate the history schema", timeout_s):
                migrate(conn, where)
        except BaseException:
            conn.close()
            raise
        return cls(where, conn, timeout_s)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def execute(self, action: str, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one read-only SQL statement (here and for the queries); sqlite errors become HistoryError."""
        with translated(self.path, action, self.timeout_s):
            return self._conn.execute(sql, tuple(params)).fetchall()

    def record(self, report: Mapping[str, Any], tags: Iterable[str] = (), commit: str | None = None,
               branch: str | None = None) -> int:
        """Store one JSON report (as ``report_record`` writes it) with its tags; returns the new run id.

        ``commit`` defaults to the report's ``environment.git.commit``; ``branch`` stays empty when
        not given (``git_revision()`` reads both). The run and its cells are one transaction.
        """
        names = tuple(dict.fromkeys(rows.check_tag(t) for t in tags))
        try:
            rows.check_report(report)
        except ValueError as exc:
            raise HistoryError(self.path, f"cannot record the run: {exc}") from None
        run_row = rows.run_row(report, commit, branch)
        cell_rows = [rows.cell_row(i, c) for i, c in enumerate(report["benchmarks"])]
        placeholders = ", ".join("?" * len(rows.CELL_COLUMNS))
        with translated(self.path, "cannot record the run", self.timeout_s), write_transaction(self._conn):
            cursor = self._conn.execute(
                f"INSERT INTO runs ({', '.join(rows.RUN_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(rows.RUN_COLUMNS))})", run_row)
            run_id = int(cursor.lastrowid or 0)
            self._conn.executemany("INSERT INTO tags (run_id, tag) VALUES (?, ?)",
                                   [(run_id, name) for name in names])
            self._conn.executemany(
                f"INSERT INTO cells (run_id, {', '.join(rows.CELL_COLUMNS)}) VALUES (?, {placeholders})",
                [(run_id, *row) for row in cell_rows])
        return run_id

    def runs(self, environment_key: EnvironmentRef = None, tag: str | None = None,
             commit: str | None = None, limit: int | None = None,
             run_id: int | None = None) -> tuple[RunSummary, ...]:
        """Recorded runs, newest first, filtered by environment (key or id prefix), tag, commit prefix, id."""
        conditions = {"r.run_id = ?": None if run_id is None else int(run_id),
                      "r.environment_id LIKE ? || '%'": environment_filter(environment_key) or None,
                      "EXISTS (SELECT 1 FROM tags t WHERE t.run_id = r.run_id AND t.tag = ?)": tag,
                      "lower(r.git_commit) LIKE ? || '%'": commit.strip().lower() if commit else None}
        where = {condition: value for condition, value in conditions.items() if value is not None}
        sql = _SUMMARY_SQL + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY r.run_id DESC"
        if limit is not None:
            sql += f" LIMIT {max(int(limit), 0)}"
        return tuple(_summary(r) for r in self.execute("cannot list the runs", sql, where.values()))

    def run(self, run_id: int) -> StoredRun:
        """One run with its cells and its whole report; HistoryError when no run has that id."""
        found = self.execute("cannot read the run", _SUMMARY_SQL + " WHERE r.run_id = ?", (int(run_id),))
        if not found:
            last = self.execute("cannot read the run", "SELECT max(run_id) FROM runs")[0][0]
            newest = f"the newest run id is {last}" if last else "no runs yet"
            raise HistoryError(self.path, f"no run {run_id} ({newest})")
        cells = self.execute("cannot read the run's cells", f"SELECT {', '.join(rows.CELL_COLUMNS[1:])} FROM "
                             "cells WHERE run_id = ? ORDER BY position", (int(run_id),))
        encoding, blob = self.execute("cannot read the run's report", "SELECT report_encoding, report FROM "
                                      "runs WHERE run_id = ?", (int(run_id),))[0]
        try:
            report = rows.decode_report(encoding, blob)
        except (zlib.error, ValueError, TypeError) as exc:  # JSON and UTF-8 errors are ValueErrors
            raise HistoryError(self.path, f"run {run_id}: the stored report is unreadable ({exc})") from None
        return StoredRun(summary=_summary(found[0]), cells=tuple(_cell(c) for c in cells), report=report)

    def tags(self) -> tuple[str, ...]:
        """Every tag in the history, each once, newest use first."""
        found = self.execute("cannot list the tags",
                             "SELECT tag FROM tags GROUP BY tag ORDER BY max(run_id) DESC")
        return tuple(r[0] for r in found)

    def commits(self) -> tuple[str, ...]:
        """Every recorded commit, each once, newest run first."""
        found = self.execute("cannot list the commits", "SELECT git_commit FROM runs WHERE git_commit "
                             "IS NOT NULL GROUP BY git_commit ORDER BY max(run_id) DESC")
        return tuple(r[0] for r in found)

    def resolve(self, spec: str, environment_key: EnvironmentRef = None) -> tuple[RunSummary, ...]:
        """The runs ``spec`` names: ``latest``, a run id, a TAG, or a COMMIT (prefix of 4+ hex digits).

        Tried in that order; newest first. ``environment_key`` (a key or an id) narrows every
        form except a run id. Raises ``HistoryError`` listing the nearest tags and commits when
        nothing matches, and when a commit prefix names several commits.
        """
        return resolve_spec(self, spec, environment_filter(environment_key))

    def series(self, metric: str, *, workload: str | None = None, case: str | None = None,
               backend: str | None = None, dtype: str | None = None, device: str | None = None,
               environment_key: EnvironmentRef = None, limit: int | None = None) -> tuple[SeriesPoint, ...]:
        """A metric's values in the ok cells that match, oldest run first (the last ``limit`` runs).

        ``metric`` is a cells column (``p50_ms``, ``gbps``, ...) or a short name (``p50``, ``energy``);
        points of different cells or environments are told apart by ``SeriesPoint.cell_key``.
        """
        return series_query(self, metric, dict(workload=workload, case_name=case, backend=backend,
                                               dtype=dtype, device=device),
                            environment_filter(environment_key), limit)

    def leaderboard(self, environment_key: EnvironmentRef, workload: str | None = None,
                    last: int = 5, normalize: bool = False) -> Leaderboard:
        """Backends ranked by p50 per workload, case and dtype in one environment, and overall, from
        each backend's ``last`` most recent ok cells per group (how: ``leaderboard.py``, docs/history.md);
        ``normalize`` first scales every p50 to the newest run's card (``cards.py``)."""
        return leaderboard_query(self, environment_filter(environment_key), workload, last, normalize)

    def cards(self, model: str | None = None) -> tuple[HistoryCard, ...]:
        """Every card the runs name (of one GPU model, or all), its figures the medians over its runs."""
        return history_cards(self, model)

