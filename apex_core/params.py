"""Parse and type ``--set key=value`` overrides against the workloads' parameter classes."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from apex_core.errors import ParamError, did_you_mean
from apex_core.interfaces import Workload

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _field_types(workloads: Iterable[Workload]) -> dict[str, str]:
    """Field name -> type name (int, float, str, bool) over every selected workload."""
    types: dict[str, str] = {}
    for workload in workloads:
        for field in attrs.fields(workload.params_type):
            type_name = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "str")
            types.setdefault(field.name, str(type_name))
    return types


# --set integers must fit the int64 that torch sizes and indices are made of
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _convert(key: str, raw: str, type_name: str) -> Any:
    try:
        if type_name == "int":
            value = int(raw)
            if not INT64_MIN <= value <= INT64_MAX:
                raise ParamError(f"--set {key}={_clip(raw)}: outside the 64-bit integer range")
            return value
        if type_name == "float":
            number = float(raw)
            if not math.isfinite(number):
                raise ParamError(f"--set {key}={_clip(raw)}: expected a finite number")
            return number
        if type_name == "bool":
            lowered = raw.lower()
            if lowered in _TRUE | _FALSE:
                return lowered in _TRUE
            raise ValueError(raw)
    except ValueError:
        raise ParamError(f"--set {key}={_clip(raw)}: expected {type_name}") from None
    return raw


def _clip(text: str, limit: int = 40) -> str:
    """A value as it goes into a one-line message: at most ``limit`` characters."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def parse_overrides(items: Sequence[str], workloads: Sequence[Workload]) -> dict[str, Any]:
    """Turn ``["height=64", ...]`` into typed values; unknown keys list the valid ones."""
    types = _field_types(workloads)
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ParamError(f"--set expects key=value, got {item!r}")
        if key not in types:
            raise ParamError(f"--set {key}: unknown parameter{did_you_mean(key, types)}; valid keys: "
                             f"{', '.join(sorted(types))}")
        overrides[key] = _convert(key, raw.strip(), types[key])
    return overrides
