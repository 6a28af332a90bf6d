"""Aggregate what Triton's autotuner really selected, from the cells' metadata.

A backend that launches autotuned kernels puts a list under
``metadata["triton_autotune"]``; each entry has op_name, kernel_name,
shape_bucket, selected_config, selection_source, launches, cache_hits and
cache_misses. This module only sums them up for the report.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from apex_core.results import CellResult


def summarize_autotune(cells: Iterable[CellResult]) -> dict[str, Any]:
    """The report's ``triton_autotune`` block: a summary and one entry per kernel and shape."""
    merged: dict[tuple[str, str, str], dict[str, Any]] = {}
    for cell in cells:
        for entry in cell.metadata.get("triton_autotune", ()):
            key = (entry["op_name"], entry["kernel_name"], str(entry["shape_bucket"]))
            if key not in merged:
                merged[key] = {**entry, "launches": 0, "cache_hits": 0, "cache_misses": 0}
            for counter in ("launches", "cache_hits", "cache_misses"):
                merged[key][counter] += int(entry.get(counter, 0))
    entries = [merged[k] for k in sorted(merged)]
    hits = sum(e["cache_hits"] for e in entries)
    misses = sum(e["cache_misses"] for e in entries)
    return {
        "summary": {
            "cache_entries": len(entries),
            "launches": sum(e["launches"] for e in entries),
            "cache_hits": hits,
            "cache_misses": misses,
            "cache_hit_rate": hits / (hits + misses) if hits + misses else 0.0,
        },
        "entries": entries,
    }
