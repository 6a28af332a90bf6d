"""``--config`` and ``--discover``: checked up front, then exported to the environment workers inherit.

The registry is rebuilt in every worker process from entry points, and the providers that
read the config file and the ``bench.yaml`` folders read them from the environment
(``apex_core.config_file``). Mistakes here (a missing file, bad TOML, a folder that does
not exist, PyYAML missing) are usage errors, before any work starts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from apex_core.config_file import CONFIG_ENV, DISCOVER_ENV, config_path, discover_folders, read_config
from apex_core.discovery.yaml_loader import yaml_missing_reason
from apex_core.errors import UsageError, printable


def configured_variables(args: Any) -> dict[str, str]:
    """The variables to export for ``args`` (absolute paths); raises ``UsageError`` for bad input."""
    path = config_path(getattr(args, "config", None))
    config = read_config(path) if path is not None else {}
    flagged = []
    for text in getattr(args, "discover", None) or []:
        folder = Path(text).expanduser().resolve()
        if not folder.is_dir():
            raise UsageError(f"--discover: no such folder: {printable(text)!r}")
        flagged.append(str(folder))
    variables = {CONFIG_ENV: str(path)} if path is not None else {}
    inherited = [p for p in os.environ.get(DISCOVER_ENV, "").split(os.pathsep) if p.strip()]
    discover = os.pathsep.join([*inherited, *flagged])
    if flagged:
        variables[DISCOVER_ENV] = discover
    folders = discover_folders(config, path, {DISCOVER_ENV: discover})
    for folder in folders:
        if not folder.is_dir():
            raise UsageError(f"{path}: discover folder {str(folder)!r} does not exist")
    missing = yaml_missing_reason() if folders else None
    if missing:
        raise UsageError(missing)
    return variables

