"""Start one external command as an argv list (never through a shell) and collect what it printed.

Its stderr is copied line by line to this process's stderr as it arrives: in a worker that
is the file the run reads back after a timeout, so a command that hangs leaves its last
words in the cell's ``worker_output``. The command stays in the worker's process group, so
a cell that outlives ``--timeout`` takes the command down with the worker.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

REQUEST_ENV = "APEX_BENCH_REQUEST"
REQUEST_PLACEHOLDER = "{request}"


@attrs.frozen
class Finished:
    """One finished invocation: exit code, what it printed, how long it took from start to exit."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float


# A command that starts with one of these runs on the interpreter that runs apex-bench (its
# environment, its packages), not on whichever one comes first on PATH.
PYTHON_NAMES = ("python", "python3")


def resolve_executable(program: str, cwd: str | None, path_env: str | None) -> tuple[str | None, str]:
    """(absolute path, "") of ``program``, or (None, why not) for a probe's reason.

    A name with a slash is a path (relative to ``cwd``); ``python`` and ``python3`` are this
    interpreter; another bare name is searched on PATH.
    """
    if program in PYTHON_NAMES:
        return sys.executable, ""
    if "/" in program:
        path = Path(cwd or ".") / program
        if not path.exists():
            return None, f"{program!r} does not exist (looked in {path.parent.resolve()})"
        if not path.is_file():
            return None, f"{program!r} is not a file"
        if not os.access(path, os.X_OK):
            return None, f"{program!r} is not executable (chmod +x {path.resolve()})"
        return str(path.resolve()), ""
    found = shutil.which(program, path=path_env)
    if found is None:
        return None, f"{program!r} not found on PATH (install it, or give its path)"
    return found, ""


def _copy_lines(stream: object, sink: list[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        sink.append(line)
        try:
            sys.stderr.write(line)
            sys.stderr.flush()
        except (OSError, ValueError):
            pass


def run_command(argv: Sequence[str], request: Path, *, cwd: str | None,
                extra_env: Mapping[str, str]) -> Finished:
    """Run ``argv`` with the request's path in ``APEX_BENCH_REQUEST`` (and for ``{request}``); wait for it."""
    args = [arg.replace(REQUEST_PLACEHOLDER, str(request)) for arg in argv]
    if args[0] in PYTHON_NAMES:
        args[0] = sys.executable
    env = {**os.environ, **extra_env, REQUEST_ENV: str(request)}
    started = time.perf_counter()
    process = subprocess.Popen(args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, errors="replace")
    stderr_lines: list[str] = []
    copier = threading.Thread(target=_copy_lines, args=(process.stderr, stderr_lines), daemon=True)
    copier.start()
    assert process.stdout is not None
    try:
        stdout = process.stdout.read()
        returncode = process.wait()
    except BaseException:  # a SIGTERM to the run alone (--inline) would leave the program running
        process.kill()
        process.wait()
        raise
    copier.join()
    return Finished(returncode, stdout, "".join(stderr_lines), time.perf_counter() - started)
