"""Options a backend declares, and ``--backend-opt NAME.KEY=VALUE`` parsed against them.

A backend lists its options as ``Backend.option_specs`` (key, type, help); the command line
offers every one of them as ``--backend-opt NAME.KEY=VALUE``, ``--list`` shows them, and
the values reach ``Backend.configure`` in every process that probes or runs the backend,
as plain data (``Plan.backend_options``). Built-in and third-party backends use the same
declaration; the ``--trt-*`` flags are aliases of the TensorRT backends' options.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from apex_core.errors import UsageError, describe_exception, did_you_mean, printable

OPTION_TYPES = ("str", "int", "float", "bool", "path")
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


@attrs.frozen
class BackendOption:
    """One option of a backend: its key, the type of its value, what it does, and whether it repeats."""

    key: str
    type: str = attrs.field(validator=attrs.validators.in_(OPTION_TYPES))
    help: str
    repeatable: bool = False

    def convert(self, backend: str, text: str) -> Any:
        """The value of ``text`` as this option's type; a usage error says what was expected."""
        where = f"--backend-opt {backend}.{self.key}"
        if self.type == "str":
            return text
        if self.type == "path":
            if not text:
                raise UsageError(f"{where}: the path is empty")
            # relative to where the command was given, before a worker (elsewhere) sees it
            return str(Path(text).expanduser().resolve()) if ("/" in text or Path(text).exists()) else text
        if self.type == "bool":
            lowered = text.strip().lower()
            if lowered in _TRUE | _FALSE:
                return lowered in _TRUE
            raise UsageError(f"{where}: expected true or false, got {printable(text)!r}")
        try:
            value = int(text) if self.type == "int" else float(text)
        except ValueError:
            raise UsageError(f"{where}: expected {'an integer' if self.type == 'int' else 'a number'}, "
                             f"got {printable(text)!r}") from None
        if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
            raise UsageError(f"{where}: expected a finite number, got {printable(text)!r}")
        return value


def split_assignment(text: str) -> tuple[str, str, str]:
    """``NAME.KEY=VALUE`` -> (name, key, value); a usage error for any other shape."""
    target, equals, value = text.partition("=")
    name, dot, key = target.rpartition(".")
    if not equals or not dot or not name or not key:
        raise UsageError(f"--backend-opt expects NAME.KEY=VALUE (a backend, one of its options, a value), "
                         f"got {printable(text)!r}")
    return name, key, value


def declared(backend: Any) -> dict[str, BackendOption]:
    return {option.key: option for option in getattr(backend, "option_specs", ())}


def parse_backend_opts(texts: Sequence[str], backends: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every ``--backend-opt`` against the backends' declarations: ``{backend: {key: value}}``."""
    parsed: dict[str, dict[str, Any]] = {}
    for text in texts:
        name, key, value = split_assignment(text)
        if name not in backends:
            raise UsageError(f"--backend-opt names unknown backend {printable(name)!r}"
                             f"{did_you_mean(name, backends)}; valid backends: {', '.join(sorted(backends))}")
        options = declared(backends[name])
        if key not in options:
            known = ", ".join(sorted(options)) or "none"
            raise UsageError(f"--backend-opt: backend {name!r} has no option {printable(key)!r}"
                             f"{did_you_mean(key, options)}; its options: {known}")
        option = options[key]
        converted = option.convert(name, value)
        values = parsed.setdefault(name, {})
        if option.repeatable:
            values.setdefault(key, []).append(converted)
        elif key in values:
            raise UsageError(f"--backend-opt {name}.{key} is given twice; it takes one value")
        else:
            values[key] = converted
    return parsed


def merge_options(*sources: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Options from several flags (aliases, then ``--backend-opt``); lists are joined, the rest must agree."""
    merged: dict[str, dict[str, Any]] = {}
    for source in sources:
        for name, values in source.items():
            target = merged.setdefault(name, {})
            for key, value in values.items():
                if key not in target:
                    target[key] = list(value) if isinstance(value, list) else value
                elif isinstance(value, list) and isinstance(target[key], list):
                    target[key] = target[key] + list(value)
                elif target[key] != value:
                    raise UsageError(f"backend {name!r} option {key!r} is given two values ({target[key]!r} "
                                     f"and {value!r}) by two flags")
    return merged


def describe(options: Iterable[BackendOption]) -> str:
    """``engine_path (path), build (bool, repeatable)``: a backend's options in one line, for --list."""
    return ", ".join(f"{o.key} ({o.type}{', repeatable' if o.repeatable else ''})" for o in options)


def configure(backend: Any, options: Mapping[str, Any]) -> tuple[str, str]:
    """Hand ``backend`` its options (``Backend.configure``): ("", "") when it took them, else why
    not and the traceback (for the log file).

    The one place a backend gets its options, in each process that uses it (the run's own for
    ``supports``, a worker before its probe and each cell, a builder, the listing, a sweep). A
    bad value (``UsageError``) propagates: the run's own process meets it first and stops before
    any cell. Anything else the backend raises is its own bug, returned as the reason.
    """
    try:
        backend.configure(dict(options))
    except UsageError:
        raise
    except Exception as exc:
        return f"configure() raised {describe_exception(exc)}", traceback.format_exc()
    return "", ""
