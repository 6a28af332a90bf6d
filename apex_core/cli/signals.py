"""Ctrl-C and SIGTERM end a run the same way (partial report kept), with the shell's exit codes."""

from __future__ import annotations

import signal
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the run is, so it unwinds like Ctrl-C."""


def _raise_terminated(_signum: int, _frame: Any) -> None:
    raise Terminated


def handle_sigterm() -> None:
    """From now on SIGTERM raises ``Terminated`` in the main thread."""
    signal.signal(signal.SIGTERM, _raise_terminated)


def interrupted_exit_code(exc: KeyboardInterrupt) -> int:
    """143 after SIGTERM, 130 after Ctrl-C (128 + the signal's number)."""
    return 128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)
