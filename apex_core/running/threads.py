"""The threads that drive worker processes, and a wait for their end that a Ctrl-C cannot fool.

A Ctrl-C (or the run's SIGTERM) raises in the main thread wherever it is, and while a run
lasts that is mostly inside a wait for its slots' threads. Interrupted inside
``Thread.join``, Python 3.11 and 3.12 release the joined thread's state lock on its
behalf and mark it stopped though it still runs (the fix of bpo-45274 assumes the join
had taken the lock). The run then saw no thread left to wait for and tore the workers
down while a slot's thread was still discarding its own: both closed one pipe, and the
second close ended the run with ``OSError: [Errno 9] Bad file descriptor`` instead of
its partial report and exit code 143. A ``DrivingThread``'s end is an Event its target
sets last, and a wait on an Event that a signal interrupts leaves it as it was.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class DrivingThread:
    """A daemon thread running ``target(*args)``, whose end ``is_alive`` and ``join`` read from an
    Event the target sets when it returns or raises."""

    def __init__(self, target: Callable[..., Any], *args: Any, name: str) -> None:
        self._target = target
        self._args = args
        self._done = threading.Event()
        self._started = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        try:
            self._target(*self._args)
        finally:
            self._done.set()

    def start(self) -> None:
        # before: a Ctrl-C inside Thread.start (it waits for the new thread to run) leaves a thread
        # that runs and is waited for; one that could not start at all is not
        self._started = True
        try:
            self._thread.start()
        except RuntimeError:
            self._started = False
            raise

    def is_alive(self) -> bool:
        """True from ``start`` until the target has returned or raised."""
        return self._started and not self._done.is_set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` s for the target to end; True when it has (or was never started)."""
        return not self._started or self._done.wait(timeout)
