"""Output files written atomically, so an interrupted or killed run leaves a valid file behind,
and checked before any work starts, so a bad path is a usage error and not a lost run."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from apex_core.errors import UsageError


def atomic_write_text(path: Path, text: str) -> None:
    """Write to a temporary file in the same folder, flush it to disk, then rename over ``path``."""
    path = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file owner-only; give it the mode a plain open() would have
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        # a lone surrogate (a plugin's message from an undecodable file name) is written escaped, never fatal
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


# room for the temporary file's prefix and suffix within the usual 255-byte name limit
MAX_NAME_BYTES = 200


def check_writable(path: Path, flag: str) -> None:
    """Fail before any work starts when ``path`` cannot be written as a plain file of its own.

    The folder must exist and take a new file; the path must not name a folder, a symbolic
    link (a write would follow it) or anything but a regular file (a device node or FIFO
    would be replaced by a file), and its name must leave room for the temporary file.
    """
    text = str(path)
    if not text.strip():
        raise UsageError(f"{flag}: empty path")
    path = Path(path)
    if len(path.name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        raise UsageError(f"{flag}: file name of {len(path.name)} characters is too long "
                         f"(at most {MAX_NAME_BYTES} bytes)")
    if path.is_symlink():
        raise UsageError(f"{flag} {path}: is a symbolic link; name the file itself")
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a folder, expected a file path")
    if path.exists() and not path.is_file():
        raise UsageError(f"{flag} {path}: exists and is not a regular file (a device, FIFO or socket)")
    folder = path.resolve().parent
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: folder {folder} does not exist")
    try:
        fd, probe = tempfile.mkstemp(prefix=".apex-bench-write-check.", dir=folder)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write in folder {folder} ({exc.strerror})") from None
    os.close(fd)
    os.unlink(probe)


def prepare_output(path: Path, flag: str) -> None:
    """Make the folder a run's output file goes into, as the default ``artifacts/`` is made, then
    check the file can be written there (``check_writable``); one line when either cannot be."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot make its folder {Path(path).parent} "
                         f"({exc.strerror or exc})") from None
    check_writable(path, flag)


def check_distinct(paths: dict[str, Path]) -> None:
    """Refuse two outputs that name the same file (the second would overwrite the first)."""
    seen: dict[Path, str] = {}
    for flag, path in paths.items():
        key = Path(path).resolve()
        if key in seen:
            raise UsageError(f"{flag} and {seen[key]} name the same file {path}")
        seen[key] = flag
