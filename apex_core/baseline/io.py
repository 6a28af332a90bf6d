"""Read and validate baseline and report files; write baselines and gate artifacts atomically.

Every problem with an input file becomes one ``InputFileError`` line naming the file and
the field, so the CLI can print it and exit 2 before any artifact is written.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import sys
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, BinaryIO

import attrs
import jsonschema

from apex_core.baseline.errors import InputFileError
from apex_core.baseline.extra_metrics import EXTRA_METRICS, ExtraLimit
from apex_core.baseline.model import QUANTILE_STATS, Baseline, GateRule, LoadedReport, MetricLimit, ReportCell
from apex_core.files import atomic_write_text
from apex_core.measure.device_fingerprint import fingerprint_of
from apex_core.measure.environment import environment_key

_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer",
               float: "number", type(None): "null"}


@cache
def _shipped_schema(name: str) -> dict[str, Any]:
    return json.loads(resources.files("apex_core.baseline").joinpath(name).read_text("utf-8"))


def baseline_schema() -> dict[str, Any]:
    """The JSON Schema of baseline files (shipped in the package)."""
    return _shipped_schema("baseline.schema.json")


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


# larger than any report or baseline this tool writes (a large run's report is a few MB)
MAX_JSON_BYTES = 256 * 2**20

# The smallest time a baseline holds: files store milliseconds to the nanosecond (_round_ms),
# so a smaller positive statistic is emitted as this (the schema's minimum of value_ms).
MIN_BASELINE_MS = 1e-6
# The smallest float with full precision. A subnormal number (5e-324) is below any time,
# ratio or limit a run can produce, and a ratio divided by one overflows to inf.
SMALLEST_NORMAL = sys.float_info.min
_NONZERO_MANTISSA = re.compile(r"^-?0*\.?0*[1-9]")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is beyond the range of a float")
    if value == 0.0 and _NONZERO_MANTISSA.match(text):
        raise ValueError(f"{text[:40]} is too small for a float (it would read as 0)")
    if value != 0.0 and abs(value) < SMALLEST_NORMAL:
        raise ValueError(f"{text[:40]} is subnormal (below {SMALLEST_NORMAL:.4g}): no time, ratio or "
                         f"limit is that small")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 30:
        raise ValueError(f"an integer of {len(text)} digits is out of range")
    return int(text)


def open_regular_file(path: Path | str) -> BinaryIO:
    """``path`` opened for reading in binary, without blocking on a FIFO; ValueError when it is
    not a regular file (checked on the open descriptor: the file checked is the file read)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"{path}: not a regular file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_regular_file(path: Path | str, max_bytes: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; ``InputFileError`` for anything else.

    A FIFO would block the read (``open_regular_file`` does not wait on one) and /dev/zero never
    ends: no more than ``max_bytes`` (plus one, to see a file that grew) is ever read.
    """
    try:
        with open_regular_file(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(max_bytes + 1) if size <= max_bytes else b""
    except OSError as exc:
        raise InputFileError(path, None, f"cannot read: {exc.strerror or exc}") from None
    except ValueError:
        raise InputFileError(path, None, "not a regular file") from None
    if size > max_bytes or len(data) > max_bytes:
        raise InputFileError(path, None, f"{max(size, len(data))} bytes: larger than any report "
                                         f"or baseline ({max_bytes // 2**20} MiB)")
    return data


def parse_json(data: bytes | str, path: Path | str) -> Any:
    """Parse JSON text read from ``path``; malformed, non-finite or too deeply nested: ``InputFileError``."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float,
                          parse_int=_bounded_int)
    except UnicodeDecodeError as exc:
        raise InputFileError(path, None, f"cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputFileError(path, None, f"malformed JSON at line {exc.lineno} column {exc.colno}: "
                                         f"{exc.msg}") from None
    except ValueError as exc:
        raise InputFileError(path, None, f"malformed JSON: {exc}") from None
    except RecursionError:
        raise InputFileError(path, None, "malformed JSON: nested too deeply") from None


def read_json(path: Path | str) -> Any:
    """Parse a JSON file; unreadable, malformed or non-finite numbers raise ``InputFileError``."""
    return parse_json(read_regular_file(path), path)


