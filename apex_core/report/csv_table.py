"""The CSV format: one row per cell, for a spreadsheet or pandas (docs/report.md).

Made from the JSON record alone, so it says what the JSON says: the same statuses, numbers
(milliseconds, GB/s, TFLOP/s), flags and reasons, in columns that do not change with the run.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

COLUMNS = ("workload", "case", "backend", "dtype", "device", "status", "correctness", "timing_method",
           "n", "p50_ms", "p95_ms", "min_ms", "mean_ms", "cv", "gbps", "tflops", "bytes_moved", "flops",
           "build_time_s", "peak_memory_mb", "flags", "reason")
STATS = ("n", "p50_ms", "p95_ms", "min_ms", "mean_ms", "cv")


def csv_row(cell: Mapping[str, Any]) -> dict[str, Any]:
    """One cell record as a CSV row: its stats flattened, its flags joined by ``;``."""
    stats = cell.get("stats") or {}
    row = {name: cell.get(name) for name in COLUMNS}
    row.update({name: stats.get(name) for name in STATS})
    row["flags"] = ";".join(cell.get("flags") or ())
    return {name: "" if value is None else value for name, value in row.items()}


def render_csv(record: Mapping[str, Any]) -> str:
    """The report record's cells as CSV text, a header row first."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_row(cell) for cell in record["benchmarks"])
    return out.getvalue()
