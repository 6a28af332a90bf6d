"""Progress display: a live bar on a terminal, one plain line per cell otherwise."""

from __future__ import annotations

import sys
from typing import Any

import rich.progress
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn

from apex_core.plan import PlannedCell
from apex_core.results import CellResult, Status


def describe(result: CellResult) -> str:
    """A short human line for a finished cell."""
    if result.status == Status.OK and result.timing is not None:
        stats = result.timing.stats
        return f"ok  p50 {stats.p50:.4g} ms  p95 {stats.p95:.4g} ms  ({stats.n} samples)"
    kind = f" ({result.skip_kind})" if result.skip_kind else ""
    return f"{result.status}{kind}: {result.reason}"


class Progress:
    """Reports cell i of n; uses rich's live display only when stderr is a terminal."""

    def __init__(self, quiet: bool = False, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.live = not quiet and self.stream.isatty()
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.live:
            self._progress = rich.progress.Progress(
                TextColumn("[bold]apex-bench"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.description}"), console=Console(file=self.stream),
                transient=True,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task("", total=None)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def __call__(self, index: int, total: int, cell: PlannedCell, result: CellResult | None) -> None:
        if self.quiet:
            return
        if result is None:
            if self._progress is not None:
                self._progress.update(self._task, total=total, completed=index, description=cell.label)
            return
        line = f"[{index + 1}/{total}] {cell.label}: {describe(result)}"
        if self._progress is None:
            print(line, file=self.stream, flush=True)
        else:
            self._progress.update(self._task, completed=index + 1)
            self._progress.console.print(line, markup=False, highlight=False)