def _dotted(parts: Iterable[Any]) -> str:
    """A JSON path as people write it: ``metrics.a/b/c/d/p50_ms.value_ms``, ``benchmarks[3].stats``."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# problems that read the same for any value: formatted with the schema's value, the value and its short form
_PROBLEMS = {"exclusiveMinimum": "must be > {expected}, got {value}",
             "minimum": "must be >= {expected}, got {value}", "maximum": "must be <= {expected:g}, got {value}",
             "const": "must be {expected!r}, got {short}", "minProperties": "is empty"}


def _describe(error: Any) -> tuple[str, str]:
    """Turn a jsonschema error into (field, problem) a person can act on."""
    path, kind, expected, value = list(error.absolute_path), error.validator, error.validator_value, \
        error.instance
    field = _dotted(path)
    if kind == "required":
        missing = next((name for name in expected if name not in value), "?")
        return _dotted([*path, missing]), "missing"
    if kind == "type":
        wanted = " or ".join(expected) if isinstance(expected, list) else expected
        got = _JSON_TYPES.get(type(value), type(value).__name__)
        return field, f"expected {wanted}, got {got} {_short(value)}"
    if kind in ("minimum", "exclusiveMinimum") and isinstance(value, (int, float)) and value < 0:
        return field, f"is negative ({value}); must be >= 0"
    if kind in _PROBLEMS:
        return field, _PROBLEMS[kind].format(expected=expected, value=value, short=_short(value))
    if kind == "enum":
        return field, f"must be one of {', '.join(map(repr, expected))}, got {_short(value)}"
    if kind == "additionalProperties":
        extra = sorted(set(value) - set(error.schema.get("properties", {})))
        return field, f"unknown field(s) {', '.join(extra)}"
    if kind == "pattern" and error.relative_schema_path and "propertyNames" in error.relative_schema_path:
        return field, (f"metric name {_short(value)} is not workload/case/backend/dtype/STAT "
                       f"(STAT one of {', '.join(QUANTILE_STATS)})")
    return field, error.message[:200]


def validate_against(path: Path | str, record: Any, schema: Mapping[str, Any]) -> None:
    """Raise ``InputFileError`` for the most relevant schema violation of ``record``, if any."""
    validator_cls = jsonschema.validators.validator_for(schema)
    error = jsonschema.exceptions.best_match(validator_cls(schema).iter_errors(record))
    if error is not None:
        field, problem = _describe(error)
        raise InputFileError(path, field, problem)


def _gate_rule(record: Mapping[str, Any] | None) -> GateRule | None:
    if record is None:
        return None
    spread = record.get("run_spread")
    return GateRule(min_effect=float(record["min_effect"]), confidence=float(record["confidence"]),
                    run_spread=None if spread is None else float(spread))


def gate_rule_record(rule: GateRule) -> dict[str, Any]:
    """The JSON form of a metric's statistical rule."""
    return {"min_effect": round(rule.min_effect, 6), "confidence": rule.confidence,
            "run_spread": None if rule.run_spread is None else round(rule.run_spread, 6)}


def load_baseline(path: Path | str) -> Baseline:
    """Read and validate a baseline file."""
    record = read_json(path)
    validate_against(path, record, baseline_schema())
    metrics = {
        name: MetricLimit(value_ms=float(m["value_ms"]),
                          max_regression_ratio=float(m["max_regression_ratio"]),
                          max_regression_abs_ms=float(m["max_regression_abs_ms"]),
                          samples_ms=tuple(float(s) for s in m.get("samples_ms", ())),
                          rule=_gate_rule(m.get("gate_rule")), timer_floor_ms=m.get("timer_floor_ms"))
        for name, m in record["metrics"].items()
    }
    extras = {name: ExtraLimit(value=float(m["value"]), better=m["better"],
                               max_change_ratio=float(m["max_change_ratio"]),
                               max_change_abs=float(m["max_change_abs"]))
              for name, m in record.get("extra_metrics", {}).items()}
    return Baseline(suite=record["suite"], environment_key=record["environment_key"], metrics=metrics,
                    baseline_notes=record["baseline_notes"], source_report=record.get("source_report"),
                    schema_version=record["schema_version"], extra_metrics=extras,
                    fingerprint=record.get("fingerprint"))


def gate_environment_key(report: Mapping[str, Any]) -> dict[str, Any]:
    """``environment_key`` of a report record, plus the timing methods of its ok cells and the CPU count."""
    env, config = report.get("environment", {}), report.get("config", {})
    methods = sorted({c["timing_method"] for c in report.get("benchmarks", [])
                      if c.get("status") == "ok" and c.get("timing_method")})
    return {**environment_key(env, config), "timing_methods": methods, "cpu_count": env.get("cpu_count")}


