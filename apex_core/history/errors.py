"""Errors of the run history: usage errors (exit 2), one line each, naming the history file."""

from __future__ import annotations

from pathlib import Path

from apex_core.errors import UsageError


class HistoryError(UsageError):
    """The history file is unusable (not SQLite, locked, too new) or a query names nothing in it."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = str(path)
        self.problem = " ".join(str(problem).split())  # one line, whatever sqlite or the caller said
        super().__init__(f"{self.path}: {self.problem}")
