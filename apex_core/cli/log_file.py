"""The run's log file: tracebacks, debug detail and whatever libraries print go there, never to the terminal."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path


def configure_logging(log_path: Path) -> None:
    """apex-bench's loggers and Python's warnings write to ``log_path``, emptied for this run.

    The file is appended to by every writer (the handler here and, during the run, the
    libraries' own writes to standard error), so their lines interleave without overwriting.
    """
    log_path.write_text("", encoding="utf-8")
    handler = logging.FileHandler(log_path, mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # a library's UserWarning (torch.profiler's, say) is noise on the terminal of a run that went well
    logging.captureWarnings(True)
    for name in ("apex_core", "adapters", "apex_kernels", "py.warnings"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.DEBUG)
        logger.addHandler(handler)
        logger.propagate = False


def _writes_to_fd2(stream: object) -> bool:
    try:
        return stream.fileno() == 2  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):  # a test's capture, or a stream without a descriptor
        return False


@contextlib.contextmanager
def library_output_to(log_path: Path) -> Iterator[None]:
    """While the run lasts, what libraries write to file descriptor 2 (CUPTI and kineto when the
    device's timers are measured, XLA, a compiler) goes to the log; apex-bench's own lines,
    written through ``sys.stderr``, still reach the terminal."""
    sys.stderr.flush()
    terminal = os.dup(2)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    previous = sys.stderr
    ours = None
    if _writes_to_fd2(previous):
        ours = open(terminal, "w", buffering=1, encoding=getattr(previous, "encoding", None) or "utf-8",  # noqa: SIM115
                    errors="backslashreplace", closefd=False)
        sys.stderr = ours
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(terminal, 2)
        os.close(terminal)
        if ours is not None:
            sys.stderr = previous
            ours.close()
