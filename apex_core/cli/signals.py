"""Ctrl-C and SIGTERM end a run the same way (partial report kept), with the shell's exit codes.

The first one stops the run; any later one, while the run writes its partial report, closes
its workers and records its history, is ignored with a note: a second Ctrl-C raised inside
that shutdown would lose the report's last write or end the process by the signal itself.
"""

from __future__ import annotations

import os
import signal
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the run is, so it unwinds like Ctrl-C."""


_STOPPING_NOTE = b"apex-bench: already stopping (writing the partial report); wait for it to finish\n"


def _already_stopping(_signum: int, _frame: Any) -> None:
    # os.write, not print: a handler that prints while the main thread prints raises RuntimeError
    os.write(2, _STOPPING_NOTE)


def _stop(signum: int, _frame: Any) -> None:
    signal.signal(signal.SIGINT, _already_stopping)
    signal.signal(signal.SIGTERM, _already_stopping)
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


def handle_stop_signals() -> None:
    """From now on the first SIGINT or SIGTERM raises in the main thread (``KeyboardInterrupt``,
    ``Terminated``) and every later one is ignored, so the shutdown it starts runs to the end."""
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)


def keep_ignoring_if_stopping() -> None:
    """After a stop, ignore the signals for the rest of the process at the system level.

    The interpreter puts back the default action of every signal with a Python handler
    while it exits (tearing down torch and the modules can take a while), so a late Ctrl-C
    would end it by the signal, not with 130; an ignored signal stays ignored.
    """
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is _already_stopping:
            signal.signal(signum, signal.SIG_IGN)


def interrupted_exit_code(exc: KeyboardInterrupt) -> int:
    """143 after SIGTERM, 130 after Ctrl-C (128 + the signal's number)."""
    return 128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)
