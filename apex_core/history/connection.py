"""Open the SQLite file for several writers at once, and turn sqlite's errors into one-line HistoryErrors.

WAL lets readers go on while one process writes; the busy timeout makes a writer wait for
another's transaction instead of failing at once; every write is one ``BEGIN IMMEDIATE``
transaction, so two writers never both hold a read lock and then deadlock upgrading it.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from apex_core.history.errors import HistoryError

# Long enough to outlast another process's write (milliseconds) and a migration (seconds),
# short enough that a file left locked by a stuck process fails the run's history step soon.
DEFAULT_TIMEOUT_S = 30.0

SQLITE_HEADER = b"SQLite format 3\x00"


def check_sqlite_header(path: Path) -> None:
    """Refuse a non-empty file that is not SQLite before sqlite reads (or rewrites) any of it."""
    try:
        with path.open("rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise HistoryError(path, f"cannot read the history file ({exc.strerror or exc})") from None
    if head and head != SQLITE_HEADER:
        raise HistoryError(path, "is not an SQLite database (an apex-bench history is one); "
                                 "name another file with --history or $APEX_BENCH_HISTORY")


def describe(exc: sqlite3.Error, action: str, timeout_s: float) -> str:
    """What went wrong, in words a person can act on, with sqlite's own message at the end."""
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
        return (f"{action}: the history file stayed locked by another process past the busy "
                f"timeout of {timeout_s:g} s (sqlite: {text})")
    if "not a database" in text or "malformed" in text:
        return f"{action}: the file is not an SQLite database or is corrupt (sqlite: {text})"
    return f"{action} (sqlite: {text})"


@contextmanager
def translated(path: Path, action: str, timeout_s: float) -> Iterator[None]:
    """Inside, any sqlite error becomes a HistoryError naming the file."""
    try:
        yield
    except sqlite3.Error as exc:
        raise HistoryError(path, describe(exc, action, timeout_s)) from None


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def _enter_wal(conn: sqlite3.Connection, timeout_s: float) -> None:
    """Switch the file to WAL, retrying while another process holds it: the switch does not wait.

    Measured: three processes opening one new file at once failed this step at once with
    "database is locked" in about one open in ten, the busy handler notwithstanding.
    "wal" stays on in the file once set; a file system that cannot share memory maps (some
    network mounts) answers with another mode, and the busy timeout still serializes writers.
    """
    deadline = time.monotonic() + timeout_s
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
            return
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause * (0.5 + random.random()))  # jitter: two waiting openers do not retry in step
        pause = min(pause * 2, 0.1)


def connect(path: Path, timeout_s: float) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL journal, busy timeout."""
    with translated(path, "cannot open the history", timeout_s):
        conn = sqlite3.connect(str(path), timeout=timeout_s, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            _enter_wal(conn, timeout_s)
            # in WAL mode NORMAL loses at most the last commits on power loss, never consistency
            conn.execute("PRAGMA synchronous = NORMAL")
        except BaseException:
            conn.close()
            raise
    return conn


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
