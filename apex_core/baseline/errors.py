"""Errors of the baseline files and the gate: usage errors (exit 2) that name the file and the field."""

from __future__ import annotations

from pathlib import Path

from apex_core.errors import UsageError


class InputFileError(UsageError):
    """A baseline or report file is unreadable, malformed, or holds a bad field."""

    def __init__(self, path: Path | str, field: str | None, problem: str) -> None:
        self.path = str(path)
        self.field = field
        self.problem = " ".join(problem.split())  # one line, whatever the cause said
        where = f"{self.path}: field {field}: " if field else f"{self.path}: "
        super().__init__(where + self.problem)


class EnvironmentMismatchError(InputFileError):
    """The report was measured where the baseline's numbers do not apply (``--force`` overrides)."""
