"""A ``bench.yaml`` checked key by key into a frozen ``BenchSpec`` (docs/discover.md describes the format).

Every problem is a ``BenchSpecError`` naming the file and the field (``inputs.x.shape``,
``skip.when``): unknown keys, values of the wrong type, sizes naming no parameter, skip
conditions outside the vocabulary. Nothing in the file is evaluated or imported here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from apex_core.correctness import DTYPES
from apex_core.discovery.conditions import ConditionError, SkipConditions, parse_conditions
from apex_core.results import UNITS_PATTERN

TOP_KEYS = ("name", "description", "module", "function", "reference", "inputs", "outputs", "params",
            "profiles", "precisions", "tolerances", "work", "skip")
REQUIRED = ("name", "module", "function", "reference", "inputs", "outputs")
INPUT_KEYS = ("shape", "kind", "dtype", "low", "high")
KINDS = ("normal", "uniform", "integers")
FLOAT_DTYPES = ("data", "fp32")  # data: the cell's dtype
INT_DTYPES = ("int32", "int64")
WORK_KEYS = ("units", "count", "bytes", "flops")
# a factor of work's sizes that is not a parameter: the bytes of one element of the cell's dtype
DTYPE_BYTES = "dtype_bytes"
TOLERANCE_KEYS = ("atol", "rtol", "max_mismatch_ratio", "reason")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_CALLABLE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:)?[A-Za-z_][A-Za-z0-9_]*$")
# YAML 1.1 reads 1e-3 (no dot) as a string; such numbers are accepted where a number is expected
_FLOAT_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")

Size = int | str | tuple[int | str, ...]  # a number, a parameter name, or a product of those


class BenchSpecError(ValueError):
    """A ``bench.yaml`` that cannot be used; the message names the file and the field."""

    def __init__(self, path: Path, field: str, message: str) -> None:
        super().__init__(f"{path}: field {field!r}: {message}")
        self.path, self.field = path, field


@attrs.frozen
class InputSpec:
    name: str
    shape: tuple[int | str, ...]
    kind: str = "normal"
    dtype: str = "data"
    low: float | int | str = 0
    high: float | int | str = 1


@attrs.frozen
class BenchSpec:
    """What one ``bench.yaml`` declares."""

    path: Path
    name: str
    description: str
    module: str
    function: str
    reference: str  # "function" of ``module``, or "module:function"
    inputs: tuple[InputSpec, ...]
    outputs: tuple[str, ...]
    params: dict[str, int | float | bool]
    profiles: dict[str, dict[str, int | float | bool]]
    precisions: tuple[str, ...]
    tolerances: dict[str, dict[str, Any]]
    work: dict[str, Any]
    skip: SkipConditions

    @property
    def folder(self) -> Path:
        return self.path.parent


def declared_name(data: Any, path: Path) -> str:
    """The workload name a file declares, or its folder's name when it declares none usable (for error rows)."""
    name = data.get("name") if isinstance(data, Mapping) else None
    return name if isinstance(name, str) and _NAME.match(name) else path.parent.name


