"""Which external commands are configured: ``[external.NAME]`` tables of the config file and
``APEX_BENCH_EXT_<NAME>_CMD`` variables, each checked key by key.

A problem with one entry (an unknown key, a value of the wrong type, an empty command, a
name defined in both places) makes only that backend an error row naming the file or the
variable and the field; the other commands stay usable.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

ENV_PREFIX, ENV_SUFFIX = "APEX_BENCH_EXT_", "_CMD"
BACKEND_PREFIX = "ext:"
# the .npz exchange carries what numpy has: no bfloat16
EXCHANGE_DTYPES = ("fp32", "fp16")
DEVICES = ("cpu", "cuda")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_KEYS = ("command", "description", "workloads", "dtypes", "devices", "cwd", "env")


class ConfigEntryError(ValueError):
    """One configured command is invalid; the message names the field."""


@attrs.frozen
class ExternalCommand:
    """One configured command: how to start it and what it claims to implement."""

    name: str  # without the ext: prefix
    argv: tuple[str, ...]
    origin: str  # the file or variable it came from, for messages
    description: str = ""
    workloads: tuple[str, ...] | None = None  # None: every workload (the command may answer skipped)
    dtypes: tuple[str, ...] = EXCHANGE_DTYPES
    devices: tuple[str, ...] = DEVICES
    cwd: str | None = None  # None: the folder apex-bench runs in
    env: tuple[tuple[str, str], ...] = ()

    @property
    def backend_name(self) -> str:
        return BACKEND_PREFIX + self.name


def name_from_variable(variable: str) -> str | None:
    """``APEX_BENCH_EXT_MY_TOOL_CMD`` -> ``my-tool``; None for other variables."""
    if not (variable.startswith(ENV_PREFIX) and variable.endswith(ENV_SUFFIX)):
        return None
    core = variable[len(ENV_PREFIX):-len(ENV_SUFFIX)]
    return core.lower().replace("_", "-") if core else None


def from_environment(environ: Mapping[str, str]) -> dict[str, ExternalCommand | ConfigEntryError]:
    """Every ``APEX_BENCH_EXT_<NAME>_CMD`` variable as a command, split as a shell would (never run by one)."""
    commands: dict[str, ExternalCommand | ConfigEntryError] = {}
    for variable, value in sorted(environ.items()):
        name = name_from_variable(variable)
        if name is None:
            continue
        try:
            commands[name] = ExternalCommand(name, _argv(value, variable), variable)
        except ConfigEntryError as exc:
            commands[name] = exc
        if not _NAME.match(name):
            commands[name] = ConfigEntryError(f"{variable}: {name!r} is not a usable backend name "
                                              "(letters, digits, '-' and '_')")
    return commands


def from_config(section: Any, path: Path) -> dict[str, ExternalCommand | ConfigEntryError]:
    """The ``[external.NAME]`` tables of the config file at ``path``."""
    if not isinstance(section, Mapping):
        return {"external": ConfigEntryError(f"{path}: 'external' must be a table of [external.NAME] "
                                             "tables")}
    commands: dict[str, ExternalCommand | ConfigEntryError] = {}
    for raw_name, table in section.items():
        name = str(raw_name).lower()
        where = f"{path}: [external.{raw_name}]"
        try:
            if not _NAME.match(name):
                raise ConfigEntryError(f"{where}: {raw_name!r} is not a usable backend name "
                                       "(letters, digits, '-' and '_')")
            commands[name] = _entry(name, table, where, path)
        except ConfigEntryError as exc:
            commands[name] = exc
    return commands


def _entry(name: str, table: Any, where: str, path: Path) -> ExternalCommand:
    if not isinstance(table, Mapping):
        raise ConfigEntryError(f"{where} must be a table with a 'command' key")
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ConfigEntryError(f"{where}: unknown key {unknown[0]!r}; valid keys: {', '.join(_KEYS)}")
    if "command" not in table:
        raise ConfigEntryError(f"{where}: 'command' is missing (a list of arguments, or one string)")
    cwd = table.get("cwd", ".")
    if not isinstance(cwd, str):
        raise ConfigEntryError(f"{where}: 'cwd' must be a string, got {type(cwd).__name__}")
    env = table.get("env", {})
    if not isinstance(env, Mapping) or not all(isinstance(v, str) for v in env.values()):
        raise ConfigEntryError(f"{where}: 'env' must be a table of strings")
    description = table.get("description", "")
    if not isinstance(description, str):
        raise ConfigEntryError(f"{where}: 'description' must be a string")
    workloads = table.get("workloads")
    return ExternalCommand(
        name=name,
        argv=_argv(table["command"], f"{where}: 'command'"),
        origin=str(path),
        description=description,
        workloads=None if workloads is None else _strings(workloads, f"{where}: 'workloads'"),
        dtypes=_subset(table.get("dtypes", list(EXCHANGE_DTYPES)), EXCHANGE_DTYPES, f"{where}: 'dtypes'"),
        devices=_subset(table.get("devices", list(DEVICES)), DEVICES, f"{where}: 'devices'"),
        # relative to the config file, so a file and the tools beside it move together
        cwd=str((path.parent / cwd).resolve()),
        env=tuple(sorted((str(k), v) for k, v in env.items())),
    )


def _argv(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise ConfigEntryError(f"{where}: cannot split {value!r} into arguments: {exc}") from None
    elif isinstance(value, list) and all(isinstance(a, str) for a in value):
        argv = list(value)
    else:
        raise ConfigEntryError(f"{where} must be a list of strings or one string")
    if not argv or not argv[0].strip():
        raise ConfigEntryError(f"{where} is empty")
    return tuple(argv)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigEntryError(f"{where} must be a list of names")
    return tuple(value)


def _subset(value: Any, allowed: tuple[str, ...], where: str) -> tuple[str, ...]:
    items = _strings(value, where)
    bad = [v for v in items if v not in allowed]
    if bad:
        raise ConfigEntryError(f"{where}: {bad[0]!r} is not one of {', '.join(allowed)}")
    return items
