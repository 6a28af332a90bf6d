"""The backend provider of external commands (entry-point group ``apex_bench.backend_providers``).

Registered in apex-bench's own pyproject.toml exactly as a third-party provider would be.
It reads the config file this process sees (``APEX_BENCH_CONFIG`` or ``apex-bench.toml``,
which the command line exports for the workers) and the ``APEX_BENCH_EXT_<NAME>_CMD``
variables, and answers one ``ext:NAME`` backend per command, or an error row for an entry
that is not valid.
"""

from __future__ import annotations

import os

from adapters.external.backend import ExternalBackend
from adapters.external.config import ConfigEntryError, ExternalCommand, from_config, from_environment
from apex_core.config_file import current_config
from apex_core.providers import Provided


def external_backends() -> dict[str, object]:
    """``{"ext:NAME": ExternalBackend | Provided.broken(...)}`` for every configured command."""
    path, config = current_config()
    from_file = from_config(config["external"], path) if path is not None and "external" in config else {}
    from_env = from_environment(os.environ)
    entries: dict[str, object] = {}
    for name in sorted({*from_file, *from_env}):
        key = f"ext:{name}"
        if name in from_file and name in from_env:
            entries[key] = Provided.broken(
                f"ext:{name} is defined twice, in {path} and in {_variable(name)}; keep one", str(path))
            continue
        entry: ExternalCommand | ConfigEntryError = from_file.get(name) or from_env[name]
        source = str(path) if name in from_file else _variable(name)
        if isinstance(entry, ConfigEntryError):
            entries[key] = Provided.broken(str(entry), source)
        else:
            entries[key] = Provided(ExternalBackend(entry), source=source)
    return entries


def _variable(name: str) -> str:
    return f"APEX_BENCH_EXT_{name.upper().replace('-', '_')}_CMD"