def parse_spec(data: Any, path: Path) -> BenchSpec:
    """Check a loaded ``bench.yaml`` document; raises ``BenchSpecError`` for the first problem."""
    def fail(field: str, message: str) -> BenchSpecError:
        return BenchSpecError(path, field, message)

    if not isinstance(data, Mapping):
        raise fail("(document)", "must be a mapping of keys to values")
    for key in data:
        if key not in TOP_KEYS:
            raise fail(str(key), f"unknown key; valid keys: {', '.join(TOP_KEYS)}")
    for key in REQUIRED:
        if key not in data:
            raise fail(key, "is required")
    name = _text(data["name"], "name", fail)
    if not _NAME.match(name):
        raise fail("name", f"{name!r} is not a usable workload name (lower-case letters, digits, '-', '_')")
    for key, pattern, expected in (("module", _MODULE, "a module name"),
                                   ("function", _IDENTIFIER, "a function name"),
                                   ("reference", _CALLABLE, "a function name or module:function")):
        if not pattern.match(_text(data[key], key, fail)):
            raise fail(key, f"{data[key]!r} is not {expected}")
    params = _params(data.get("params", {}), fail)
    inputs = _inputs(data["inputs"], params, fail)
    outputs = data["outputs"]
    if not isinstance(outputs, list) or not outputs or not all(isinstance(o, str) and o for o in outputs):
        raise fail("outputs", "must be a non-empty list of output names")
    try:
        skip = parse_conditions(data.get("skip"))
    except ConditionError as exc:
        raise fail(exc.field, str(exc)) from None
    return BenchSpec(
        path=path, name=name, description=_text(data.get("description", ""), "description", fail),
        module=data["module"], function=data["function"], reference=data["reference"],
        inputs=inputs, outputs=tuple(outputs), params=params,
        profiles=_profiles(data.get("profiles", {}), params, fail),
        precisions=_precisions(data.get("precisions", list(DTYPES)), fail),
        tolerances=_tolerances(data.get("tolerances", {}), fail),
        work=_work(data.get("work", {}), params, fail), skip=skip,
    )


def _text(value: Any, field: str, fail: Any) -> str:
    if not isinstance(value, str):
        raise fail(field, f"must be a string, got {type(value).__name__}")
    return value


