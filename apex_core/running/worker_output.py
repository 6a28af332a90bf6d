"""What a worker wrote to standard error, kept so a crash or a timeout can say where it happened.

The worker's fd 2 points at a file the run creates (and unlinks once the worker has
opened it, so nothing is left behind). The run empties it before each request and
reads its tail back when the worker dies or is killed: the last lines of output and,
after a fatal signal or a timeout, faulthandler's Python traceback.
"""

from __future__ import annotations

import contextlib
import os
import re
import sysconfig
import tempfile
import traceback

# How much of the output goes to the log file, and how much into the report's record.
LOG_TAIL_LINES, LOG_TAIL_BYTES = 40, 4096
REPORT_TAIL_LINES, REPORT_TAIL_BYTES = 20, 2000

_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+ ")
_STDLIB = tuple(p for p in {sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib")} if p)


class WorkerOutput:
    """The file one worker's standard error goes to."""

    def __init__(self) -> None:
        self._fd, self.path = tempfile.mkstemp(prefix="apex-bench-worker-", suffix=".stderr")
        self._linked = True

    def unlink(self) -> None:
        """Remove the name once the worker holds the file open (the data stays readable)."""
        if self._linked:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            self._linked = False

    def clear(self) -> None:
        """Empty the file (the worker appends, so it goes on writing at the new end)."""
        os.ftruncate(self._fd, 0)

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def tail(self, max_lines: int = LOG_TAIL_LINES, max_bytes: int = LOG_TAIL_BYTES) -> str:
        """The last ``max_lines`` lines of at most ``max_bytes`` bytes ("" when there is none)."""
        size = self.size()
        start = max(0, size - max_bytes)
        data = os.pread(self._fd, size - start, start)
        lines = data.decode("utf-8", errors="replace").splitlines()
        if start > 0 and lines:
            lines = lines[1:]  # the first line was cut in the middle
        return "\n".join(_without_watcher(lines)[-max_lines:]).strip()

    def close(self) -> None:
        # a run being stopped may close one worker's output from two threads (the slot whose
        # worker died, and the main thread tearing the pools down): take the fd first, once
        self.unlink()
        fd, self._fd = self._fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


def _without_watcher(lines: list[str]) -> list[str]:
    """Drop the stack of the worker's parent-watching thread from a faulthandler dump (it only waits)."""
    kept: list[str] = []
    skipping = False
    for index, line in enumerate(lines):
        if _THREAD.match(line.strip()):
            frame = _FRAME.match(lines[index + 1] if index + 1 < len(lines) else "")
            skipping = bool(frame and frame["path"].endswith("worker_process.py") and frame["func"] == "poll")
        elif skipping and not _FRAME.match(line):
            skipping = False
            if not line.strip():
                continue  # the blank line after the skipped stack
        if not skipping:
            kept.append(line)
    return kept


def _is_stdlib(path: str) -> bool:
    return any(path.startswith(prefix) for prefix in _STDLIB)


def _thread_stacks(text: str) -> list[list[re.Match[str]]]:
    """faulthandler's stacks, innermost frame first, one list per thread."""
    stacks: list[list[re.Match[str]]] = []
    for line in text.splitlines():
        if _THREAD.match(line.strip()):
            stacks.append([])
        elif stacks:
            frame = _FRAME.match(line)
            if frame:
                stacks[-1].append(frame)
    return [s for s in stacks if s]


def where(text: str) -> str:
    """``func (folder/file.py:line)`` of the worker's main thread in a faulthandler dump ("" if none).

    The main thread is the one whose stack holds the worker's loop; its innermost frame
    outside the standard library names the plugin code that crashed or hung.
    """
    stacks = _thread_stacks(text)
    main = [s for s in stacks if any(f["func"] == "worker_main" for f in s)]
    stack = (main or stacks or [[]])[0]
    if not stack:
        return ""
    frame = next((f for f in stack if not _is_stdlib(f["path"])), stack[0])
    return _named(frame["func"], frame["path"], frame["line"])


def where_in_stack(stack: traceback.StackSummary) -> str:
    """``func (folder/file.py:line)`` of the innermost frame of ``stack`` (outermost first) that is
    not the standard library's: the plugin code a live thread is stuck in ("" for none)."""
    frame = next((f for f in reversed(stack) if not _is_stdlib(f.filename)), None)
    return _named(frame.name, frame.filename, frame.lineno) if frame is not None else ""


def _named(func: str, path: str, line: object) -> str:
    short = "/".join(path.split(os.sep)[-2:])
    return f"{func} ({short}:{line})"
