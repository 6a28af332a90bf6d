"""The roofline table: each timed cell's rates against the device the run measured (docs/report.md).

From the JSON record alone: a cell's minimal bytes and FLOPs (its workload's ``work()``) over
its p50, against the copy bandwidth the run measured on its card (``environment.device_facts.
copy_gbps``, the median of its copies). The
floor is the time the cell's bytes take at that bandwidth; p50 / floor says how far the cell
is from streaming its bytes as fast as a copy does. The HTML report's roofline plots the same
rates and lists them (apex_core/report/html/roofline.py). No run measures a peak FLOP rate, so there is no
compute roof here: FLOP/B and TFLOP/s say where the cell sits for a reader who knows the card.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apex_core.measure.device_fingerprint import fingerprint_of

COLUMNS = ("cell", "p50 us", "MB moved", "GFLOP", "FLOP/B", "GB/s", "share of copy", "floor us", "p50 / floor",
           "TFLOP/s")
HEADER = "| " + " | ".join(COLUMNS) + " |\n" + "| --- " * len(COLUMNS) + "|"


def _number(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}g}"


def copy_gbps_of(record: Mapping[str, Any]) -> float | None:
    """The copy bandwidth the cells are held against: the run's copy figure, as the HTML's roofline
    and the faster-than-physics flag take it (the fingerprint's best copy is for comparing cards)."""
    found = ((record.get("environment") or {}).get("device_facts") or {}).get("copy_gbps")
    return float(found) if isinstance(found, int | float) and found > 0 else None


def roofline_row(cell: Mapping[str, Any], copy_gbps: float | None) -> str | None:
    """One ok cell's row; None for a cell without a time or a byte count."""
    p50_ms = (cell.get("stats") or {}).get("p50_ms")
    moved, flops = cell.get("bytes_moved"), cell.get("flops")
    if cell.get("status") != "ok" or not p50_ms or not moved:
        return None
    seconds = p50_ms * 1e-3
    gbps = moved / seconds / 1e9
    floor_us = moved / (copy_gbps * 1e9) * 1e6 if copy_gbps else None
    name = "/".join(str(cell.get(key)) for key in ("workload", "case", "backend", "dtype"))
    return (f"| {name} | {_number(p50_ms * 1e3, 4)} | {_number(moved / 1e6, 4)} | "
            f"{_number(flops / 1e9 if flops else None)} | {_number(flops / moved if flops else None)} | "
            f"{_number(gbps, 4)} | {f'{gbps / copy_gbps:.0%}' if copy_gbps else '–'} | "
            f"{_number(floor_us, 4)} | {_number(p50_ms * 1e3 / floor_us if floor_us else None)} | "
            f"{_number(flops / seconds / 1e12 if flops else None)} |")


def render_roofline(record: Mapping[str, Any]) -> str:
    """The roofline table of a report record, with the device figures it was computed against."""
    copy = copy_gbps_of(record)
    found = fingerprint_of(record) or {}
    clock = found.get("sm_clock_under_load_mhz")
    against = (f"copy bandwidth {copy:.0f} GB/s" if copy else "no copy bandwidth (a CPU run, or none measured)")
    if isinstance(clock, int | float):
        against += f", SM clock under load {clock:.0f} MHz"
    device = (record.get("environment") or {}).get("gpu") or (record.get("environment") or {}).get("cpu")
    rows = [row for cell in record.get("benchmarks") or () if (row := roofline_row(cell, copy))]
    empty = "| (no ok cell with a time and a byte count) " + "| " * (len(COLUMNS) - 1) + "|"
    body = "\n".join(rows) if rows else empty
    return (f"# Roofline\n\n{device or 'device unknown'}; {against}. Bytes and FLOPs are each "
            f"workload's minimal count; floor = bytes / copy bandwidth.\n\n{HEADER}\n{body}\n")