def _mapping(value: Any, field: str, fail: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise fail(field, f"must be a mapping, got {type(value).__name__}")
    return value


def _params(value: Any, fail: Any) -> dict[str, int | float | bool]:
    params: dict[str, int | float | bool] = {}
    for key, number in _mapping(value, "params", fail).items():
        if not isinstance(key, str) or not _IDENTIFIER.match(key):
            raise fail(f"params.{key}", "a parameter name must be a Python identifier")
        if not isinstance(number, int | float):  # bool is an int
            raise fail(f"params.{key}", f"must be a number or a boolean, got {type(number).__name__}")
        params[key] = number
    return params


def _size(value: Any, field: str, params: Mapping[str, Any], fail: Any) -> Size:
    """An int >= 0, the name of an int parameter, or a list of those (their product)."""
    if isinstance(value, list):
        return tuple(_factor(v, field, params, fail) for v in value)
    return _factor(value, field, params, fail)


def _factor(value: Any, field: str, params: Mapping[str, Any], fail: Any) -> int | str:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise fail(field, f"{value!r} is neither a non-negative integer nor a parameter name")
    if isinstance(value, int):
        if value < 0:
            raise fail(field, f"{value} is negative")
        return value
    if value not in params or isinstance(params[value], bool) or not isinstance(params[value], int):
        ints = sorted(k for k, v in params.items() if isinstance(v, int) and not isinstance(v, bool))
        raise fail(field, f"{value!r} is not an integer parameter; integer parameters: "
                   f"{', '.join(ints) or 'none'}")
    return value


def _bound(value: Any, field: str, params: Mapping[str, Any], fail: Any) -> float | int | str:
    if isinstance(value, str) and not _FLOAT_TEXT.match(value):
        if value not in params:
            raise fail(field, f"{value!r} is neither a number nor a parameter name")
        return value
    return _number(value, field, fail)


def _number(value: Any, field: str, fail: Any) -> float | int:
    if isinstance(value, str) and _FLOAT_TEXT.match(value):
        return float(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail(field, f"must be a number, got {value!r}")
    return value


def _inputs(value: Any, params: Mapping[str, Any], fail: Any) -> tuple[InputSpec, ...]:
    specs = []
    for name, entry in _mapping(value, "inputs", fail).items():
        where = f"inputs.{name}"
        if not isinstance(name, str) or not _IDENTIFIER.match(name):
            raise fail(where, "an input name must be a Python identifier")
        if name in params:
            raise fail(where, "an input may not share its name with a parameter")
        entry = _mapping(entry, where, fail)
        for key in entry:
            if key not in INPUT_KEYS:
                raise fail(f"{where}.{key}", f"unknown key; valid keys: {', '.join(INPUT_KEYS)}")
        if not isinstance(entry.get("shape"), list):
            raise fail(f"{where}.shape", "is required: a list of sizes (integers or parameter names)")
        shape = tuple(_factor(v, f"{where}.shape", params, fail) for v in entry["shape"])
        kind = entry.get("kind", "normal")
        if kind not in KINDS:
            raise fail(f"{where}.kind", f"{kind!r} is not one of {', '.join(KINDS)}")
        allowed = INT_DTYPES if kind == "integers" else FLOAT_DTYPES
        dtype = entry.get("dtype", allowed[0])
        if dtype not in allowed:
            raise fail(f"{where}.dtype", f"{dtype!r} is not one of {', '.join(allowed)} for kind {kind}")
        if kind == "integers" and "high" not in entry:
            raise fail(f"{where}.high", "is required for kind integers (values are drawn from [low, high))")
        low = _bound(entry.get("low", 0), f"{where}.low", params, fail)
        high = _bound(entry.get("high", 1), f"{where}.high", params, fail)
        specs.append(InputSpec(name, shape, kind, dtype, low, high))
    if not specs:
        raise fail("inputs", "declare at least one input")
    return tuple(specs)


def _profiles(value: Any, params: Mapping[str, Any], fail: Any) -> dict[str, dict[str, int | float | bool]]:
    profiles: dict[str, dict[str, int | float | bool]] = {}
    for profile, values in _mapping(value, "profiles", fail).items():
        where = f"profiles.{profile}"
        profiles[str(profile)] = {}
        for key, number in _mapping(values, where, fail).items():
            if key not in params:
                raise fail(f"{where}.{key}", f"is not a parameter; parameters: {', '.join(params) or 'none'}")
            int_for_float = isinstance(params[key], float) and type(number) is int
            if type(number) is not type(params[key]) and not int_for_float:
                raise fail(f"{where}.{key}", f"must be a {type(params[key]).__name__} like the parameter, "
                           f"got {number!r}")
            profiles[str(profile)][key] = number
    return profiles


def _precisions(value: Any, fail: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or any(p not in DTYPES for p in items):
        raise fail("precisions", f"must list some of {', '.join(DTYPES)}, got {value!r}")
    return tuple(items)


def _tolerances(value: Any, fail: Any) -> dict[str, dict[str, Any]]:
    tolerances: dict[str, dict[str, Any]] = {}
    for dtype, entry in _mapping(value, "tolerances", fail).items():
        where = f"tolerances.{dtype}"
        if dtype not in DTYPES:
            raise fail(where, f"{dtype!r} is not one of {', '.join(DTYPES)}")
        tolerance: dict[str, Any] = {}
        for key, number in _mapping(entry, where, fail).items():
            if key not in TOLERANCE_KEYS:
                raise fail(f"{where}.{key}", f"unknown key; valid keys: {', '.join(TOLERANCE_KEYS)}")
            if key == "reason":
                tolerance[key] = _text(number, f"{where}.reason", fail)
                continue
            tolerance[key] = float(_number(number, f"{where}.{key}", fail))
            if not tolerance[key] >= 0 or (key == "max_mismatch_ratio" and tolerance[key] > 1):
                raise fail(f"{where}.{key}", f"{number!r} is out of range")
        tolerances[str(dtype)] = tolerance
    return tolerances


def _work(value: Any, params: Mapping[str, Any], fail: Any) -> dict[str, Any]:
    work = dict(_mapping(value, "work", fail))
    for key in work:
        if key not in WORK_KEYS:
            raise fail(f"work.{key}", f"unknown key; valid keys: {', '.join(WORK_KEYS)}")
    units = work.get("units", "elements")
    if not isinstance(units, str) or not UNITS_PATTERN.fullmatch(units):
        raise fail("work.units", f"{units!r} is not a lower-case word of letters, digits and '_' "
                   "(e.g. elements, tokens, images)")
    # bytes may name the cell's element size, so one count holds for fp32 and fp16 cells alike
    sizes: dict[str, Any] = {key: _size(work[key], f"work.{key}", {**params, DTYPE_BYTES: 2}, fail)
                             for key in ("count", "bytes", "flops") if key in work}
    return {"units": units, **sizes}
