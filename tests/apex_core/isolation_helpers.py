"""Helpers of the isolation tests: live processes by marker, and CLI runs that may be signalled."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from apex_core.report.schema import validate_report

FAST = ["--min-time", "0.02", "--max-time", "0.2", "--warmup", "2"]


def processes_with(marker: str) -> list[int]:
    """Pids of live processes whose environment carries ``marker`` (a run's own and every child's)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def commands_with(marker: str) -> list[str]:
    """The command lines of the processes ``processes_with`` finds."""
    commands = []
    for pid in processes_with(marker):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                commands.append(handle.read().replace(b"\0", b" ").decode(errors="replace").strip())
        except OSError:
            continue
    return commands


def wait_until_gone(marker: str, seconds: float = 10.0) -> list[int]:
    """The marked processes still alive after up to ``seconds`` (killed ones take a moment to go)."""
    deadline = time.monotonic() + seconds
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    return processes_with(marker)


def load(path: Path) -> dict:
    record = json.loads(path.read_text())
    validate_report(record)
    return record


def start_cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """``apex-bench`` in a session of its own (so a test can signal its group as a terminal would)."""
    return subprocess.Popen([sys.executable, "-m", "apex_core.cli.main", *args], cwd=cwd,
                            env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def signal_run(process: subprocess.Popen[str], sig: int) -> None:
    """Signal a run started by ``start_cli`` as a user would: Ctrl-C reaches the terminal's whole
    foreground group, SIGTERM (or SIGKILL) only apex-bench itself."""
    if sig == signal.SIGINT:
        os.killpg(process.pid, sig)
    else:
        process.send_signal(sig)


def wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {seconds:g} s")
        time.sleep(0.1)


def kill_leftovers(process: subprocess.Popen[str], marker: str) -> None:
    """Cleanup after a failed test: the run's group and anything else carrying the marker."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
    for pid in processes_with(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
