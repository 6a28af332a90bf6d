"""Turn result objects into JSON-ready dicts (serialization lives here, not on the classes)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import attrs

from apex_core.measure.environment import environment_key
from apex_core.report.flags import cell_flags, is_launch_bound
from apex_core.report.manifest import replay_block
from apex_core.results import Accuracy, CellResult, DeviceInfo, DeviceUse, Report, Stats, Status

SCHEMA_VERSION = 1

def _finite(value: float | None) -> float | None:
    """JSON has no NaN or Infinity; a non-finite number is written as null."""
    if value is None or not math.isfinite(value):
        return None
    return value


def json_safe(value: Any) -> Any:
    """Backend metadata made JSON-safe: non-finite floats to null, unknown objects to text."""
    if isinstance(value, float):
        return _finite(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def _batches_read(attribute: attrs.Attribute[Any], value: Any) -> bool:
    """Telemetry's per-batch throttle record only where the timer took one: a record without it
    reads as one from before it was taken."""
    return not (attribute.name == "batches" and value is None)


def stats_record(stats: Stats) -> dict[str, Any]:
    times = ("mean", "std", "min", "max", "p50", "p90", "p95", "p99")
    return {"n": stats.n, **{f"{name}_ms": getattr(stats, name) for name in times}, "cv": stats.cv}


def accuracy_record(accuracy: Accuracy) -> dict[str, Any]:
    return {
        "stage": accuracy.stage,
        "passed": accuracy.passed,
        "atol": accuracy.atol,
        "rtol": accuracy.rtol,
        "max_mismatch_ratio": accuracy.max_mismatch_ratio,
        "message": accuracy.message,
        "outputs": [
            {
                "name": o.name,
                "max_abs_error": _finite(o.max_abs_error),
                "max_rel_error": _finite(o.max_rel_error),
                "rmse": _finite(o.rmse),
                "mismatches": o.mismatches,
                "elements": o.elements,
                "nonfinite_mismatches": o.nonfinite_mismatches,
            }
            for o in accuracy.outputs
        ],
    }


def correctness(cell: CellResult) -> str:
    """What the checks say about a cell's outputs (docs/workloads.md).

    ``passed``: an ``ok`` cell passed its checks before and after timing (a ``suspect`` one
    passed every check it reached: its answers were right, its timing was not to be trusted);
    ``unchecked``: an ``ok`` cell of a workload with no reference (timed, never checked;
    ``unchecked_reason`` says why); ``failed``: ``incorrect``; ``not_reached``: the cell
    stopped before its checks finished (skipped, error, timeout, crashed).
    """
    if cell.status == Status.OK:
        return "unchecked" if cell.unchecked else "passed"
    if cell.status == Status.SUSPECT and cell.accuracy and all(a.passed for a in cell.accuracy):
        return "passed"
    return "failed" if cell.status == Status.INCORRECT else "not_reached"


def cell_record(cell: CellResult, environment: dict[str, Any] | None = None,
                config: dict[str, Any] | None = None) -> dict[str, Any]:
    """One entry of the report's ``benchmarks`` list (``flags`` need the run's environment and config)."""
    record: dict[str, Any] = {
        "name": cell.key,
        "workload": cell.workload,
        "case": cell.case,
        "params": dict(cell.params),
        "backend": cell.backend,
        "dtype": cell.dtype,
        "device": cell.device,
        "status": str(cell.status),
        "skip_kind": str(cell.skip_kind) if cell.skip_kind else None,
        "reason": cell.reason,
        "timing_method": None,
        "stats": None,
        "samples_ms": [],
        "build_time_s": cell.build_time_s,
        "peak_memory_mb": cell.peak_memory_mb,
        "peak_memory_method": cell.peak_memory_method or None,
        "input_memory_mb": cell.input_memory_mb,
        "wall_time_s": cell.wall_time_s,
        "wait_time_s": cell.wait_time_s,
        **({"warm_time_s": cell.warm_time_s} if cell.warm_time_s is not None else {}),
        "accuracy": [accuracy_record(a) for a in cell.accuracy],
        "correctness": correctness(cell),
        "metadata": json_safe(cell.metadata),
    }
    if cell.unchecked:
        record["unchecked_reason"] = cell.unchecked
    if cell.timing is not None:
        record.update(
            timing_method=cell.timing.method,
            cache=cell.timing.cache,
            stop_reason=cell.timing.stop_reason,
            timing_note=cell.timing.note,
            stats=stats_record(cell.timing.stats),
            samples_ms=list(cell.timing.samples_ms),
            host_ms=cell.timing.host_ms,
            launch_bound=is_launch_bound(cell.timing),
            timer_floor_ms=cell.timing.floor_ms,
            timer_floor_rounds_ms=list(cell.timing.floor_rounds_ms),
            placements=cell.timing.placements,
            flags=cell_flags(cell, environment or {}, config or {}),
        )
        if cell.timing.kernel is not None:
            record["kernel_activity"] = attrs.asdict(cell.timing.kernel)
    if cell.device_info is not None:
        record.update(device_record(cell.device_info))
    if cell.worker_output:
        record["worker_output"] = cell.worker_output
    if cell.telemetry is not None:
        record["telemetry"] = json_safe(attrs.asdict(cell.telemetry, filter=_batches_read))
    if (d := cell.derived) is not None:
        # the throughput's key is named after its units (free text): tiles_per_s, images_per_s
        record.update({"units": d.units, f"{d.units}_per_s": d.units_per_s, "gbps": d.gbps,
                       "tflops": d.tflops, "bytes_moved": d.bytes_moved, "flops": d.flops})
    return record


def device_record(device: DeviceInfo) -> dict[str, Any]:
    """The card a cell ran on, as the cell record's ``device_*`` fields."""
    return {"device_index": device.index, "device_name": device.name, "device_uuid": device.uuid,
            "device_host": device.host}


def devices_record(uses: tuple[DeviceUse, ...]) -> list[dict[str, Any]]:
    """The report's ``devices``: each card a run's cells were sharded over, and whether it was retired."""
    return [{**attrs.asdict(use.device), "cells": use.cells, "retired": use.retired} for use in uses]


def report_record(report: Report) -> dict[str, Any]:
    """The whole JSON report, ``schema_version`` 1 (see ``report.schema.json``)."""
    counts = Counter(str(c.status) for c in report.cells)
    return {
        "schema_version": SCHEMA_VERSION,
        "suite": report.suite,
        "timestamp_utc": report.timestamp_utc,
        "environment": report.environment,
        "environment_key": environment_key(report.environment, report.config),
        "config": report.config,
        "status": report.status,
        "summary": {"cells": len(report.cells), **dict(sorted(counts.items()))},
        "benchmarks": [cell_record(c, report.environment, report.config) for c in report.cells],
        "plugins": [attrs.asdict(row) for row in report.plugins],
        "deprecations": [attrs.asdict(d) for d in report.deprecations],
        "triton_autotune": report.triton_autotune,
        "devices": devices_record(report.devices),
        # seed, config and data hashes; computed once per artifact per process (manifest.py)
        "replay": replay_block(report.config, report.cells),
    }
