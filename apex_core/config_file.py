"""The apex-bench config file (TOML) and the environment variables that carry settings to workers.

Where the file is, first match wins: ``--config PATH`` (alias ``--external-config``), the
``APEX_BENCH_CONFIG`` variable, ``apex-bench.toml`` in the current folder. Each top-level
table belongs to the provider that reads it (``[external.NAME]``: ``adapters.external``; a
third-party provider reads its own table the same way); ``discover`` (folders with
``bench.yaml`` files, ``apex_core.discovery``) is the one plain key, and any other plain
key is refused, so a typo such as ``discovr = [...]`` is not silently ignored.

Worker processes rebuild the registry from entry points (``Registry.discover``), so what
shapes it travels in the environment: the command line resolves the file to an absolute
path in ``APEX_BENCH_CONFIG`` and the ``--discover`` folders in ``APEX_BENCH_DISCOVER``
before the registry is built; workers inherit both.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from apex_core.errors import UsageError, one_line

CONFIG_ENV = "APEX_BENCH_CONFIG"
DISCOVER_ENV = "APEX_BENCH_DISCOVER"  # os.pathsep-separated folders
DEFAULT_CONFIG_NAME = "apex-bench.toml"
KNOWN_KEYS = ("discover",)  # plain top-level keys; tables are the providers' sections


def config_path(explicit: str | os.PathLike[str] | None = None,
                environ: Mapping[str, str] | None = None) -> Path | None:
    """The config file in effect, as an absolute path, or None when there is none.

    A file named explicitly (argument or ``APEX_BENCH_CONFIG``) must exist: a ``UsageError``
    says which one does not; the default name is used only when present.
    """
    environ = os.environ if environ is None else environ
    for text, origin in ((explicit, "--config"), (environ.get(CONFIG_ENV), CONFIG_ENV)):
        if text is None or not str(text).strip():
            continue
        path = Path(text).expanduser().resolve()
        if not path.is_file():
            raise UsageError(f"{origin}: no such config file: {os.fspath(text)!r}")
        return path
    default = Path(DEFAULT_CONFIG_NAME)
    return default.resolve() if default.is_file() else None


def read_config(path: Path) -> dict[str, Any]:
    """The parsed file; bad TOML or an unknown plain top-level key is a ``UsageError`` naming the file."""
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the config file: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: invalid TOML: {one_line(str(exc))}") from None
    unknown = sorted(k for k, value in data.items() if k not in KNOWN_KEYS and not isinstance(value, dict))
    if unknown:
        raise UsageError(f"{path}: unknown key {unknown[0]!r}; the top level holds {', '.join(KNOWN_KEYS)} "
                         "and tables such as [external.NAME]")
    return data


def current_config() -> tuple[Path | None, dict[str, Any]]:
    """The config file of this process (``APEX_BENCH_CONFIG`` or the default name) and its contents."""
    path = config_path()
    return path, (read_config(path) if path is not None else {})


def discover_folders(config: Mapping[str, Any], path: Path | None,
                     environ: Mapping[str, str] | None = None) -> list[Path]:
    """The folders to search for ``bench.yaml``: ``APEX_BENCH_DISCOVER``, then the file's ``discover`` key.

    Relative folders in the file are relative to the file's folder. A ``discover`` value that
    is not a list of strings is a ``UsageError`` naming the file.
    """
    environ = os.environ if environ is None else environ
    folders = [Path(p) for p in environ.get(DISCOVER_ENV, "").split(os.pathsep) if p.strip()]
    listed = config.get("discover", [])
    if isinstance(listed, str):
        listed = [listed]
    if not isinstance(listed, list) or not all(isinstance(p, str) and p.strip() for p in listed):
        raise UsageError(f"{path}: 'discover' must be a folder or a list of folders (strings)")
    base = path.parent if path is not None else Path.cwd()
    folders.extend(base / p for p in listed)
    unique: dict[Path, None] = {}
    for folder in folders:
        unique.setdefault(folder.expanduser().resolve(), None)
    return list(unique)