def _report_cell(cell: Mapping[str, Any]) -> ReportCell:
    stats = cell.get("stats") or {}
    return ReportCell(workload=cell["workload"], case=cell["case"], backend=cell["backend"],
                      dtype=cell["dtype"], status=cell["status"], reason=cell.get("reason") or "",
                      stats_ms={k: float(v) for k, v in stats.items()
                                if k.endswith("_ms") and isinstance(v, (int, float))},
                      samples_ms=tuple(float(s) for s in cell.get("samples_ms") or ()),
                      timing_method=cell.get("timing_method"),
                      extras={name: value for name, kind in EXTRA_METRICS.items()
                              if (value := kind.read(cell)) is not None},
                      host_load=(cell.get("metadata") or {}).get("host_load"),
                      bytes_moved=cell.get("bytes_moved"), launch_bound=cell.get("launch_bound"),
                      timer_floor_ms=cell.get("timer_floor_ms"))


def load_report(path: Path | str) -> LoadedReport:
    """Read a JSON report, validate the fields the gate reads, and refuse an empty one."""
    return loaded_report(read_json(path), path)


def loaded_report(record: Any, path: Path | str) -> LoadedReport:
    """A report record already in memory, validated and reduced as ``load_report`` does with a file's
    (``path`` names it in errors)."""
    validate_against(path, record, _shipped_schema("report_fields.schema.json"))  # other fields may come and go
    if not record["benchmarks"]:
        raise InputFileError(path, "benchmarks", "is empty: the report holds no cells to compare")
    cells = tuple(_report_cell(c) for c in record["benchmarks"])
    return LoadedReport(path=str(path), suite=record["suite"], timestamp_utc=record["timestamp_utc"],
                        environment_key=gate_environment_key(record), cells=cells,
                        git_commit=(record["environment"].get("git") or {}).get("commit"),
                        status=str(record.get("status") or "complete"), fingerprint=fingerprint_of(record))


def check_suite(baseline: Baseline, baseline_path: Path | str, report: LoadedReport) -> None:
    """A baseline applies only to reports of its own suite."""
    if baseline.suite != report.suite:
        raise InputFileError(report.path, "suite", f"{report.suite!r} does not match the suite "
                                                   f"{baseline.suite!r} of baseline {baseline_path}")


def file_sha256(path: Path | str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _round_ms(value: float) -> float:
    """Milliseconds to the nanosecond: lossless for perf_counter_ns, shorter files."""
    return round(value, 6) if math.isfinite(value) else value


def baseline_record(baseline: Baseline) -> dict[str, Any]:
    """The JSON form of a baseline (``baseline.schema.json``)."""
    metrics: dict[str, Any] = {}
    for name, limit in baseline.metrics.items():
        entry: dict[str, Any] = {
            "value_ms": _round_ms(limit.value_ms),
            "max_regression_ratio": limit.max_regression_ratio,
            "max_regression_abs_ms": limit.max_regression_abs_ms,
        }
        if limit.rule is not None:
            entry["gate_rule"] = gate_rule_record(limit.rule)
        if limit.samples_ms:
            entry["samples_ms"] = [_round_ms(s) for s in limit.samples_ms]
        if limit.timer_floor_ms is not None:
            entry["timer_floor_ms"] = _round_ms(limit.timer_floor_ms)
        metrics[name] = entry
    record: dict[str, Any] = {
        "schema_version": baseline.schema_version,
        "suite": baseline.suite,
        "environment_key": dict(baseline.environment_key),
        "baseline_notes": baseline.baseline_notes,
    }
    if baseline.source_report is not None:
        record["source_report"] = dict(baseline.source_report)
    if baseline.fingerprint is not None:
        record["fingerprint"] = dict(baseline.fingerprint)
    record["metrics"] = metrics
    if baseline.extra_metrics:
        record["extra_metrics"] = {name: attrs.asdict(limit) for name, limit in baseline.extra_metrics.items()}
    return record


# A JSON array holding only numbers, as json.dumps(indent=2) spreads it over many lines.
_NUMBER_ARRAY = re.compile(r"\[\s*(-?[0-9][-+0-9.eE]*(?:,\s*-?[0-9][-+0-9.eE]*)*)\s*\]")


def dumps(record: Any) -> str:
    """Indented JSON with number arrays (samples) kept on one line, so diffs stay readable."""
    text = json.dumps(record, indent=2, allow_nan=False)
    return _NUMBER_ARRAY.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]",
                             text) + "\n"


def write_json(path: Path | str, record: Any) -> None:
    atomic_write_text(Path(path), dumps(record))


def write_baseline(path: Path | str, baseline: Baseline) -> None:
    """Validate the record against the schema (a bug guard), then write it atomically."""
    record = baseline_record(baseline)
    validate_against(path, record, baseline_schema())
    write_json(path, record)
