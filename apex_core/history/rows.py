"""Turn a JSON report into the rows the history stores: one run row and one row per cell.

The environment key is the gate's (``apex_core.baseline.io.gate_environment_key``: the fields
that must match for two reports' numbers to compare, plus the timing methods and the CPU count),
so a baseline built from history runs carries the same key as one emitted from report files.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from apex_core.baseline.io import gate_environment_key
from apex_core.baseline.normalize import card_of_report
from apex_core.errors import UsageError

REPORT_ENCODING = "zlib-json"  # samples_ms make reports large: a smoke report of 54 kB stores as 14 kB

# The metric columns of the cells table, each a number per cell (None where the cell lacks it).
METRIC_COLUMNS = ("p50_ms", "p95_ms", "min_ms", "mean_ms", "p90_ms", "p99_ms", "gbps", "tflops",
                  "units_per_s", "peak_memory_mb", "energy_j_per_call")
# what scales a cell's time to another card (apex_core/baseline/normalize.py)
CARD_CELL_COLUMNS = ("launch_bound", "timer_floor_ms")
CELL_COLUMNS = ("position", "workload", "case_name", "backend", "dtype", "device", "status", "reason",
                "timing_method", "units", *METRIC_COLUMNS, *CARD_CELL_COLUMNS)
# the card a run used: its model, UUID and measured figures (None on CPU runs and older reports)
CARD_RUN_COLUMNS = ("card_model", "card_uuid", "copy_gbps", "sm_clock_mhz")
RUN_COLUMNS = ("recorded_utc", "timestamp_utc", "suite", "status", "git_commit", "git_branch", "git_dirty",
               "environment_id", "environment_key", "device", "hardware", "report_encoding", "report",
               *CARD_RUN_COLUMNS)

_THROUGHPUT_FIELDS = {"tiles": "tiles_per_s", "tokens": "tokens_per_s", "elements": "elements_per_s",
                      "frames": "frames_per_s"}
_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+/@:-]{0,99}")
RESERVED_TAGS = ("latest",)


def check_tag(name: str) -> str:
    """A tag as given, or a UsageError: letters, digits and ``._+/@:-``, not all digits (those are run ids)."""
    if not isinstance(name, str) or not _TAG.fullmatch(name):
        raise UsageError(f"tag {name!r}: use 1 to 100 letters, digits or ._+/@:- starting with a "
                         "letter or digit")
    if name.isdigit():
        raise UsageError(f"tag {name!r}: a tag may not be all digits (those name run ids)")
    if name in RESERVED_TAGS:
        raise UsageError(f"tag {name!r} is reserved (it names the most recent run)")
    return name


def _normalized(value: Any) -> Any:
    return sorted(value, key=str) if isinstance(value, list) else value


def environment_identity(report: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The report's gate environment key and its short id (12 hex digits of its canonical JSON's sha256)."""
    key = gate_environment_key(report)
    return key, environment_id_of(key)


def environment_id_of(key: Mapping[str, Any]) -> str:
    """The short id of an environment key (as returned by ``environment_identity``)."""
    canonical = json.dumps({k: _normalized(v) for k, v in key.items()}, sort_keys=True,
                           separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _text(value: Any, default: str = "") -> str:
    """Text for an SQLite column: a lone surrogate (JSON may carry one) escaped, as SQLite takes only UTF-8."""
    if not isinstance(value, str):
        return default
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def check_report(report: Any) -> None:
    """Refuse a report the history cannot index (ValueError naming the first bad field)."""
    if not isinstance(report, Mapping):
        raise ValueError(f"a report is a JSON object, got {type(report).__name__}")
    for name, kind in (("suite", str), ("timestamp_utc", str), ("environment", Mapping),
                       ("config", Mapping), ("benchmarks", Sequence)):
        if not isinstance(report.get(name), kind) or (kind is Sequence and isinstance(report[name], str)):
            raise ValueError(f"the report's field {name!r} is missing or not a {kind.__name__}")
    for index, cell in enumerate(report["benchmarks"]):
        if not isinstance(cell, Mapping) or not all(
                isinstance(cell.get(k), str) for k in ("workload", "case", "backend", "dtype", "status")):
            raise ValueError(f"the report's benchmarks[{index}] lacks workload, case, backend, dtype "
                             "or status")


def cell_row(position: int, cell: Mapping[str, Any]) -> tuple[Any, ...]:
    """One cells-table row (``CELL_COLUMNS`` order) of one report cell."""
    stats = cell.get("stats") or {}
    units = cell.get("units") if isinstance(cell.get("units"), str) else None
    values: dict[str, Any] = {name: _number(stats.get(name)) for name in
                              ("p50_ms", "p95_ms", "min_ms", "mean_ms", "p90_ms", "p99_ms")}
    values.update(gbps=_number(cell.get("gbps")), tflops=_number(cell.get("tflops")),
                  units_per_s=_number(cell.get(_THROUGHPUT_FIELDS.get(str(units), ""))),
                  peak_memory_mb=_number(cell.get("peak_memory_mb")),
                  energy_j_per_call=_number((cell.get("telemetry") or {}).get("energy_j_per_call")))
    bound = cell.get("launch_bound")
    return (position, *(_text(cell[k]) for k in ("workload", "case", "backend", "dtype")),
            _text(cell.get("device"), "?"), _text(cell["status"]), _text(cell.get("reason")),
            _text(cell.get("timing_method")) if isinstance(cell.get("timing_method"), str) else None,
            units, *(values[name] for name in METRIC_COLUMNS),
            int(bound) if isinstance(bound, bool) else None, _number(cell.get("timer_floor_ms")))


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def encode_report(report: Mapping[str, Any]) -> bytes:
    return zlib.compress(json.dumps(report, separators=(",", ":"), default=str).encode("utf-8"), 6)


def decode_report(encoding: str, blob: Any) -> dict[str, Any]:
    """The stored report as a dict (``zlib-json``, or plain ``json`` text)."""
    data = zlib.decompress(blob) if encoding == REPORT_ENCODING else blob
    return json.loads(data if isinstance(data, str) else bytes(data).decode("utf-8"))


def run_row(report: Mapping[str, Any], commit: str | None, branch: str | None) -> tuple[Any, ...]:
    """One runs-table row (``RUN_COLUMNS`` order); the commit defaults to the report's own git commit."""
    environment = report["environment"]
    git = environment.get("git") if isinstance(environment.get("git"), Mapping) else {}
    key, key_id = environment_identity(report)
    dirty = git.get("dirty")
    card = card_of_report(report)
    return (utc_now(), _text(report["timestamp_utc"]), _text(report["suite"]),
            _text(report.get("status"), "unknown"),
            commit or (_text(git.get("commit")) if isinstance(git.get("commit"), str) else None), branch,
            None if dirty is None else int(bool(dirty)), key_id,
            json.dumps(key, sort_keys=True, default=str), _text(environment.get("device")) or None,
            _text(key.get("hardware")) or None, REPORT_ENCODING, encode_report(report),
            *((None,) * 4 if card is None else
              (_text(card.model), _text(card.uuid) or None, card.copy_gbps, card.sm_clock_mhz)))
