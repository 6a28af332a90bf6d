"""Fixtures shared by the command line's tests."""

from __future__ import annotations

import signal

import pytest


@pytest.fixture()
def restored_handlers():
    """SIGINT's and SIGTERM's handlers as they were before the test (the CLI installs its own)."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)
